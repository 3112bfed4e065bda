#include "file_table.hpp"

#include <errno.h>
#include <fcntl.h>

#include <cstring>

#include "log.hpp"

namespace stallscope::loader::detail {

namespace {
constexpr uint32_t kMaxOpenIdle = 256;          // idle fds kept open before closing
constexpr uint64_t kAutoDirectMean = 64 << 10;  // auto O_DIRECT from this mean sample size

std::string where(const std::string& path, uint64_t offset) {
  return path + ": offset " + std::to_string(offset) + ": ";
}
}  // namespace

FileTable::FileTable(const Dataset& ds, Sys& sys, Toggle direct) noexcept
    : ds_(ds), sys_(sys), direct_(direct) {
  try {
    files_.resize(ds.files().size());
  } catch (...) {
  }
  direct_by_size_ = ds.size() > 0 && ds.total_bytes() / ds.size() >= kAutoDirectMean;
}

FileTable::~FileTable() { close_all(); }

bool FileTable::wants_direct(uint32_t) const noexcept {
  return direct_ == Toggle::kOn || (direct_ == Toggle::kAuto && direct_by_size_);
}

int FileTable::open_file(uint32_t file, OpenFile& f, std::string* error) noexcept {
  const std::string& p = ds_.files()[file].path;
  f.direct = wants_direct(file);
  f.fd = sys_.open(p.c_str(), O_RDONLY | (f.direct ? O_DIRECT : 0));
  if (f.fd < 0 && f.direct && errno == EINVAL) {
    STALLSCOPE_LOADER_NOTE_ONCE("O_DIRECT refused by the filesystem of %s; reading buffered",
                                p.c_str());
    ++direct_fallbacks_;
    f.direct = false;
    f.fd = sys_.open(p.c_str(), O_RDONLY);
  }
  if (f.fd < 0) {
    const int e = errno;
    if (error) *error = where(p, 0) + "cannot open: " + std::strerror(e);
    return -e;
  }
  struct stat st {};
  if (sys_.fstat(f.fd, &st) != 0) st.st_size = 0;
  f.size = static_cast<uint64_t>(st.st_size);
  f.tier = classify_file(sys_, f.fd);
  f.nowait_ok = f.tier.method == format::CacheMethod::kNowait;
  f.name = intern(p);
  ++open_count_;
  return 0;
}

OpenFile* FileTable::acquire(uint32_t file, uint64_t offset, std::string* error) noexcept {
  if (file >= files_.size()) return nullptr;
  OpenFile& f = files_[file];
  if (f.fd < 0 && open_file(file, f, error) < 0) {
    if (error) *error = where(path(file), offset) + error->substr(error->find("cannot"));
    return nullptr;
  }
  const uint64_t listed = ds_.files()[file].size;
  if (f.size != listed) {
    if (error)
      *error = where(path(file), std::min(f.size, listed)) + "file size changed from " +
               std::to_string(listed) + " to " + std::to_string(f.size) +
               " bytes since the dataset was listed";
    return nullptr;
  }
  ++f.users;
  return &f;
}

void FileTable::release(uint32_t file) noexcept {
  OpenFile& f = files_[file];
  if (f.users > 0) --f.users;
  if (f.users == 0 && open_count_ > kMaxOpenIdle) close_file(f);
}

void FileTable::refuse_direct(uint32_t file) noexcept {
  OpenFile& f = files_[file];
  if (!f.direct) return;
  STALLSCOPE_LOADER_NOTE_ONCE("O_DIRECT read refused (EINVAL) on %s; reading buffered",
                              path(file).c_str());
  ++direct_fallbacks_;
  const int fd = buffered_fd(file);
  if (fd < 0) return;
  f.retired_fd = f.fd;  // closed with the file, once no request can use it
  f.fd = fd;
  f.buffered_fd = -1;
  f.direct = false;
}

int FileTable::buffered_fd(uint32_t file) noexcept {
  OpenFile& f = files_[file];
  if (!f.direct) return f.fd;
  if (f.buffered_fd < 0) f.buffered_fd = sys_.open(path(file).c_str(), O_RDONLY);
  return f.buffered_fd;
}

void FileTable::close_file(OpenFile& f) noexcept {
  if (f.fd >= 0) {
    sys_.close(f.fd);
    --open_count_;
  }
  if (f.buffered_fd >= 0) sys_.close(f.buffered_fd);
  if (f.retired_fd >= 0) sys_.close(f.retired_fd);
  f.fd = f.buffered_fd = f.retired_fd = -1;
}

void FileTable::close_all() noexcept {
  for (auto& f : files_) close_file(f);
}

}  // namespace stallscope::loader::detail
