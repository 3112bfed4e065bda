// Black-box tests of the C API of trace format 1.1: recorder_probe records
// samples, loader configurations, batch and channel hand-offs and stack
// samples through trace.h; the file is read back and every field checked,
// with the calls the API refuses and those made while capture is off.
#include <boost/test/unit_test.hpp>

#include <cerrno>

#include "probe_runner.hpp"

using namespace stallscope;
using namespace stallscope::test;
using format::Ext;
using format::Kind;

namespace {

// One run of the probe's pipeline-kinds mode, read back.
struct PipelineRun {
  ProbeResult probe;
  reader::Status status = reader::Status::kError;
  std::string error;
  std::vector<reader::Event> events;            // the format 1.1 kinds only
  std::vector<std::vector<std::string>> frames;  // their frames, by name
  std::vector<std::string> names;                // their name_id, by name
  std::map<uint32_t, uint32_t> track_tids;
  std::map<std::string, uint32_t> string_ids;    // the names the checks look up

  std::vector<const reader::Event*> of(Kind k) const {
    std::vector<const reader::Event*> out;
    for (const auto& e : events)
      if (e.kind_enum() == k) out.push_back(&e);
    return out;
  }
  size_t index(const reader::Event* e) const { return static_cast<size_t>(e - events.data()); }
  // The stack sample whose cost_ns is `cost` (records come in track order).
  const reader::Event& stack(uint32_t cost) const {
    for (const auto* e : of(Kind::kStackSample))
      if (e->stack_sample.cost_ns == cost) return *e;
    BOOST_FAIL("no stack sample of cost " << cost);
    return events.front();
  }
};

PipelineRun run_pipeline() {
  TempDir d;
  PipelineRun run;
  run.probe = run_probe({"pipeline-kinds"}, {{"STALLSCOPE_OUT", d.path()}});
  BOOST_REQUIRE_EQUAL(run.probe.exit_code, 0);
  const auto files = trace_files(d.path());
  BOOST_REQUIRE_EQUAL(files.size(), 1u);
  reader::TraceReader r(files[0]);
  reader::Event e;
  while (r.next(e)) {
    if (e.kind < static_cast<uint8_t>(Kind::kSample)) continue;
    std::vector<std::string> f;
    for (uint32_t id : e.frames) f.emplace_back(r.string(id));
    run.frames.push_back(std::move(f));
    run.names.emplace_back(r.string(e.name_id));
    run.events.push_back(e);
    run.events.back().frames = {};
    if (e.has(Ext::kLoaderConfig))
      for (uint32_t id : {e.loader_config.h.aux, e.loader_config.sampler_name,
                          e.loader_config.batch_sampler_name, e.loader_config.site_name})
        run.string_ids[std::string(r.string(id))] = id;
  }
  run.status = r.status();
  run.error = r.error();
  for (const auto& t : r.tracks()) run.track_tids[t.track_id] = t.tid;
  return run;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(recorder_pipeline)

BOOST_AUTO_TEST_CASE(every_pipeline_kind_round_trips_through_the_c_api) {
  const auto run = run_pipeline();
  BOOST_TEST((run.status == reader::Status::kComplete), run.error);
  for (const char* rc : {"sample", "fetch", "loader_config", "loader_config_longer",
                         "batch_handoff", "channel_handoff", "stack"})
    BOOST_TEST_CONTEXT(rc) { BOOST_TEST(run.probe.value(std::string("rc_") + rc) == 0); }

  const auto samples = run.of(Kind::kSample);
  BOOST_REQUIRE_EQUAL(samples.size(), 2u);
  const auto& s = *samples[0];
  BOOST_TEST(s.phase == format::kComplete);
  BOOST_TEST(s.dur_ns > 0);
  BOOST_TEST(s.corr == 17u);
  BOOST_REQUIRE(s.has(Ext::kSample));
  BOOST_TEST(s.sample.loader_id == 0xA11CEu);
  BOOST_TEST(s.sample.generation == 3u);
  BOOST_TEST(s.sample.batch_index == 17u);
  BOOST_TEST(s.sample.sample_index == 4242u);
  BOOST_TEST(s.sample.worker == 2);
  BOOST_TEST(s.sample.count == 1u);
  BOOST_TEST(s.sample.part == uint8_t(format::SamplePart::kGetItem));
  const auto& fetch = *samples[1];
  BOOST_TEST(fetch.sample.part == uint8_t(format::SamplePart::kFetch));
  BOOST_TEST(fetch.sample.count == 32u);
  BOOST_TEST(fetch.sample.worker == -1);
  BOOST_TEST(fetch.dur_ns > s.dur_ns);

  const auto configs = run.of(Kind::kLoaderConfig);
  BOOST_REQUIRE_EQUAL(configs.size(), 2u);
  const auto& c = *configs[0];
  BOOST_TEST(c.phase == format::kInstant);
  BOOST_TEST(c.corr == 0xA11CEu);
  BOOST_TEST(run.names[run.index(&c)] == "MapDataset");
  BOOST_REQUIRE(c.has(Ext::kLoaderConfig));
  const auto& x = c.loader_config;
  BOOST_TEST(x.loader_id == 0xA11CEu);
  BOOST_TEST(x.generation == 3u);
  BOOST_TEST(x.dataset_len == 50000u);
  BOOST_TEST(x.num_workers == 4u);
  BOOST_TEST(x.prefetch_factor == 2u);
  BOOST_TEST(x.batch_size == 32u);
  BOOST_TEST(x.timeout_ms == 1500u);
  BOOST_TEST(x.h.aux == run.string_ids.at("default_collate"));
  BOOST_TEST(x.sampler_name == run.string_ids.at("RandomSampler"));
  BOOST_TEST(x.batch_sampler_name == run.string_ids.at("BatchSampler"));
  BOOST_TEST(x.site_name == run.string_ids.at("train.py:42"));
  BOOST_TEST(x.pin_memory == uint8_t(format::PinMemory::kInactive));
  BOOST_TEST(x.persistent_workers == 1);
  BOOST_TEST(x.drop_last == 1);
  BOOST_TEST(x.in_order == 0);
  BOOST_TEST(x.mp_context == uint8_t(format::MpContext::kForkserver));
  BOOST_TEST(x.dataset_kind == uint8_t(format::DatasetKind::kMapStyle));
  BOOST_TEST(x.flags == (format::kLoaderGetItems | format::kLoaderOverridden));
  BOOST_TEST(x.reserved == 0);
  // The newer caller's longer struct: the fields this library knows.
  const auto& longer = *configs[1];
  BOOST_TEST(longer.loader_config.generation == 4u);
  BOOST_TEST(longer.loader_config.batch_size == 32u);
  BOOST_TEST(longer.ts_ns > c.ts_ns);  // ts 0: recorded at the call

  const auto handoffs = run.of(Kind::kBatchHandoff);
  BOOST_REQUIRE_EQUAL(handoffs.size(), 1u);
  const auto& h = *handoffs[0];
  BOOST_TEST(h.async());
  BOOST_TEST(h.corr == 17u);
  BOOST_REQUIRE(h.has(Ext::kBatchHandoff));
  BOOST_TEST(h.batch_handoff.loader_id == 0xA11CEu);
  BOOST_TEST(h.batch_handoff.generation == 3u);
  BOOST_TEST(h.batch_handoff.batch_index == 17u);
  BOOST_TEST(h.batch_handoff.worker == 1);
  BOOST_TEST(h.batch_handoff.worker_pid == 31337u);
  // put t0, asked for at t0 + 2000 ticks, received at t0 + 8000 ticks
  BOOST_TEST(h.requested_ns > h.ts_ns);
  BOOST_TEST(h.requested_ns < h.end_ns());
  BOOST_TEST(h.batch_handoff.requested > 0u);

  const auto channels = run.of(Kind::kChannelHandoff);
  BOOST_REQUIRE_EQUAL(channels.size(), 1u);
  const auto& ch = *channels[0];
  BOOST_TEST(ch.async());
  BOOST_TEST(ch.corr == 555u);
  const auto& y = ch.channel_handoff;
  BOOST_TEST(y.channel_id == 0xC4A77E1u);
  BOOST_TEST(y.channel_type == uint8_t(format::ChannelType::kMpQueue));
  BOOST_TEST(y.producer_pid == 101u);
  BOOST_TEST(y.producer_tid == 102u);
  BOOST_TEST(y.consumer_pid == 201u);
  BOOST_TEST(y.consumer_tid == 202u);
  BOOST_TEST(y.object_id == 555u);
  BOOST_TEST(y.bytes == 65540u);
  BOOST_TEST(y.parts == 3u);
  BOOST_TEST(ch.requested_ns > ch.ts_ns);
  BOOST_TEST(ch.requested_ns < ch.end_ns());

  const auto stacks = run.of(Kind::kStackSample);
  BOOST_REQUIRE_EQUAL(stacks.size(), 4u);
  const auto& st = run.stack(1500);
  BOOST_TEST(st.phase == format::kInstant);
  BOOST_TEST(run.names[run.index(&st)] == "leaf");
  BOOST_TEST(st.stack_sample.tid == uint32_t(run.probe.value("main_tid")));
  BOOST_TEST(run.track_tids.at(st.track_id) == uint32_t(run.probe.value("main_tid")));
  BOOST_TEST(st.stack_sample.interval_ns == 20000000u);
  BOOST_TEST(st.stack_sample.cost_ns == 1500u);
  BOOST_TEST(st.stack_sample.on_cpu == uint8_t(format::OnCpu::kRunning));
  BOOST_TEST(st.stack_sample.flags == format::kStackLate);
  BOOST_TEST((run.frames[run.index(&st)] == std::vector<std::string>{"leaf", "middle", "root"}));
}

BOOST_AUTO_TEST_CASE(a_stack_sample_of_another_thread_lands_on_that_threads_track) {
  const auto run = run_pipeline();
  BOOST_TEST(run.probe.value("rc_stack_other") == 0);
  const auto& other = run.stack(900);
  const auto tid = uint32_t(run.probe.value("other_tid"));
  BOOST_TEST(other.stack_sample.tid == tid);
  BOOST_TEST(run.track_tids.at(other.track_id) == tid);
  BOOST_TEST(other.track_id != run.stack(1500).track_id);
  BOOST_TEST(other.stack_sample.on_cpu == uint8_t(format::OnCpu::kBlocked));
  BOOST_TEST((run.frames[run.index(&other)] == std::vector<std::string>{"leaf", "middle"}));
}

BOOST_AUTO_TEST_CASE(a_stack_deeper_than_an_extension_holds_keeps_its_innermost_frames) {
  const auto run = run_pipeline();
  BOOST_TEST(run.probe.value("rc_stack_deep") == 0);
  const auto& deep = run.stack(0);
  const auto& f = run.frames[run.index(&deep)];
  BOOST_REQUIRE_EQUAL(f.size(), size_t{format::kMaxStackFrames});
  BOOST_TEST(f.front() == "leaf");
  BOOST_TEST(f.back() == "middle");
  BOOST_TEST(deep.stack_sample.flags == (format::kStackTruncated | format::kStackNative));
  BOOST_TEST(deep.stack_sample.frame_count == format::kMaxStackFrames);
  const auto& empty = run.stack(1);
  BOOST_TEST(run.probe.value("rc_stack_empty") == 0);
  BOOST_TEST(run.frames[run.index(&empty)].empty());
  BOOST_TEST(empty.name_id == 0u);
  BOOST_TEST(empty.stack_sample.h.bytes == sizeof(format::StackSampleExt));
}

BOOST_AUTO_TEST_CASE(bad_arguments_are_refused_and_nothing_is_recorded_for_them) {
  const auto run = run_pipeline();
  for (const char* rc :
       {"bad_sample_end", "bad_sample_part", "bad_config_null", "bad_config_size",
        "bad_config_enum", "bad_config_flags", "bad_handoff_end", "bad_channel_type",
        "bad_channel_end", "bad_stack_frames", "bad_stack_cpu", "bad_stack_flags"})
    BOOST_TEST_CONTEXT(rc) { BOOST_TEST(run.probe.value(std::string("rc_") + rc) == -EINVAL); }
  // Only the good calls above reached the file.
  BOOST_TEST(run.of(Kind::kSample).size() == 2u);
  BOOST_TEST(run.of(Kind::kLoaderConfig).size() == 2u);
  BOOST_TEST(run.of(Kind::kBatchHandoff).size() == 1u);
  BOOST_TEST(run.of(Kind::kChannelHandoff).size() == 1u);
  BOOST_TEST(run.of(Kind::kStackSample).size() == 4u);
}

BOOST_AUTO_TEST_CASE(calls_while_capture_is_off_return_enodev) {
  const auto run = run_pipeline();
  for (const char* rc : {"off_sample", "off_config", "off_batch", "off_channel", "off_stack"})
    BOOST_TEST_CONTEXT(rc) { BOOST_TEST(run.probe.value(std::string("rc_") + rc) == -ENODEV); }
  BOOST_TEST(run.events.size() == 10u);
}

BOOST_AUTO_TEST_SUITE_END()
