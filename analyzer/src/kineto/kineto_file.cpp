// A PyTorch profiler file as a stream of JSON bytes (gzip inflated through
// zlib as it is read, its size and ratio checked on the way), and
// recognizing one by its content.
#include <fcntl.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "kineto/kineto_internal.hpp"
#include "stallscope/internal/fd.hpp"

namespace stallscope::analyzer::kineto {

namespace {

constexpr size_t kChunk = size_t{1} << 20;
// The most JSON a file may hold (--max-json-mb stops at 4095 MiB).
constexpr uint64_t kMaxJson = (uint64_t{1} << 32) - 1;
constexpr size_t kSniffBytes = 64u << 10;
// Profiler JSON deflates 10- to 30-fold; past this ratio (deflate's ceiling
// is ~1032) after kBombCheckBytes of output a file is no trace but a bomb,
// and is refused while it streams.
constexpr uint64_t kMaxInflateRatio = 100;
constexpr uint64_t kBombCheckBytes = uint64_t{64} << 20;

[[noreturn]] void fail_errno(const std::string& path, const char* what) {
  throw ImportError(path + ": " + what + ": " + std::strerror(errno));
}

// Reads up to n bytes at offset; short only at EOF.
size_t read_at(int fd, char* buf, size_t n, uint64_t off, const std::string& path) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, buf + got, n - got, static_cast<off_t>(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail_errno(path, "read");
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

bool is_gzip(int fd, const std::string& path) {
  unsigned char m[2] = {0, 0};
  return read_at(fd, reinterpret_cast<char*>(m), 2, 0, path) == 2 && m[0] == 0x1f && m[1] == 0x8b;
}

uint64_t file_size(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail_errno(path, "stat");
  if (!S_ISREG(st.st_mode)) throw ImportError(path + ": not a regular file");
  return static_cast<uint64_t>(st.st_size);
}

// gzip's trailer holds the uncompressed size mod 2^32: a first guess for
// read_json's buffer, never past what the ratio check lets through
// unchecked (kBombCheckBytes).
size_t size_hint(int fd, uint64_t compressed, const std::string& path) {
  unsigned char t[4] = {0, 0, 0, 0};
  if (compressed < 18 || read_at(fd, reinterpret_cast<char*>(t), 4, compressed - 4, path) != 4)
    return kChunk;
  const uint64_t isize = t[0] | (t[1] << 8) | (t[2] << 16) | (uint64_t{t[3]} << 24);
  return std::clamp<uint64_t>(isize, kChunk, kBombCheckBytes);
}

void check_ratio(uint64_t out, uint64_t in, const std::string& path) {
  if (out < kBombCheckBytes || out <= in * kMaxInflateRatio) return;
  throw ImportError(path + ": inflates " + std::to_string(out / std::max<uint64_t>(in, 1)) +
                    "-fold (" + std::to_string(out >> 20) + " MiB from " +
                    std::to_string(in >> 10) + " KiB of gzip so far; a profiler trace at most " +
                    std::to_string(kMaxInflateRatio) + "-fold): not a profiler trace; refused");
}

[[noreturn]] void fail_limit(const std::string& path, uint64_t limit) {
  throw ImportError(path + ": decompressed JSON passes the limit of " +
                    std::to_string(limit >> 20) +
                    " MiB (raise it with --max-json-mb; at most 4095)");
}

// A file's bytes as they are.
class PlainSource final : public Source {
 public:
  PlainSource(internal::Fd fd, uint64_t size, std::string path)
      : fd_(std::move(fd)), size_(size), path_(std::move(path)) {}
  size_t read(char* dst, size_t n) override {
    n = static_cast<size_t>(std::min<uint64_t>(n, size_ - off_));
    const size_t got = read_at(fd_.get(), dst, n, off_, path_);
    if (got < n)
      throw ImportError(path_ + ": shrank while being read (" + std::to_string(off_ + got) +
                        " of " + std::to_string(size_) + " bytes)");
    off_ += got;
    return got;
  }

 private:
  internal::Fd fd_;
  uint64_t size_, off_ = 0;
  std::string path_;
};

// A gzip file inflated as it is read: the size limit and the bomb check
// run on every piece, so a bomb is refused having cost one window.
class GzipSource final : public Source {
 public:
  GzipSource(internal::Fd fd, std::string path, uint64_t limit, bool lenient)
      : fd_(std::move(fd)),
        path_(std::move(path)),
        limit_(limit),
        lenient_(lenient),
        in_(new char[kChunk]) {
    if (inflateInit2(&zs_, 15 + 32) != Z_OK) throw ImportError(path_ + ": zlib: cannot initialize");
  }
  ~GzipSource() override { inflateEnd(&zs_); }
  GzipSource(const GzipSource&) = delete;
  GzipSource& operator=(const GzipSource&) = delete;

  size_t read(char* dst, size_t n) override {
    size_t got = 0;
    try {
      while (got < n && !done_ && input()) got += inflate_into(dst + got, n - got);
    } catch (const ImportError&) {
      if (!lenient_) throw;
      done_ = true;
    }
    return got;
  }

 private:
  // Makes input available; false at the end of the data (checked).
  bool input() {
    if (ended_) {
      // Concatenated members (gzip allows them) go on; anything else after
      // the last one is ignored.
      if (zs_.avail_in == 0) refill();
      if (zs_.avail_in == 0 || zs_.next_in[0] != 0x1f) {
        done_ = true;
        return false;
      }
      inflateReset(&zs_);
      ended_ = false;
      return true;
    }
    if (zs_.avail_in > 0 || full_) return true;  // full_: a match may still be copying
    refill();
    if (zs_.avail_in > 0) return true;
    done_ = true;
    if (!lenient_)
      throw ImportError(path_ + ": truncated gzip: the compressed data ends at byte " +
                        std::to_string(in_off_) + " before the end of the stream (" +
                        std::to_string(out_) + " bytes of JSON recovered)");
    return false;
  }
  void refill() {
    const size_t n = read_at(fd_.get(), in_.get(), kChunk, in_off_, path_);
    in_off_ += n;
    zs_.next_in = reinterpret_cast<Bytef*>(in_.get());
    zs_.avail_in = static_cast<uInt>(n);
  }
  size_t inflate_into(char* dst, size_t n) {
    zs_.next_out = reinterpret_cast<Bytef*>(dst);
    zs_.avail_out = static_cast<uInt>(std::min<size_t>(n, UINT32_MAX));
    const uInt room = zs_.avail_out;
    const int rc = inflate(&zs_, Z_NO_FLUSH);
    const size_t made = room - zs_.avail_out;
    full_ = zs_.avail_out == 0;
    out_ += made;
    const uint64_t consumed = in_off_ - zs_.avail_in;
    if (out_ > limit_) fail_limit(path_, limit_);
    // Checked as the output streams: one 1 MiB piece of a bomb inflates to a gigabyte.
    check_ratio(out_, consumed, path_);
    if (rc == Z_STREAM_END)
      ended_ = true;
    else if (rc != Z_OK && !(rc == Z_BUF_ERROR && zs_.avail_in == 0))
      throw ImportError(path_ + ": corrupt gzip data near compressed byte " +
                        std::to_string(consumed) + ": " +
                        (zs_.msg != nullptr ? zs_.msg : "inflate error"));
    return made;
  }

  internal::Fd fd_;
  std::string path_;
  uint64_t limit_;
  bool lenient_;
  std::unique_ptr<char[]> in_;
  z_stream zs_{};
  uint64_t in_off_ = 0, out_ = 0;
  bool ended_ = false, done_ = false, full_ = false;
};

class MemorySource final : public Source {
 public:
  explicit MemorySource(std::string_view text) : text_(text) {}
  size_t read(char* dst, size_t n) override {
    n = std::min(n, text_.size() - off_);
    std::memcpy(dst, text_.data() + off_, n);
    off_ += n;
    return n;
  }

 private:
  std::string_view text_;
  size_t off_ = 0;
};

size_t skip_space(std::string_view s, size_t i) {
  if (s.substr(i, 3) == "\xEF\xBB\xBF") i += 3;  // UTF-8 byte order mark
  while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) ++i;
  return i;
}

}  // namespace

std::unique_ptr<Source> open_source(const std::string& path, uint64_t max_bytes, bool lenient) {
  internal::Fd fd = internal::Fd::open_read(path);  // a FIFO is refused, not waited on
  if (fd.get() < 0) fail_errno(path, "open");
  const uint64_t size = file_size(fd.get(), path);
  const uint64_t limit = std::min(max_bytes, kMaxJson);
  if (is_gzip(fd.get(), path))
    return std::make_unique<GzipSource>(std::move(fd), path, limit, lenient);
  if (size > limit && !lenient)
    throw ImportError(path + ": " + std::to_string(size >> 20) +
                      " MiB of JSON passes the limit of " + std::to_string(limit >> 20) +
                      " MiB (raise it with --max-json-mb; at most 4095)");
  return std::make_unique<PlainSource>(std::move(fd), size, path);
}

std::unique_ptr<Source> memory_source(std::string_view text) {
  return std::make_unique<MemorySource>(text);
}

std::string read_json(const std::string& path, uint64_t max_bytes) {
  size_t first = kChunk;
  {
    const internal::Fd fd = internal::Fd::open_read(path);
    if (fd.get() < 0) fail_errno(path, "open");
    const uint64_t size = file_size(fd.get(), path);
    first = is_gzip(fd.get(), path) ? size_hint(fd.get(), size, path) : size;
  }
  const auto src = open_source(path, max_bytes, false);
  // One byte more than the hint: the read that finds the end needs room,
  // and must not be what doubles the buffer.
  std::string s;
  s.resize(first + 1 + simdjson::SIMDJSON_PADDING);
  size_t used = 0;
  for (;;) {
    if (used + simdjson::SIMDJSON_PADDING == s.size()) s.resize(s.size() * 2);
    const size_t n = src->read(s.data() + used, s.size() - used - simdjson::SIMDJSON_PADDING);
    if (n == 0) break;
    used += n;
  }
  s.resize(used);
  return s;
}

bool sniff(const std::string& path) {
  std::string head;
  try {
    head.resize(kSniffBytes);
    const auto src = open_source(path, kMaxJson, true);
    size_t used = 0;
    while (used < head.size()) {
      const size_t n = src->read(head.data() + used, head.size() - used);
      if (n == 0) break;
      used += n;
    }
    head.resize(used);
  } catch (const ImportError&) {
    return false;  // unreadable: not ours to claim
  }
  const std::string_view s = head;
  size_t i = skip_space(s, 0);
  if (i >= s.size()) return false;
  if (s[i] == '{') {
    if (s.find("\"generator\":\"stallscope\"") != std::string_view::npos) return false;
    return s.find("\"traceEvents\"") != std::string_view::npos ||
           s.find("\"schemaVersion\"") != std::string_view::npos;
  }
  if (s[i] != '[') return false;
  i = skip_space(s, i + 1);
  if (i < s.size() && s[i] == ']') return true;  // an empty trace
  return i < s.size() && s[i] == '{' && s.find("\"ph\"") != std::string_view::npos;
}

}  // namespace stallscope::analyzer::kineto
