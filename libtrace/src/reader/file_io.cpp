#include "reader/file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace stallscope::reader::detail {

File::~File() {
  if (fd_ >= 0) ::close(fd_);
}

File::File(File&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), mem_(std::exchange(o.mem_, nullptr)), size_(o.size_) {}

File& File::operator=(File&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    mem_ = std::exchange(o.mem_, nullptr);
    size_ = o.size_;
  }
  return *this;
}

bool File::open(const std::string& path, std::string* why) {
  // O_NONBLOCK: a FIFO given as a trace file is refused (below), not waited on.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    *why = std::strerror(errno);
    return false;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    *why = std::strerror(errno);
    ::close(fd);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *why = S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file";
    ::close(fd);
    return false;
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  size_ = static_cast<uint64_t>(st.st_size);
  return true;
}

void File::open_memory(const uint8_t* data, size_t n) noexcept {
  mem_ = data;
  size_ = n;
}

bool File::read_at(uint64_t off, void* buf, size_t n) const noexcept {
  if (mem_ != nullptr || fd_ < 0) {
    if (off > size_ || n > size_ - off) return false;
    if (n > 0) std::memcpy(buf, mem_ + off, n);
    return true;
  }
  auto* out = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t got = ::pread(fd_, out, n, static_cast<off_t>(off));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    out += got;
    off += static_cast<uint64_t>(got);
    n -= static_cast<size_t>(got);
  }
  return true;
}

}  // namespace stallscope::reader::detail
