// Turns decoded events of one traced process into Chrome trace events.
// chrome_events.cpp writes the JSON of each event; chrome_pairing.cpp pairs
// Begin/End records and keeps each track's "X" slices properly nested.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "reader/json_writer.hpp"
#include "stallscope/chrome_export.hpp"
#include "stallscope/reader.hpp"

namespace stallscope::reader::detail {

// The synchronous ("X") slices of one track, kept as disjoint top-level
// intervals. place() accepts a slice that is disjoint from, nested in, or
// encloses what is there; a slice that would cross one must go async.
class NestingLane {
 public:
  bool place(int64_t start, int64_t end);

 private:
  static constexpr size_t kMaxRoots = 4096;         // older roots are forgotten
  std::vector<std::pair<int64_t, int64_t>> roots_;  // sorted, disjoint
};

// A Begin record waiting for its End.
struct Pending {
  Event e;
  std::vector<uint64_t> ids;
  std::vector<uint32_t> frames;
  const TraceReader* reader = nullptr;
};

struct TrackState {
  NestingLane lane;
  std::vector<Pending> open;  // Begin stack (records without kAsync)
  int64_t last_ns = INT64_MIN;
  bool named = false;
};

class ChromeWriter {
 public:
  ChromeWriter(JsonOut& json, ChromeExportResult& res, int64_t base_ns, int64_t from_ns,
               int64_t to_ns)
      : json_(json), res_(res), base_(base_ns), from_(from_ns), to_(to_ns) {}

  void write_prologue(const std::vector<TraceReader*>& files);
  void write_epilogue();
  // Starts a process: its name and sort order, and fresh pairing state.
  void begin_process(const TraceReader& r, uint32_t chrome_pid);
  // Names the tracks of `r` not named yet in this process.
  void name_tracks(const TraceReader& r);
  void event(const TraceReader& r, const Event& e);
  // Closes Begin records still open at their track's last timestamp.
  void end_process(const std::string& who);
  // ---- for ChromeEventSink (chrome_sink.cpp): caller-made tracks.
  void extra_process(uint32_t chrome_pid, std::string_view name, int64_t sort_index);
  void extra_thread(uint32_t chrome_pid, uint32_t tid, std::string_view name);
  bool extra_slice(uint32_t chrome_pid, uint32_t tid, std::string_view cat, std::string_view name,
                   int64_t start, int64_t dur, std::span<const ChromeEventSink::Arg> args);
  int64_t base_ns() const noexcept { return base_; }

 private:
  // ---- chrome_pairing.cpp
  TrackState& track(uint32_t id);
  void begin(const TraceReader& r, const Event& e, TrackState& t);
  void end(const TraceReader& r, const Event& e, TrackState& t);
  void emit_pending(const Pending& p, int64_t end_ns);
  // ---- chrome_events.cpp
  void slice(const TraceReader& r, const Event& e, std::span<const uint64_t> ids, int64_t start,
             int64_t end);
  void instant(const TraceReader& r, const Event& e);
  void counter(const TraceReader& r, const Event& e);
  void head(char ph, std::string_view cat, std::string_view name, uint32_t tid, int64_t ts);
  void args(const TraceReader& r, const Event& e, std::span<const uint64_t> ids);
  JsonOut& akey(std::string_view k);  // the next "args" key, opening the object first
  void io_args(const TraceReader& r, const format::IoExt& x);
  void work_args(const Event& e);
  void id_args(std::span<const uint64_t> ids);
  void copy_args(const format::CopyExt& x);
  void device_args(const Event& e);
  void collective_args(const format::CollectiveExt& x);
  // ---- chrome_pipeline.cpp: the kinds of format 1.1
  std::string pipeline_name(const Event& e) const;  // "" when the kind has none
  void pipeline_args(const TraceReader& r, const Event& e);
  void sample_args(const format::SampleExt& x);
  void loader_config_args(const TraceReader& r, const format::LoaderConfigExt& x);
  void channel_args(const format::ChannelHandoffExt& x);
  void stack_args(const TraceReader& r, const Event& e);
  void bool_arg(std::string_view k, bool v);
  void metadata(std::string_view what, uint32_t tid, std::string_view key, std::string_view text,
                int64_t number);
  std::string event_name(const TraceReader& r, const Event& e) const;
  void separator();

  JsonOut& json_;
  ChromeExportResult& res_;
  int64_t base_, from_, to_;
  uint32_t pid_ = 0;
  bool first_ = true;
  bool args_open_ = false;
  uint64_t next_async_id_ = 1;
  std::unordered_map<uint32_t, TrackState> tracks_;
  std::map<std::pair<uint8_t, uint64_t>, Pending> async_open_;  // (kind, corr)
  uint32_t cached_id_ = 0;
  TrackState* cached_ = nullptr;
  uint64_t unmatched_ends_ = 0, dropped_begins_ = 0;
};

}  // namespace stallscope::reader::detail
