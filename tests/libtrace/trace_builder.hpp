// Test-only writer of raw trace bytes (format.hpp, version 1), independent of
// the recorder, so reader and CLI tests can build exact — and exactly
// broken — files.
//
//   stallscope::testing::TraceBuilder b;
//   b.strings({{1, "read"}}).tracks({thread_track(1, 100, 1)});
//   b.events({{1, Records().core(Kind::kStorageRead, 0, 1000, 50, 1)
//                          .ext(io_ext(4096))}});
//   b.end();
//   b.write(dir.file("a.sst"));
//
// Ticks are nanoseconds by default (kFileTicksAreNs); set `header` and
// `clock` for TSC files. `clock` is the triple stamped on the next chunk.
#pragma once

#include <unistd.h>
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "stallscope/format.hpp"

namespace stallscope::testing {

namespace fmt = stallscope::format;

inline uint32_t crc32_of(const void* p, size_t n) {
  return static_cast<uint32_t>(crc32(0, static_cast<const Bytef*>(p), static_cast<uInt>(n)));
}

template <typename T>
void append_pod(std::vector<uint8_t>& out, const T& v) {
  const auto* b = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), b, b + sizeof v);
}

inline void pad_to_8(std::vector<uint8_t>& out) {
  while (out.size() % 8 != 0) out.push_back(0);
}

// A record's flags byte: a phase plus RecordFlags bits (C++20 deprecates
// or-ing the two enum types directly).
constexpr uint8_t rec_flags(fmt::Phase phase, unsigned bits) {
  return static_cast<uint8_t>(phase | bits);
}

// An extension struct with its header filled (bytes = sizeof(T)).
template <typename T>
T make_ext(fmt::Ext type, uint32_t aux = 0) {
  T e{};
  e.h.type = static_cast<uint8_t>(type);
  e.h.bytes = static_cast<uint16_t>(sizeof(T));
  e.h.aux = aux;
  return e;
}

inline fmt::TrackEntry thread_track(uint32_t id, uint32_t tid, uint32_t name_id = 0,
                                    fmt::TrackType type = fmt::TrackType::kThread,
                                    uint32_t device = 0) {
  fmt::TrackEntry t{};
  t.track_id = id;
  t.type = static_cast<uint8_t>(type);
  t.tid = tid;
  t.device = device;
  t.name_id = name_id;
  return t;
}

// The records of one track block: core records and their extensions.
class Records {
 public:
  Records& core(fmt::Kind kind, uint8_t flags, uint64_t ts, uint64_t value = 0, uint32_t name = 0,
                uint64_t corr = 0, uint16_t aux = 0) {
    return core_raw(static_cast<uint8_t>(kind), flags, ts, value, name, corr, aux);
  }
  Records& core_raw(uint8_t kind, uint8_t flags, uint64_t ts, uint64_t value = 0, uint32_t name = 0,
                    uint64_t corr = 0, uint16_t aux = 0) {
    fmt::CoreRecord c{kind, flags, aux, name, ts, value, corr};
    append_pod(bytes, c);
    ++cores;
    return *this;
  }
  template <typename T>
  Records& ext(const T& e) {
    append_pod(bytes, e);
    return *this;
  }
  // One IdList extension holding `ids`.
  Records& ids(std::span<const uint64_t> ids) {
    fmt::ExtHeader h{static_cast<uint8_t>(fmt::Ext::kIdList), 0,
                     static_cast<uint16_t>(8 + 8 * ids.size()), static_cast<uint32_t>(ids.size())};
    append_pod(bytes, h);
    for (uint64_t id : ids) append_pod(bytes, id);
    return *this;
  }
  // One StackSample extension: `head` (its bytes and frame_count set
  // here unless `frame_count` overrides the count) then `frames`, padded.
  Records& stack(fmt::StackSampleExt head, std::span<const uint32_t> frames,
                 int frame_count = -1) {
    head.h.type = static_cast<uint8_t>(fmt::Ext::kStackSample);
    head.h.bytes = static_cast<uint16_t>(fmt::pad8(sizeof head + 4 * frames.size()));
    head.frame_count =
        static_cast<uint16_t>(frame_count >= 0 ? size_t(frame_count) : frames.size());
    append_pod(bytes, head);
    for (uint32_t f : frames) append_pod(bytes, f);
    pad_to_8(bytes);
    return *this;
  }
  Records& raw(std::span<const uint8_t> b) {
    bytes.insert(bytes.end(), b.begin(), b.end());
    return *this;
  }

  std::vector<uint8_t> bytes;
  size_t cores = 0;  // core records appended (known or not)
};

struct Block {
  uint32_t track_id;
  Records records;
};

class TraceBuilder {
 public:
  struct ChunkInfo {
    uint64_t offset;  // of the chunk header in the file
    uint64_t end;     // one past the payload
    uint16_t type;
    size_t cores;  // core records in an events chunk
  };

  TraceBuilder() {
    std::memcpy(header.magic, fmt::kMagic, sizeof header.magic);
    header.version_major = fmt::kVersionMajor;
    header.version_minor = fmt::kVersionMinor;
    header.header_bytes = sizeof(fmt::FileHeader);
    header.flags = fmt::kFileTicksAreNs;
    header.pid = 4242;
    header.parent_pid = 1;
    header.tsc_hz = 1000000000;
    header.start = {1000, 1000, 1700000000000000000};
    clock = {2000000, 2000000, 1700000000002000000 - 1000};
  }

  TraceBuilder& strings(const std::vector<std::pair<uint32_t, std::string>>& entries) {
    std::vector<uint8_t> p;
    for (const auto& [id, s] : entries) {
      fmt::StringEntry e{id, static_cast<uint32_t>(s.size())};
      append_pod(p, e);
      p.insert(p.end(), s.begin(), s.end());
      pad_to_8(p);
    }
    return chunk(fmt::ChunkType::kStrings, std::move(p));
  }
  TraceBuilder& tracks(const std::vector<fmt::TrackEntry>& entries) {
    std::vector<uint8_t> p;
    for (const auto& t : entries) append_pod(p, t);
    return chunk(fmt::ChunkType::kTracks, std::move(p));
  }
  TraceBuilder& metadata(const std::string& json_text) {
    return chunk(fmt::ChunkType::kMetadata, std::vector<uint8_t>(json_text.begin(), json_text.end()));
  }
  TraceBuilder& attachment(const std::string& name, const std::string& data) {
    std::vector<uint8_t> p;
    append_pod(p, fmt::AttachmentHeader{static_cast<uint32_t>(name.size()), 0, data.size()});
    p.insert(p.end(), name.begin(), name.end());
    p.insert(p.end(), data.begin(), data.end());
    return chunk(fmt::ChunkType::kAttachment, std::move(p));
  }
  TraceBuilder& events(const std::vector<Block>& blocks) {
    std::vector<uint8_t> p;
    size_t cores = 0;
    for (const auto& b : blocks) {
      append_pod(p, fmt::TrackBlock{b.track_id, static_cast<uint32_t>(b.records.bytes.size())});
      p.insert(p.end(), b.records.bytes.begin(), b.records.bytes.end());
      cores += b.records.cores;
    }
    chunk(fmt::ChunkType::kEvents, std::move(p));
    chunks_.back().cores = cores;
    return *this;
  }
  TraceBuilder& end(fmt::EndSummary s = {}, const std::vector<fmt::TrackTotals>& totals = {}) {
    std::vector<uint8_t> p;
    s.n_tracks = static_cast<uint32_t>(totals.size());
    append_pod(p, s);
    for (const auto& t : totals) append_pod(p, t);
    return chunk(fmt::ChunkType::kEnd, std::move(p));
  }
  // Any chunk; the payload is padded to 8 and checksummed. The triple is
  // `clock`, then clock advances by 1 ms (ticks scaled by ticks_per_ns).
  TraceBuilder& chunk(fmt::ChunkType type, std::vector<uint8_t> payload) {
    return chunk_raw(static_cast<uint16_t>(type), std::move(payload));
  }
  TraceBuilder& chunk_raw(uint16_t type, std::vector<uint8_t> payload) {
    pad_to_8(payload);
    fmt::ChunkHeader h{};
    h.magic = fmt::kChunkMagic;
    h.type = type;
    h.payload_bytes = static_cast<uint32_t>(payload.size());
    h.payload_crc32 = crc32_of(payload.data(), payload.size());
    h.seq = seq_++;
    h.clock = clock;
    const uint64_t off = header.header_bytes + body_.size();
    append_pod(body_, h);
    body_.insert(body_.end(), payload.begin(), payload.end());
    chunks_.push_back({off, header.header_bytes + body_.size(), type, 0});
    clock.ticks += static_cast<uint64_t>(1000000 * ticks_per_ns);
    clock.mono_ns += 1000000;
    clock.real_ns += 1000000;
    return *this;
  }

  // Header (checksummed now) + extra header bytes + chunks.
  std::vector<uint8_t> bytes() const {
    fmt::FileHeader h = header;
    h.crc32 = crc32_of(&h, offsetof(fmt::FileHeader, crc32));
    std::vector<uint8_t> out;
    append_pod(out, h);
    out.resize(header.header_bytes, 0);
    out.insert(out.end(), body_.begin(), body_.end());
    return out;
  }
  void write(const std::string& path) const { write_bytes(path, bytes()); }
  const std::vector<ChunkInfo>& chunks() const { return chunks_; }

  static void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
    // A new file, not a truncated one: ext4 flushes a truncated file's data
    // on close (auto_da_alloc), which makes rewriting loops crawl.
    std::error_code ec;
    std::filesystem::remove(path, ec);
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    if (!f) throw std::runtime_error("cannot write " + path);
  }

  fmt::FileHeader header{};
  fmt::ClockTriple clock{};
  double ticks_per_ns = 1.0;  // how `clock.ticks` advances per chunk

 private:
  std::vector<uint8_t> body_;
  std::vector<ChunkInfo> chunks_;
  uint64_t seq_ = 0;
};

// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr ? base : "/tmp") + "/stallscope-test-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace stallscope::testing
