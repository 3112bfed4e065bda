#include "cli_files.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <streambuf>

#include "stallscope/file_summary.hpp"  // terminal_safe

namespace stallscope::cli {

namespace {

// A stream buffer over a descriptor that keeps the first write error, so a
// full disk or a closed reader is reported instead of lost in an ofstream.
class FdBuf : public std::streambuf {
 public:
  explicit FdBuf(int fd) : fd_(fd) { setp(buf_, buf_ + sizeof buf_); }
  int error() const { return err_; }

 protected:
  int_type overflow(int_type c) override {
    if (sync() != 0) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }

  int sync() override {
    const char* p = pbase();
    auto n = static_cast<size_t>(pptr() - pbase());
    while (n > 0 && err_ == 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        err_ = w < 0 ? errno : EIO;
        break;
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
    setp(buf_, buf_ + sizeof buf_);
    return err_ == 0 ? 0 : -1;
  }

 private:
  int fd_;
  int err_ = 0;
  char buf_[64 * 1024];
};

std::string errno_text(const std::string& path, int err) {
  return path + ": " + std::strerror(err);
}

// Fills the open descriptor; the first error, as errno (0: none).
int fill_fd(int fd, const std::function<void(std::ostream&)>& fill) {
  FdBuf buf(fd);
  {
    std::ostream out(&buf);
    fill(out);
    out.flush();
  }
  return buf.error();
}

bool is_under(const std::string& path, const char* prefix) {
  return path.rfind(prefix, 0) == 0;
}

// An existing special destination the user named, written where it is.
std::string write_in_place(const std::string& dest, const struct stat& st,
                           const std::function<void(std::ostream&)>& fill) {
  if (S_ISDIR(st.st_mode)) return dest + ": is a directory";
  // A FIFO blocks here until it has a reader, as the shell's `>` does. A
  // regular file reached through /dev/stdout or /dev/fd/N is appended to:
  // the descriptor behind it may hold output already (or be `>>`).
  const int fd = ::open(dest.c_str(), O_WRONLY | O_CLOEXEC | (S_ISREG(st.st_mode) ? O_APPEND : 0));
  if (fd < 0) return errno_text(dest, errno);
  const int err = fill_fd(fd, fill);
  const int closed = ::close(fd) == 0 ? 0 : errno;
  if (err != 0 || closed != 0) return errno_text(dest, err != 0 ? err : closed);
  return "";
}

mode_t new_file_mode() {
  const mode_t mask = ::umask(022);
  ::umask(mask);
  return 0666 & ~mask;
}

std::string write_replacing(const std::string& dest, mode_t mode,
                            const std::function<void(std::ostream&)>& fill) {
  const size_t slash = dest.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : dest.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? dest : dest.substr(slash + 1);
  if (base.empty()) return dest + ": names a directory, not a file";
  std::string tmp = dir + (dir.back() == '/' ? "" : "/") + "." + base + ".XXXXXX";
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return errno_text(dest, errno) + " (cannot create a file in its directory)";
  int err = ::fchmod(fd, mode) == 0 ? 0 : errno;
  try {
    if (err == 0) err = fill_fd(fd, fill);
  } catch (...) {  // out of memory while rendering: no temporary left behind
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err == 0 && ::rename(tmp.c_str(), dest.c_str()) != 0) err = errno;
  if (err != 0) {
    ::unlink(tmp.c_str());
    return errno_text(dest, err);
  }
  return "";
}

}  // namespace

std::string write_output(const std::string& dest, OutputOwner owner,
                         const std::function<void(std::ostream&)>& fill) {
  if (dest == "-") {
    fill(std::cout);
    std::cout.flush();
    return std::cout ? "" : "standard output: write failed";
  }
  if (dest.empty()) return "an empty path";
  struct stat st {};
  const bool exists = ::stat(dest.c_str(), &st) == 0;
  // /dev/stdout and /proc/self/fd/N resolve to whatever the descriptor is,
  // a regular file included: still written in place, never renamed over.
  const bool special = exists && (!S_ISREG(st.st_mode) || is_under(dest, "/dev/") ||
                                  is_under(dest, "/proc/"));
  if (special) {
    if (owner == OutputOwner::kStallscope)
      return dest + ": not a regular file (left as it is)";
    return write_in_place(dest, st, fill);
  }
  return write_replacing(dest, exists ? (st.st_mode & 07777) : new_file_mode(), fill);
}

std::string not_a_regular_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno_text(path, errno);
  if (S_ISDIR(st.st_mode)) return path + ": is a directory";
  if (!S_ISREG(st.st_mode)) return path + ": not a regular file";
  return "";
}

namespace {

const char* type_name(mode_t mode) {
  if (S_ISFIFO(mode)) return "FIFO";
  if (S_ISSOCK(mode)) return "socket";
  if (S_ISCHR(mode)) return "character device";
  if (S_ISBLK(mode)) return "block device";
  if (S_ISDIR(mode)) return "directory";
  return "special file";
}

bool looks_like_input(const std::string& name) {
  for (const char* ext : {".sst", ".json", ".json.gz"}) {
    const size_t n = std::strlen(ext);
    if (name.size() > n && name.compare(name.size() - n, n, ext) == 0) return true;
  }
  return false;
}

// Why the entry `path` of a directory is skipped as input ("" when it is a
// regular file, or a symlink to one).
std::string skipped_because(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    struct stat link {};
    const bool dangling = ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
    return std::string(dangling ? "a symlink that cannot be followed (" : "cannot be read (") +
           std::strerror(errno) + ")";
  }
  if (S_ISREG(st.st_mode)) return "";
  return std::string("not a regular file (") + type_name(st.st_mode) + ")";
}

}  // namespace

size_t note_skipped_inputs(const std::string& cmd, const std::vector<std::string>& paths) {
  size_t named = 0;
  for (const auto& dir : paths) {
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) continue;
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d))
      if (looks_like_input(e->d_name)) names.emplace_back(e->d_name);
    ::closedir(d);
    std::sort(names.begin(), names.end());
    const std::string prefix = dir + (dir.ends_with('/') ? "" : "/");
    for (const auto& name : names) {
      const std::string why = skipped_because(prefix + name);
      if (why.empty()) continue;
      std::cerr << "stallscope " << cmd << ": "
                << reader::terminal_safe(prefix + name + ": " + why + "; skipped") << "\n";
      ++named;
    }
  }
  return named;
}

std::string read_input_file(const std::string& path, std::string* out, size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return errno_text(path, errno);
  struct stat st {};
  std::string why;
  if (::fstat(fd, &st) != 0) {
    why = errno_text(path, errno);
  } else if (!S_ISREG(st.st_mode)) {
    why = path + (S_ISDIR(st.st_mode) ? ": is a directory" : ": not a regular file");
  } else if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    why = path + ": " + std::to_string(st.st_size) + " bytes, more than the " +
          std::to_string(max_bytes) + " this input may have";
  }
  out->clear();
  char buf[64 * 1024];
  while (why.empty()) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) why = errno_text(path, errno);
    if (n <= 0) break;
    if (out->size() + static_cast<size_t>(n) > max_bytes) {
      why = path + ": grew past " + std::to_string(max_bytes) + " bytes while read";
      break;
    }
    out->append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return why;
}

}  // namespace stallscope::cli
