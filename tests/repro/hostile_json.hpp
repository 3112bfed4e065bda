// Trace files whose JSON is made to hurt a parser (RELIABILITY.md case 32):
// nesting deep enough to overflow any recursive walk, and metadata chunks as
// large as the format allows whose DOM is many times their text.
#pragma once

#include <string>

#include "libtrace/trace_builder.hpp"

namespace stallscope::testing {

// {"a":{"a":...leaf...}}: `depth` objects, one inside the other.
inline std::string nested_objects(size_t depth, const std::string& leaf = "1") {
  std::string j;
  j.reserve(depth * 6 + leaf.size());
  for (size_t i = 0; i < depth; ++i) j += "{\"a\":";
  j += leaf;
  j.append(depth, '}');
  return j;
}

// Metadata naming host and rank, with `depth` levels of nesting in all
// (the outer object included).
inline std::string deep_metadata(size_t depth, const std::string& host, int rank) {
  return "{\"host\":\"" + host + "\",\"rank\":" + std::to_string(rank) +
         ",\"x\":" + nested_objects(depth - 1) + "}";
}

// Metadata of exactly `bytes` bytes (a multiple of 8: no padding): one
// array of zeros, about 8 bytes of DOM per byte of text.
inline std::string wide_metadata(size_t bytes, const std::string& host, int rank) {
  std::string j = "{\"host\":\"" + host + "\",\"rank\":" + std::to_string(rank) + ",\"x\":[0";
  j.reserve(bytes);
  while (j.size() + 4 <= bytes) j += ",0";  // room left for "]}"
  j.append(bytes - 2 - j.size(), ' ');
  return j + "]}";
}

// The largest metadata chunk the format allows (kMaxChunkPayload).
inline constexpr size_t kLargestChunk = format::kMaxChunkPayload;

// `steps` steps of `period_ns` (90 % busy) on a thread named `thread`,
// after the given metadata.
inline void write_trainer_trace(const std::string& path, const std::string& metadata,
                                const std::string& thread = "trainer", uint64_t steps = 3,
                                uint64_t period_ns = 10000) {
  TraceBuilder b;
  b.metadata(metadata);
  b.strings({{1, thread}}).tracks({thread_track(1, 100, 1)});
  Records trainer;
  for (uint64_t i = 0; i < steps; ++i) {
    auto s = make_ext<format::StepExt>(format::Ext::kStep);
    s.index = i;
    trainer.core(format::Kind::kStep, 0, period_ns + i * period_ns, period_ns * 9 / 10).ext(s);
  }
  b.events({{1, trainer}});
  b.end();
  b.write(path);
}

}  // namespace stallscope::testing
