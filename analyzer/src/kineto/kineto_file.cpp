// Reading a PyTorch profiler file into memory (gzip streamed through zlib)
// and recognizing one by its content.
#include <fcntl.h>
#include <simdjson.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "kineto/kineto.hpp"
#include "stallscope/internal/fd.hpp"

namespace stallscope::analyzer::kineto {

namespace {

constexpr size_t kChunk = size_t{1} << 20;
// simdjson parses documents of up to 4 GiB; a larger JSON cannot be read.
constexpr uint64_t kMaxJson = (uint64_t{1} << 32) - 1;
constexpr size_t kSniffBytes = 64u << 10;
// Profiler JSON deflates 10- to 30-fold; past this ratio (deflate's ceiling
// is ~1032) after kBombCheckBytes of output a file is no trace but a bomb,
// and is refused before it costs gigabytes.
constexpr uint64_t kMaxInflateRatio = 100;
constexpr uint64_t kBombCheckBytes = uint64_t{64} << 20;
// The first buffer, from the size gzip's trailer claims: at most this many
// times the compressed size, so a lying trailer costs nothing up front.
constexpr uint64_t kHintRatio = 64;

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

// gzip's trailer holds the uncompressed size mod 2^32: a first guess for the buffer.
size_t size_hint(int fd, uint64_t compressed, const std::string& path) {
  unsigned char t[4] = {0, 0, 0, 0};
  if (compressed < 18 || read_at(fd, reinterpret_cast<char*>(t), 4, compressed - 4, path) != 4)
    return kChunk;
  const uint64_t isize = t[0] | (t[1] << 8) | (t[2] << 16) | (uint64_t{t[3]} << 24);
  if (isize < compressed || isize > compressed * 1032)
    return std::max<size_t>(compressed * 4, kChunk);
  return isize;
}

void check_ratio(uint64_t out, uint64_t in, const std::string& path) {
  if (out < kBombCheckBytes || out <= in * kMaxInflateRatio) return;
  throw ImportError(path + ": inflates more than " + std::to_string(kMaxInflateRatio) + "-fold (" +
                    std::to_string(out >> 20) + " MiB from " + std::to_string(in >> 10) +
                    " KiB of gzip so far): not a profiler trace; refused");
}

class Inflater {
 public:
  explicit Inflater(const std::string& path) : path_(path) {
    if (inflateInit2(&zs_, 15 + 32) != Z_OK) throw ImportError(path + ": zlib: cannot initialize");
  }
  ~Inflater() { inflateEnd(&zs_); }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  // Inflates all of `in` (bytes [in_at, in_at + n) of the file) into out.
  // Returns false at the end of the last gzip member.
  bool feed(const char* in, size_t n, uint64_t in_at, std::string& out, size_t& used,
            uint64_t limit) {
    zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in));
    zs_.avail_in = static_cast<uInt>(n);
    while (zs_.avail_in > 0 || pending_) {
      if (used == out.size()) {
        // Checked as the output grows: one 1 MiB piece of a bomb inflates
        // to a gigabyte.
        check_ratio(used, in_at + (n - zs_.avail_in), path_);
        grow(out, limit, used);
      }
      zs_.next_out = reinterpret_cast<Bytef*>(out.data() + used);
      const size_t room = std::min<size_t>(out.size() - used, UINT32_MAX);
      zs_.avail_out = static_cast<uInt>(room);
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      used += room - zs_.avail_out;
      pending_ = zs_.avail_out == 0;
      if (rc == Z_STREAM_END) {
        ended_ = true;
        // Concatenated members (gzip allows them): go on with the next.
        if (zs_.avail_in == 0 || zs_.next_in[0] != 0x1f) return false;
        inflateReset(&zs_);
        ended_ = false;
        continue;
      }
      if (rc == Z_BUF_ERROR && zs_.avail_in == 0) return true;
      if (rc != Z_OK) {
        const uint64_t at = in_at + (n - zs_.avail_in);
        throw ImportError(path_ + ": corrupt gzip data near compressed byte " + std::to_string(at) +
                          ": " + (zs_.msg != nullptr ? zs_.msg : "inflate error"));
      }
    }
    return true;
  }
  bool ended() const noexcept { return ended_; }

 private:
  void grow(std::string& out, uint64_t limit, size_t used) {
    if (used >= limit)
      throw ImportError(path_ + ": decompressed JSON passes the limit of " +
                        std::to_string(limit >> 20) +
                        " MiB (raise it with --max-json-mb; at most 4095)");
    out.resize(std::min<uint64_t>(std::max<size_t>(out.size() * 2, kChunk), limit));
  }

  std::string path_;
  z_stream zs_{};
  bool pending_ = false, ended_ = false;
};

// Inflates a gzip file into a string; stops early once `stop_at` bytes are
// out. `lenient` (sniffing): a cut or corrupt stream yields what came before.
std::string gunzip(int fd, uint64_t compressed, const std::string& path, uint64_t stop_at,
                   bool lenient, uint64_t max_bytes) {
  Inflater inf(path);
  const uint64_t limit = std::min(max_bytes, kMaxJson);
  const uint64_t cap = stop_at >= limit ? limit : stop_at + kChunk;
  std::string out;
  const uint64_t hint = std::min<uint64_t>(size_hint(fd, compressed, path),
                                           std::max<uint64_t>(compressed * kHintRatio, kChunk));
  out.resize(std::min<uint64_t>(hint + simdjson::SIMDJSON_PADDING, cap));
  size_t used = 0;
  auto in = std::make_unique<char[]>(kChunk);
  uint64_t off = 0;
  bool more = true;
  while (more && used < stop_at) {
    const size_t n = read_at(fd, in.get(), kChunk, off, path);
    if (n == 0) break;
    try {
      more = inf.feed(in.get(), n, off, out, used, cap);
    } catch (const ImportError&) {
      if (!lenient) throw;
      break;
    }
    off += n;
  }
  if (!inf.ended() && used < stop_at && !lenient)
    throw ImportError(path + ": truncated gzip: the compressed data ends at byte " +
                      std::to_string(off) + " before the end of the stream (" +
                      std::to_string(used) + " bytes of JSON recovered)");
  out.resize(used);
  return out;
}

std::string read_plain(int fd, uint64_t size, const std::string& path, uint64_t stop_at,
                       uint64_t max_bytes) {
  if (size > std::min(max_bytes, kMaxJson) && stop_at >= size)
    throw ImportError(path + ": " + std::to_string(size >> 20) + " MiB of JSON passes the limit of " +
                      std::to_string(std::min(max_bytes, kMaxJson) >> 20) +
                      " MiB (raise it with --max-json-mb; at most 4095)");
  const size_t n = static_cast<size_t>(std::min(size, stop_at));
  std::string out;
  out.reserve(n + simdjson::SIMDJSON_PADDING);
  out.resize(n);
  if (read_at(fd, out.data(), n, 0, path) != n)
    throw ImportError(path + ": shrank while being read");
  return out;
}

std::string read_prefix(const std::string& path, uint64_t stop_at, bool lenient,
                        uint64_t max_bytes) {
  const internal::Fd fd = internal::Fd::open_read(path);  // a FIFO is refused, not waited on
  if (fd.get() < 0) fail_errno(path, "open");
  const uint64_t size = file_size(fd.get(), path);
  return is_gzip(fd.get(), path) ? gunzip(fd.get(), size, path, stop_at, lenient, max_bytes)
                                 : read_plain(fd.get(), size, path, stop_at, max_bytes);
}

size_t skip_space(std::string_view s, size_t i) {
  if (s.substr(i, 3) == "\xEF\xBB\xBF") i += 3;  // UTF-8 byte order mark
  while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) ++i;
  return i;
}

}  // namespace

std::string read_json(const std::string& path, uint64_t max_bytes) {
  std::string s = read_prefix(path, UINT64_MAX, false, max_bytes);
  if (s.capacity() < s.size() + simdjson::SIMDJSON_PADDING)
    s.reserve(s.size() + simdjson::SIMDJSON_PADDING);
  return s;
}

bool sniff(const std::string& path) {
  std::string head;
  try {
    head = read_prefix(path, kSniffBytes, true, kMaxJson);
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
