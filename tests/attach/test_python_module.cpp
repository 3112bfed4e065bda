// The stallscope Python module's format 1.1 wrappers with Debian's
// /usr/bin/python3, without `stallscope run`: module_kinds.py calls each
// through STALLSCOPE_LIB, the trace it leaves is read back field by field;
// without a library every wrapper returns -ENODEV and none raises.
#include <boost/test/unit_test.hpp>

#include <map>

#include "attach/attach_util.hpp"
#include "stallscope/reader.hpp"

using namespace attach;
using namespace stallscope;
using format::Ext;
using format::Kind;

namespace {

const std::string kPython = "/usr/bin/python3";
const std::string kSrc = ATTACH_SOURCE_DIR;
const std::string kModulePath = "PYTHONPATH=" + kSrc + "/../../integrations/python";

// A "key value" line the script printed (`out` starts with a newline), or -1.
long long value(const std::string& out, const std::string& key) {
  const size_t at = out.find("\n" + key + " ");
  return at == std::string::npos ? -1 : std::atoll(out.c_str() + at + key.size() + 2);
}

struct Read {
  std::vector<reader::Event> events;  // the format 1.1 kinds only
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> frames;
  std::map<uint32_t, uint32_t> track_tids;
  std::map<uint32_t, std::string> ids;  // the loader configurations' names

  std::string strings(uint32_t id) const { return ids.count(id) ? ids.at(id) : ""; }

  std::vector<const reader::Event*> of(Kind k) const {
    std::vector<const reader::Event*> out;
    for (const auto& e : events)
      if (e.kind_enum() == k) out.push_back(&e);
    return out;
  }
};

Read read_run(const std::string& dir) {
  std::string err;
  const auto files = reader::list_trace_files(dir, &err);
  BOOST_REQUIRE_MESSAGE(files.size() == 1u, err);
  reader::TraceReader r(files[0]);
  Read got;
  reader::Event e;
  while (r.next(e)) {
    if (e.kind < static_cast<uint8_t>(Kind::kSample)) continue;
    got.events.push_back(e);
    got.events.back().frames = {};
    got.names.emplace_back(r.string(e.name_id));
    std::vector<std::string> f;
    for (uint32_t id : e.frames) f.emplace_back(r.string(id));
    got.frames.push_back(std::move(f));
    if (e.has(Ext::kLoaderConfig))
      for (uint32_t id : {e.loader_config.h.aux, e.loader_config.sampler_name,
                          e.loader_config.batch_sampler_name, e.loader_config.site_name})
        got.ids[id] = std::string(r.string(id));
  }
  BOOST_TEST((r.status() == reader::Status::kComplete), r.error());
  for (const auto& t : r.tracks()) got.track_tids[t.track_id] = t.tid;
  return got;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(python_module)

BOOST_AUTO_TEST_CASE(each_pipeline_wrapper_records_its_event) {
  TempDir t;
  const std::string log = t.path() + "/log", run_dir = t.path() + "/run";
  // The run first: a message argument may be evaluated before the check.
  const int code = run({kPython, kSrc + "/module_kinds.py", "record"}, log, 30,
                       {kModulePath, std::string("STALLSCOPE_LIB=") + ATTACH_TRACE_LIB,
                        "STALLSCOPE_OUT=" + run_dir});
  const std::string out = "\n" + slurp(log);
  BOOST_TEST_REQUIRE(code == 0, out);
  BOOST_TEST_REQUIRE(value(out, "done") == 1, out);
  const Read got = read_run(run_dir);

  const auto samples = got.of(Kind::kSample);
  BOOST_REQUIRE_EQUAL(samples.size(), 2u);
  BOOST_TEST(samples[0]->sample.loader_id == 0xA11CEu);
  BOOST_TEST(samples[0]->sample.generation == 3u);
  BOOST_TEST(samples[0]->sample.batch_index == 17u);
  BOOST_TEST(samples[0]->sample.sample_index == 4242u);
  BOOST_TEST(samples[0]->sample.worker == 2);
  BOOST_TEST(samples[0]->sample.count == 1u);
  BOOST_TEST(samples[0]->sample.part == uint8_t(format::SamplePart::kGetItem));
  BOOST_TEST(samples[0]->dur_ns > 0);
  BOOST_TEST(samples[1]->sample.part == uint8_t(format::SamplePart::kCollate));
  BOOST_TEST(samples[1]->sample.count == 32u);

  const auto configs = got.of(Kind::kLoaderConfig);
  BOOST_REQUIRE_EQUAL(configs.size(), 2u);
  const auto& c = configs[0]->loader_config;
  BOOST_TEST(got.names[size_t(configs[0] - got.events.data())] == "MapDataset");
  BOOST_TEST(c.loader_id == 0xA11CEu);
  BOOST_TEST(c.generation == 3u);
  BOOST_TEST(c.num_workers == 4u);
  BOOST_TEST(c.prefetch_factor == 2u);
  BOOST_TEST(c.batch_size == 32u);
  BOOST_TEST(c.pin_memory == uint8_t(format::PinMemory::kInactive));
  BOOST_TEST(c.persistent_workers == 1);
  BOOST_TEST(c.drop_last == 1);
  BOOST_TEST(c.in_order == 0);
  BOOST_TEST(c.mp_context == uint8_t(format::MpContext::kForkserver));
  BOOST_TEST(c.timeout_ms == 1500u);
  BOOST_TEST(c.dataset_len == 50000u);
  BOOST_TEST(c.dataset_kind == uint8_t(format::DatasetKind::kMapStyle));
  BOOST_TEST(got.strings(c.h.aux) == "default_collate");
  BOOST_TEST(got.strings(c.sampler_name) == "RandomSampler");
  BOOST_TEST(got.strings(c.batch_sampler_name) == "BatchSampler");
  BOOST_TEST(got.strings(c.site_name) == "train.py:42");
  BOOST_TEST(c.flags == format::kLoaderGetItems);
  const auto& none = configs[1]->loader_config;
  BOOST_TEST(none.loader_id == 0xB0Bu);
  BOOST_TEST(none.prefetch_factor == 0u);
  BOOST_TEST(none.batch_size == 0u);
  BOOST_TEST(none.in_order == 1);
  BOOST_TEST(configs[1]->name_id == 0u);

  const auto handoffs = got.of(Kind::kBatchHandoff);
  BOOST_REQUIRE_EQUAL(handoffs.size(), 1u);
  const auto& h = *handoffs[0];
  BOOST_TEST(h.batch_handoff.loader_id == 0xA11CEu);
  BOOST_TEST(h.batch_handoff.batch_index == 17u);
  BOOST_TEST(h.batch_handoff.worker == 1);
  BOOST_TEST(h.batch_handoff.worker_pid == 31337u);
  BOOST_TEST(h.requested_ns > h.ts_ns);
  BOOST_TEST(h.requested_ns < h.end_ns());

  const auto channels = got.of(Kind::kChannelHandoff);
  BOOST_REQUIRE_EQUAL(channels.size(), 1u);
  const auto& ch = channels[0]->channel_handoff;
  BOOST_TEST(ch.channel_id == 0xC4A77E1u);
  BOOST_TEST(ch.channel_type == uint8_t(format::ChannelType::kMpQueue));
  BOOST_TEST(ch.producer_pid == 101u);
  BOOST_TEST(ch.producer_tid == 102u);
  BOOST_TEST(ch.consumer_pid == 201u);
  BOOST_TEST(ch.consumer_tid == 202u);
  BOOST_TEST(ch.object_id == 555u);
  BOOST_TEST(ch.bytes == 65540u);
  BOOST_TEST(ch.parts == 3u);
  BOOST_TEST(channels[0]->requested_ns > channels[0]->ts_ns);

  const auto stacks = got.of(Kind::kStackSample);
  BOOST_REQUIRE_EQUAL(stacks.size(), 2u);
  const auto main_tid = uint32_t(value(out, "main_tid"));
  for (const auto* s : stacks) {
    const size_t i = size_t(s - got.events.data());
    BOOST_TEST(s->stack_sample.tid == main_tid);
    BOOST_TEST(got.track_tids.at(s->track_id) == main_tid);  // the sampled thread's
    BOOST_TEST(got.names[i] == "leaf");
    if (s->stack_sample.cost_ns == 1500) {
      BOOST_TEST((got.frames[i] == std::vector<std::string>{"leaf", "middle", "root"}));
      BOOST_TEST(s->stack_sample.interval_ns == 20000000u);
      BOOST_TEST(s->stack_sample.on_cpu == uint8_t(format::OnCpu::kRunning));
      BOOST_TEST(s->stack_sample.flags == format::kStackLate);
    } else {
      BOOST_TEST(s->stack_sample.cost_ns == 900u);  // from the sampler thread
      BOOST_TEST((got.frames[i] == std::vector<std::string>{"leaf"}));
      BOOST_TEST(s->stack_sample.on_cpu == uint8_t(format::OnCpu::kBlocked));
    }
  }
}

BOOST_AUTO_TEST_CASE(without_a_library_every_pipeline_wrapper_is_a_no_op) {
  TempDir t;
  const std::string log = t.path() + "/log";
  const int code = run({kPython, kSrc + "/module_kinds.py", "absent"}, log, 30,
                       {kModulePath, "STALLSCOPE_LIB=/nonexistent.so"});
  const std::string out = "\n" + slurp(log);
  BOOST_TEST(code == 0, out);
  BOOST_TEST(value(out, "done") == 1, out);
  BOOST_TEST(out.find("stallscope marks are no-ops") != std::string::npos, out);
}

// --headspace (stallscope._headspace) as the DataLoader hook drives it: the
// first K batches loaded and kept, then replayed as copies of their
// containers (a popped key is back next time, tensors shared), StopIteration
// at the loader's length, nothing loaded after the K.
BOOST_AUTO_TEST_CASE(headspace_replays_kept_batches_as_copies) {
  TempDir t;
  const std::string log = t.path() + "/log";
  BOOST_TEST_REQUIRE(run({kPython, kSrc + "/headspace_unit.py"}, log, 30,
                         {kModulePath, "STALLSCOPE_HEADSPACE=3"}) == 0,
                     slurp(log));
  const std::string out = "\n" + slurp(log);
  BOOST_TEST(value(out, "batches") == 10, out);
  BOOST_TEST(value(out, "loaded") == 3, out);
  BOOST_TEST(out.find("\nlabels 1,2,3,1,2,3,1,2,3,1\n") != std::string::npos, out);
  BOOST_TEST(value(out, "replayed_is_copy") == 1, out);
  BOOST_TEST(value(out, "tensor_shared") == 1, out);
  BOOST_TEST(value(out, "namedtuple_kept") == 1, out);
  BOOST_TEST(value(out, "second_batches") == 10, out);
  BOOST_TEST(value(out, "second_loaded") == 3, out);
  BOOST_TEST(value(out, "second_has_labels") == 1, out);
  // Off (no STALLSCOPE_HEADSPACE): every batch is loaded.
  const std::string log2 = t.path() + "/log2";
  BOOST_TEST_REQUIRE(run({kPython, kSrc + "/headspace_unit.py"}, log2, 30, {kModulePath}) == 0,
                     slurp(log2));
  BOOST_TEST(value("\n" + slurp(log2), "loaded") == 10, slurp(log2));
}

BOOST_AUTO_TEST_SUITE_END()
