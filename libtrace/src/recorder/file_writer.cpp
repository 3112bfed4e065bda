#include "recorder/file_writer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "common/checksum.hpp"
#include "stallscope/clock.hpp"
#include "stallscope/internal/fd_limits.hpp"

namespace stallscope::detail {

namespace {
// Files of one process id in one run: an image per exec, or a reused pid.
constexpr uint32_t kMaxSameBase = 1u << 16;

bool same_file(int fd, uint64_t dev, uint64_t ino, struct stat* st) {
  return ::fstat(fd, st) == 0 && st->st_dev == dev && st->st_ino == ino;
}
}  // namespace

int DirHandle::open(const std::string& path) {
  release();
  // Its real path: a symlink on the way (STALLSCOPE_OUT=/scratch/latest)
  // pointed elsewhere later moves nothing.
  char real[PATH_MAX];
  path_ = ::realpath(path.c_str(), real) != nullptr ? std::string(real) : path;
  int fd = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -errno;
  struct stat st{};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return -err;
  }
  fd = sys::move_fd_high(fd);
  if (fd < 0) return -EMFILE;
  fd_ = fd;
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  return 0;
}

int DirHandle::get() {
  if (fd_ < 0) return -1;
  struct stat st{};
  if (same_file(fd_, dev_, ino_, &st)) return fd_;
  // The program closed it (and may have reused the number): reopened by
  // path only if the path still names our directory.
  fd_ = -1;
  int fd = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  if (!same_file(fd, dev_, ino_, &st)) {
    ::close(fd);
    return -1;
  }
  fd_ = sys::move_fd_high(fd);
  return fd_;
}

bool DirHandle::at_its_path() const {
  struct stat st{};
  return ::stat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_;
}

void DirHandle::release() {
  struct stat st{};
  if (fd_ >= 0 && same_file(fd_, dev_, ino_, &st)) ::close(fd_);
  fd_ = -1;
}

FileWriter::~FileWriter() {
  if (fd_is_ours()) ::close(fd_);
}

bool FileWriter::fd_is_ours() const {
  struct stat st{};
  return fd_ >= 0 && same_file(fd_, dev_, ino_, &st);
}

std::string FileWriter::segment_name(uint32_t seg) const {
  if (!opts_.ring) return opts_.base + ".sst";
  return opts_.base + ".seg" + std::to_string(seg) + ".sst";
}

std::string FileWriter::segment_path(uint32_t seg) const {
  return opts_.dir + "/" + segment_name(seg);
}

// A file of this name already exists when an earlier image of this process
// (before an exec) or an earlier process of the same id wrote it, or when
// something else was put there: it is never opened, truncated or followed;
// the next free name "<base>.<N>" is taken instead.
int FileWriter::open(const WriterOptions& opts, std::string* error) {
  opts_ = opts;
  if (const int rc = dir_.open(opts.dir); rc != 0) {
    if (error) *error = "cannot open run directory " + opts.dir + ": " + std::strerror(-rc);
    return rc;
  }
  for (uint32_t k = 0; k < kMaxSameBase; ++k) {
    opts_.base = k == 0 ? opts.base : opts.base + "." + std::to_string(k);
    const int rc = open_segment(error);
    if (rc != -EEXIST) return rc;
    struct stat st{};
    if (k == 0 &&
        ::fstatat(dir_.get(), segment_name(segment_).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        !S_ISREG(st.st_mode))
      note_ = path_ + " is not a regular file: left alone, recording into " + opts.base + ".<N>";
  }
  return -EEXIST;
}

int FileWriter::open_segment(std::string* error) {
  path_ = segment_path(segment_);
  const std::string name = segment_name(segment_);
  // In the run directory's descriptor; O_EXCL | O_NOFOLLOW: never through a
  // planted symlink, never into a FIFO or someone else's file; O_NONBLOCK:
  // even the attempt cannot wait.
  const int dir = dir_.get();
  int fd = dir < 0 ? (errno = ENOENT, -1)
                   : ::openat(dir, name.c_str(),
                              O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
                              0644);
  // Away from the low numbers the program counts on (stallscope/internal/fd_limits.hpp).
  const bool created = fd >= 0;
  if (created) fd = sys::move_fd_high(fd);
  if (fd < 0) {
    int err = errno;
    if (created) ::unlinkat(dir, name.c_str(), 0);
    if (error) *error = "cannot create " + path_ + ": " + std::strerror(err);
    return -err;
  }
  struct stat st{};
  ::fstat(fd, &st);
  fd_ = fd;
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  offset_ = 0;
  seq_ = 0;

  format::FileHeader h = opts_.header;
  std::memcpy(h.magic, format::kMagic, sizeof h.magic);
  h.version_major = format::kVersionMajor;
  h.version_minor = format::kVersionMinor;
  h.header_bytes = sizeof h;
  h.segment = segment_;
  h.ring_discarded = ring_discarded_;
  if (opts_.ring) h.flags |= format::kFileRingSegment;
  h.crc32 = checksum(&h, offsetof(format::FileHeader, crc32));
  if (!write_all(&h, sizeof h)) {
    if (error) *error = failure_;
    return -EIO;
  }
  return 0;
}

void FileWriter::fail(const std::string& what, int err) {
  if (failed_) return;
  failed_ = true;
  failure_ = what + " " + path_ + ": " + std::strerror(err) + "; tracing stopped";
}

bool FileWriter::write_all(const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    ssize_t w = ::pwrite(fd_, p, n, static_cast<off_t>(offset_));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      fail("cannot write", w < 0 ? errno : ENOSPC);
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
    offset_ += static_cast<uint64_t>(w);
    total_bytes_ += static_cast<uint64_t>(w);
  }
  return true;
}

bool FileWriter::check_descriptor() {
  if (failed_) return false;
  struct stat st{};
  if (same_file(fd_, dev_, ino_, &st)) {
    // Deleted (the run directory removed, most likely), or the directory
    // moved away or replaced: writing on would hold disk space up to the
    // budget for a file nobody looks for (RELIABILITY.md 44).
    if (st.st_nlink == 0) {
      failed_ = true;
      failure_ = path_ + " was deleted (the run directory removed?); tracing stopped";
      return false;
    }
    if (!dir_.at_its_path()) {
      failed_ = true;
      failure_ = path_ + ": the run directory was moved, removed or replaced; tracing stopped";
      return false;
    }
    return true;
  }
  // The program closed our descriptor (and may have reused the number):
  // never write through it again. Reopen our own file by its name.
  const int dir = dir_.get();
  int fd = dir < 0 ? -1
                   : ::openat(dir, segment_name(segment_).c_str(),
                              O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 || !same_file(fd, dev_, ino_, &st)) {
    if (fd >= 0) ::close(fd);
    fail("lost the descriptor of", EBADF);
    return false;
  }
  fd = sys::move_fd_high(fd);
  if (fd < 0) {
    fail("lost the descriptor of", EMFILE);
    return false;
  }
  fd_ = fd;
  return true;
}

bool FileWriter::emit(format::ChunkType type, const uint8_t* payload, uint32_t bytes) {
  format::ChunkHeader c{};
  c.magic = format::kChunkMagic;
  c.type = static_cast<uint16_t>(type);
  c.payload_bytes = bytes;
  c.payload_crc32 = checksum(payload, bytes);
  c.seq = seq_++;
  c.clock = sample_clock_triple();
  // One write of both: a reader never sees a header without payload unless
  // the process died inside this call. No staging buffer: the flusher
  // allocates nothing from the C heap (RELIABILITY.md 39).
  iovec iov[2] = {{&c, sizeof c}, {const_cast<uint8_t*>(payload), bytes}};
  ssize_t w;
  do {
    w = ::pwritev(fd_, iov, bytes != 0 ? 2 : 1, static_cast<off_t>(offset_));
  } while (w < 0 && errno == EINTR);
  if (w <= 0) {
    fail("cannot write", w < 0 ? errno : ENOSPC);
    return false;
  }
  offset_ += static_cast<uint64_t>(w);
  total_bytes_ += static_cast<uint64_t>(w);
  auto done = static_cast<size_t>(w);
  if (done == sizeof c + bytes) return true;
  // A short write (a disk nearly full): the rest piece by piece.
  if (done < sizeof c) {
    if (!write_all(reinterpret_cast<const uint8_t*>(&c) + done, sizeof c - done)) return false;
    done = sizeof c;
  }
  return write_all(payload + (done - sizeof c), bytes - (done - sizeof c));
}

bool FileWriter::rotate() {
  std::vector<uint8_t> end;  // segments end with an End chunk of their own
  format::EndSummary s{};
  s.end_mono_ns = static_cast<uint64_t>(mono_ns());
  s.bytes_written = offset_;
  end.resize(sizeof s);
  std::memcpy(end.data(), &s, sizeof s);
  emit(format::ChunkType::kEnd, end.data(), static_cast<uint32_t>(end.size()));
  ::close(fd_);
  fd_ = -1;
  ++segment_;
  if (segment_ >= kRingSegments) {
    uint32_t old = segment_ - kRingSegments;
    if (const int dir = dir_.get(); dir >= 0) ::unlinkat(dir, segment_name(old).c_str(), 0);
    ring_discarded_ += segment_events_[old % kRingSegments];
  }
  segment_events_[segment_ % kRingSegments] = 0;
  std::string err;
  if (open_segment(&err) != 0) {
    failed_ = true;
    failure_ = err + "; tracing stopped";
    return false;
  }
  for (auto& [type, data] : sticky_)
    if (!emit(type, data.data(), static_cast<uint32_t>(data.size()))) return false;
  return true;
}

FileWriter::Write FileWriter::write_chunk(format::ChunkType type, const uint8_t* payload,
                                          uint32_t bytes, bool sticky, uint64_t events) {
  if (failed_ || fd_ < 0) return Write::kFailed;
  // Kept for the ring's next segments only: a copy made on the flusher
  // would give it a malloc arena (RELIABILITY.md 39).
  if (sticky && opts_.ring) sticky_.emplace_back(type, std::vector<uint8_t>(payload, payload + bytes));
  const uint64_t need = sizeof(format::ChunkHeader) + bytes;
  if (opts_.max_bytes != 0) {
    if (opts_.ring) {
      const uint64_t seg_max = opts_.max_bytes / kRingSegments;
      if (offset_ + need > seg_max && type == format::ChunkType::kEvents && !rotate())
        return Write::kFailed;
    } else if (budget_spent_ || total_bytes_ + need > opts_.max_bytes) {
      // Spent at the first events chunk refused: none after it is written
      // either, so what comes later is all past the budget.
      if (type == format::ChunkType::kEvents) budget_spent_ = true;
      return Write::kBudget;
    }
  }
  if (!emit(type, payload, bytes)) return Write::kFailed;
  segment_events_[segment_ % kRingSegments] += events;
  return Write::kOk;
}

uint32_t FileWriter::chunk_target() const {
  constexpr uint64_t kDefault = 8u << 20, kMin = 64u << 10;
  if (opts_.max_bytes == 0) return kDefault;
  // Chunks small against the budget: a stop-mode file fills up to its
  // budget, and a ring segment holds several chunks.
  const uint64_t t = opts_.max_bytes / (opts_.ring ? kRingSegments : 1) / 16;
  return static_cast<uint32_t>(t < kMin ? kMin : t > kDefault ? kDefault : t);
}

bool FileWriter::seal(const std::vector<uint8_t>& end_payload) {
  if (failed_ || fd_ < 0 || sealed_ || !check_descriptor()) return false;
  seal_offset_ = offset_;
  seal_total_ = total_bytes_;
  seal_seq_ = seq_;
  sealed_ = emit(format::ChunkType::kEnd, end_payload.data(),
                 static_cast<uint32_t>(end_payload.size()));
  return sealed_;
}

bool FileWriter::unseal() {
  if (!sealed_) return !failed_;
  sealed_ = false;
  // The program may have closed every descriptor before its exec failed.
  if (failed_ || !check_descriptor()) return false;
  if (::ftruncate(fd_, static_cast<off_t>(seal_offset_)) != 0) {
    fail("cannot take the End chunk back from", errno);
    return false;
  }
  offset_ = seal_offset_;
  total_bytes_ = seal_total_;
  seq_ = seal_seq_;
  return true;
}

void FileWriter::close(const std::vector<uint8_t>& end_payload) {
  if (fd_ < 0) return;
  if (!failed_ && check_descriptor())
    emit(format::ChunkType::kEnd, end_payload.data(), static_cast<uint32_t>(end_payload.size()));
  if (fd_is_ours()) ::close(fd_);
  fd_ = -1;
}

void FileWriter::release() {
  if (fd_is_ours()) ::close(fd_);
  fd_ = -1;
  dir_.release();
}

}  // namespace stallscope::detail

