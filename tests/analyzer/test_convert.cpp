// The .sst converter (analyzer/src/convert.hpp) and RankScope: every kind's
// payload as the trace format wrote it, files and names in rank scope over
// a rank's several trace files, and a partial page-cache hit's bytes.
#include <cstring>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "convert.hpp"
#include "libtrace/pipeline_records.hpp"
#include "libtrace/trace_builder.hpp"
#include "scope.hpp"

namespace an = stallscope::analyzer;
namespace fmt = stallscope::format;
using an::Ev;
using an::Kind;
using stallscope::reader::RecordView;
using stallscope::reader::TraceReader;
using namespace stallscope::testing;

namespace {

// Every event of `bytes` converted into `rank` (process `proc`).
std::vector<Ev> convert_all(const TraceBuilder& b, an::RankScope& scope, uint32_t proc) {
  const auto bytes = b.bytes();
  TraceReader r("mem.sst", bytes);
  an::FileConverter conv(r, scope, proc);
  std::vector<Ev> out;
  RecordView v;
  while (r.next(v, ~0u)) out.push_back(conv.convert(v));
  BOOST_TEST_REQUIRE(r.diagnostics().empty());
  return out;
}

const Ev& only(const std::vector<Ev>& evs, Kind k) {
  const Ev* found = nullptr;
  for (const Ev& e : evs)
    if (e.kind == k) {
      BOOST_TEST_REQUIRE(found == nullptr);
      found = &e;
    }
  BOOST_TEST_REQUIRE(found != nullptr);
  return *found;
}

// A trace of one process: reads of `paths` (one read per path, in that
// order), with string ids `first_id`, `first_id + 1`, … for them.
TraceBuilder reads_of(const std::vector<std::string>& paths, uint32_t first_id, uint32_t tid) {
  TraceBuilder b;
  std::vector<std::pair<uint32_t, std::string>> strings;
  for (size_t i = 0; i < paths.size(); ++i) strings.emplace_back(first_id + uint32_t(i), paths[i]);
  b.strings(strings);
  b.tracks({thread_track(1, tid)});
  Records t;
  for (size_t i = 0; i < paths.size(); ++i) {
    auto io = make_ext<fmt::IoExt>(fmt::Ext::kIo, first_id + uint32_t(i));
    io.bytes = 4096;
    t.core(fmt::Kind::kStorageRead, fmt::kAsync, 1000 + 100 * i, 50, 0, 0).ext(io);
  }
  b.events({{1, t}});
  b.end();
  return b;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(convert)

BOOST_AUTO_TEST_CASE(every_pipeline_kind_carries_its_fields_into_its_payload) {
  an::RankTrace rank;
  an::RankScope scope(rank);
  const auto evs = convert_all(pipeline_file(), scope, 0);

  const an::SampleSpan& s = only(evs, Kind::kSample).sample();
  BOOST_TEST(s.loader == 0xA11CEu);
  BOOST_TEST(s.batch == 17u);
  BOOST_TEST(s.index == 4242u);
  BOOST_TEST(s.generation == 3u);
  BOOST_TEST(s.worker == -1);
  BOOST_TEST(s.count == 1u);
  BOOST_TEST((s.part == fmt::SamplePart::kGetItem));

  const Ev& lc = only(evs, Kind::kLoaderConfig);
  BOOST_TEST(rank.names.at(lc.name) == "MapDataset");
  const an::LoaderConfig& l = lc.loader();
  BOOST_TEST(l.loader == 0xA11CEu);
  BOOST_TEST(l.dataset_len == 50000u);
  BOOST_TEST(l.num_workers == 4u);
  BOOST_TEST(l.prefetch_factor == 2u);
  BOOST_TEST(l.batch_size == 32u);
  BOOST_TEST((l.pin_memory == fmt::PinMemory::kInactive));
  BOOST_TEST(bool(l.persistent_workers));
  BOOST_TEST(bool(l.drop_last));
  BOOST_TEST(!bool(l.in_order));
  BOOST_TEST(bool(l.getitems));
  BOOST_TEST(bool(l.overridden));
  BOOST_TEST(rank.names.at(l.site) == "train.py:42");
  BOOST_TEST(rank.names.at(l.sampler) == "RandomSampler");
  BOOST_TEST(rank.names.at(l.batch_sampler) == "BatchSampler");
  BOOST_TEST(rank.names.at(l.collate) == "default_collate");
  BOOST_TEST((l.mp_context == fmt::MpContext::kForkserver));
  BOOST_TEST((l.dataset_kind == fmt::DatasetKind::kMapStyle));

  const Ev& h = only(evs, Kind::kBatchHandoff);
  BOOST_TEST(h.start == 1000);
  BOOST_TEST(h.end == 1800);
  BOOST_TEST(h.handoff().asked_ns == 1300);
  BOOST_TEST(h.handoff().worker == 2);
  BOOST_TEST(h.handoff().worker_pid == 31337u);
  BOOST_TEST(h.handoff().batch == 17u);

  const an::ChannelHandoff& c = only(evs, Kind::kChannelHandoff).channel();
  BOOST_TEST(c.channel == 0xC4A77E1u);
  BOOST_TEST(c.object == 555u);
  BOOST_TEST(c.bytes == 65540u);
  BOOST_TEST(c.asked_ns == 2200);
  BOOST_TEST(c.producer_pid == 101u);
  BOOST_TEST(c.producer_tid == 102u);
  BOOST_TEST(c.parts == 3u);
  BOOST_TEST((c.type == fmt::ChannelType::kMpQueue));

  const Ev& st = only(evs, Kind::kStackSample);
  BOOST_TEST(rank.names.at(st.name) == "leaf");
  BOOST_TEST(st.stack().interval_ns == 20000000u);
  BOOST_TEST(st.stack().tid == 100u);
  BOOST_TEST(st.stack().cost_ns == 1500u);
  BOOST_TEST(st.stack().frames == 3u);
  BOOST_TEST((st.stack().on_cpu == fmt::OnCpu::kRunning));
  BOOST_TEST(st.stack().flags == fmt::kStackLate);
}

// A rank's forked workers each write their own trace with their own string
// ids: the same path is one file of the rank, different paths with the same
// string id are two.
BOOST_AUTO_TEST_CASE(files_are_rank_scoped_across_a_ranks_trace_files) {
  an::RankTrace rank;
  an::RankScope scope(rank);
  const auto a = convert_all(reads_of({"/d/0.jpg", "/d/1.jpg"}, 10, 101), scope, 0);
  const auto b = convert_all(reads_of({"/d/1.jpg", "/d/2.jpg"}, 10, 102), scope, 1);
  BOOST_TEST_REQUIRE(a.size() == 2u);
  BOOST_TEST_REQUIRE(b.size() == 2u);
  BOOST_TEST(a[1].io().file == b[0].io().file);  // /d/1.jpg, string ids 11 and 10
  BOOST_TEST(a[0].io().file != b[0].io().file);  // string id 10 in both, different paths
  BOOST_TEST(b[1].io().file != a[0].io().file);
  BOOST_TEST(rank.files.size() == 4u);  // "" and three paths
  BOOST_TEST(rank.files.at(b[1].io().file) == "/d/2.jpg");
}

// A partial hit went to storage (its latency counts as a storage access),
// but only its bytes past the hit came from there.
BOOST_AUTO_TEST_CASE(a_partial_hit_is_a_storage_access_whose_missed_bytes_exclude_the_hit) {
  an::StorageRead io{};
  io.bytes = 1 << 20;
  io.hit_bytes = 3 << 18;
  io.cache = fmt::Cache::kPartial;
  BOOST_TEST(io.went_to_storage());
  BOOST_TEST(io.miss_bytes() == uint64_t{1} << 18);
  io.cache = fmt::Cache::kHit;
  BOOST_TEST(!io.went_to_storage());
  BOOST_TEST(io.miss_bytes() == 0u);
  io.cache = fmt::Cache::kMiss;
  BOOST_TEST(io.miss_bytes() == uint64_t{1} << 20);
  io.cache = fmt::Cache::kPartial;
  io.hit_bytes = 2 << 20;  // more than the read: a bad record misses nothing
  BOOST_TEST(io.miss_bytes() == 0u);
}

// A mark's text is its name: the analyzer reads `set …` marks from it.
BOOST_AUTO_TEST_CASE(a_mark_carries_its_text) {
  an::RankTrace rank;
  an::RankScope scope(rank);
  const auto evs = convert_all(
      pipeline_file(Records().core(fmt::Kind::kMark, fmt::kInstant, 4000, 0, 5, 0)), scope, 0);
  BOOST_TEST(rank.names.at(only(evs, Kind::kMark).name) == "train.py:42");
}

BOOST_AUTO_TEST_SUITE_END()
