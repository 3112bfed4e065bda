// TraceReader on well-formed files: every kind and extension read back,
// tables, metadata, attachments, End totals and clock conversion.
#include <bit>
#include <cstddef>
#include <cstring>
#include <filesystem>

#include <boost/test/unit_test.hpp>

#include "libtrace/trace_builder.hpp"
#include "stallscope/clock.hpp"
#include "stallscope/reader.hpp"

using namespace stallscope;
using namespace stallscope::testing;
using format::Ext;
using format::Kind;
using reader::Event;
using reader::Status;
using reader::TraceReader;

namespace {

struct Read {
  Event e;
  std::vector<uint64_t> ids;
};

std::vector<Read> read_all(TraceReader& r) {
  std::vector<Read> out;
  Event e;
  while (r.next(e)) out.push_back({e, {e.ids.begin(), e.ids.end()}});
  return out;
}

template <typename T>
bool same_bytes(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// One record of the round trip: the core fields and the extensions written.
struct Case {
  Kind kind;
  uint8_t flags;
  uint16_t aux;
  uint32_t name;
  uint64_t ts, value, corr;
  uint32_t track;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(trace_reader)

BOOST_AUTO_TEST_CASE(every_kind_and_extension_round_trips_field_by_field) {
  TempDir dir;
  const auto io = [] {
    auto x = make_ext<format::IoExt>(Ext::kIo, 2);
    x.bytes = 4096;
    x.offset = 1ull << 33;
    x.hit_bytes = 1024;
    x.queued_ns = 77;
    x.sample_id = 5;
    x.tier = 2;
    x.cache = 3;
    x.cache_method = 2;
    x.queue_depth = 8;
    return x;
  }();
  const auto work = [] {
    auto x = make_ext<format::WorkExt>(Ext::kWork, 3);
    x.sample_id = 5;
    x.batch_id = 9;
    x.count = 32;
    return x;
  }();
  const auto copy = [] {
    auto x = make_ext<format::CopyExt>(Ext::kCopy, 7);
    x.bytes = 1 << 20;
    x.src = 2;
    x.dst = 3;
    x.device = 1;
    return x;
  }();
  const auto dev = [] {
    auto x = make_ext<format::DeviceExt>(Ext::kDevice, 7);
    x.device = 1;
    x.sync_kind = 2;
    return x;
  }();
  const auto coll = [] {
    auto x = make_ext<format::CollectiveExt>(Ext::kCollective, 1 | (7 << 8));
    x.bytes = 1 << 24;
    x.comm_id = 0xabc;
    x.seq = 12;
    x.rank = 1;
    x.nranks = 4;
    x.peer = -1;
    return x;
  }();
  const auto api = [] {
    auto x = make_ext<format::ApiExt>(Ext::kApi, 211);
    x.domain = 1;
    x.result = -3;
    return x;
  }();
  const auto step = [] {
    auto x = make_ext<format::StepExt>(Ext::kStep, 1);
    x.index = 42;
    return x;
  }();
  const auto range = [] {
    auto x = make_ext<format::RangeExt>(Ext::kRange, 4);
    x.color = 0xff00ff;
    x.category = 3;
    return x;
  }();
  const uint64_t ids_a[] = {1, 2, 3};
  const uint64_t ids_b[] = {4, 5};

  std::vector<Case> cases;
  Records t1, t2;
  auto add = [&](Records& recs, Case c) -> Records& {
    cases.push_back(c);
    return recs.core(c.kind, c.flags, c.ts, c.value, c.name, c.corr, c.aux);
  };
  add(t1, {Kind::kStep, format::kComplete, 0, 0, 10000, 500, 0, 1}).ext(step);
  add(t1, {Kind::kDataWait, format::kComplete, 0, 0, 10100, 50, 9, 1}).ext(work);
  add(t1, {Kind::kStorageRead, rec_flags(format::kComplete, format::kAsync), 0, 1, 10200, 60, 0, 1})
      .ext(io);
  add(t1, {Kind::kPreprocess, format::kComplete, 0, 0, 10300, 70, 0, 1}).ext(work);
  add(t1, {Kind::kBatchReady, format::kInstant, 0, 0, 10400, 0, 9, 1})
      .ext(work)
      .ids(ids_a)
      .ids(ids_b);
  add(t1, {Kind::kApiCall, format::kComplete, 0, 0, 10500, 10, 555, 1}).ext(api);
  for (Kind k : {Kind::kH2D, Kind::kD2H, Kind::kD2D, Kind::kMemset})
    add(t2, {k, rec_flags(format::kComplete, format::kEmulated), 0, 0, 10600, 30, 555, 2})
        .ext(copy);
  add(t2, {Kind::kKernel, format::kComplete, 0, 3, 10700, 90, 555, 2}).ext(dev);
  add(t2, {Kind::kCollective, format::kComplete, 0, 4, 10800, 80, 0, 2}).ext(coll);
  add(t1, {Kind::kSync, format::kComplete, 0, 0, 10900, 40, 0, 1}).ext(dev);
  add(t1, {Kind::kRange, format::kBegin, 0, 1, 11000, 0, 0, 1}).ext(range);
  add(t1, {Kind::kRange, format::kEnd, 0, 1, 11050, 0, 0, 1});
  add(t1, {Kind::kCounter, rec_flags(format::kInstant, format::kValueDouble), 0, 5, 11100,
           std::bit_cast<uint64_t>(2.5), 100, 1});
  add(t1, {Kind::kCapture, format::kBegin, 0, 0, 11200, 0, 0, 1});
  add(t1, {Kind::kCapture, format::kEnd, 0, 0, 11300, 0, 0, 1});
  add(t1, {Kind::kGap, format::kInstant, 0, 0, 11400, 17, 0, 1});
  add(t1, {Kind::kMark, format::kInstant, 6, 6, 11500, 0, 0, 1});

  TraceBuilder b;
  b.strings(
      {{1, "read"}, {2, "/data/f0"}, {3, "kernel_a"}, {4, "nccl"}, {5, "queue"}, {6, "note"}});
  b.tracks({thread_track(1, 100, 1), thread_track(2, 7, 0, format::TrackType::kGpuStream, 1)});
  b.events({{1, t1}, {2, t2}}).end();
  b.write(dir.file("a.sst"));

  TraceReader r(dir.file("a.sst"));
  const auto got = read_all(r);
  BOOST_TEST(r.error() == "");
  BOOST_TEST((r.status() == Status::kComplete));
  // Blocks are read in file order: track 1's records, then track 2's.
  std::stable_partition(cases.begin(), cases.end(), [](const Case& c) { return c.track == 1; });
  BOOST_REQUIRE_EQUAL(got.size(), cases.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const Case& c = cases[i];
    const Event& e = got[i].e;
    BOOST_TEST_CONTEXT("record " << i << " kind " << reader::kind_name(e.kind)) {
      BOOST_TEST(e.kind == static_cast<uint8_t>(c.kind));
      BOOST_TEST(e.flags == c.flags);
      BOOST_TEST(e.phase == (c.flags & format::kPhaseMask));
      BOOST_TEST(e.aux == c.aux);
      BOOST_TEST(e.name_id == c.name);
      BOOST_TEST(e.track_id == c.track);
      BOOST_TEST(e.ts_raw == c.ts);
      BOOST_TEST(e.ts_ns == static_cast<int64_t>(c.ts));  // ticks are ns
      BOOST_TEST(e.value == c.value);
      BOOST_TEST(e.corr == c.corr);
      const bool timed = e.phase == format::kComplete;
      BOOST_TEST(e.dur_ns == (timed ? static_cast<int64_t>(c.value) : 0));
    }
  }
  auto find = [&](Kind k) -> const Read& {
    for (const auto& x : got)
      if (x.e.kind == static_cast<uint8_t>(k)) return x;
    throw std::runtime_error("kind missing");
  };
  BOOST_TEST(same_bytes(find(Kind::kStorageRead).e.io, io));
  BOOST_TEST(find(Kind::kStorageRead).e.ext_mask == reader::ext_bit(Ext::kIo));
  BOOST_TEST(find(Kind::kStorageRead).e.io.offset == (1ull << 33));
  BOOST_TEST(same_bytes(find(Kind::kPreprocess).e.work, work));
  BOOST_TEST(same_bytes(find(Kind::kH2D).e.copy, copy));
  BOOST_TEST(same_bytes(find(Kind::kKernel).e.device, dev));
  BOOST_TEST(same_bytes(find(Kind::kCollective).e.collective, coll));
  BOOST_TEST(find(Kind::kCollective).e.collective.peer == -1);
  BOOST_TEST(same_bytes(find(Kind::kApiCall).e.api, api));
  BOOST_TEST(find(Kind::kApiCall).e.api.result == -3);
  BOOST_TEST(same_bytes(find(Kind::kStep).e.step, step));
  BOOST_TEST(same_bytes(find(Kind::kRange).e.range, range));
  const auto& ready = find(Kind::kBatchReady);
  BOOST_TEST(ready.e.has(Ext::kIdList));
  BOOST_TEST(ready.e.has(Ext::kWork));
  BOOST_TEST(ready.ids == (std::vector<uint64_t>{1, 2, 3, 4, 5}), boost::test_tools::per_element());
  BOOST_TEST(find(Kind::kCounter).e.number() == 2.5);
  BOOST_TEST(find(Kind::kCounter).e.ext_mask == 0u);
  BOOST_TEST(find(Kind::kGap).e.value == 17u);
  BOOST_TEST(find(Kind::kGap).e.dur_ns == 0);

  // A RecordView of each record holds what its Event holds, in place.
  r.rewind();
  reader::RecordView v;
  size_t i = 0;
  const auto ext_is = [&](Ext x, const auto& want) {
    const uint8_t* at = v.ext[static_cast<uint8_t>(x) - format::kExtBase];
    return v.has(x) && std::memcmp(at, &want, sizeof want) == 0;
  };
  while (r.next(v, reader::kAllExts)) {
    BOOST_REQUIRE(i < got.size());
    const Event& e = got[i].e;
    BOOST_TEST_CONTEXT("view " << i << " kind " << reader::kind_name(e.kind)) {
      BOOST_TEST(v.kind == e.kind);
      BOOST_TEST(v.flags == e.flags);
      BOOST_TEST(v.phase == e.phase);
      BOOST_TEST(v.track_id == e.track_id);
      BOOST_TEST(v.ts_ns == e.ts_ns);
      BOOST_TEST(v.dur_ns == e.dur_ns);
      BOOST_TEST(v.offset == e.offset);
      BOOST_TEST(v.core_field<uint16_t>(offsetof(format::CoreRecord, aux)) == e.aux);
      BOOST_TEST(v.core_field<uint32_t>(offsetof(format::CoreRecord, name_id)) == e.name_id);
      BOOST_TEST(v.core_field<uint64_t>(offsetof(format::CoreRecord, ts)) == e.ts_raw);
      BOOST_TEST(v.core_field<uint64_t>(offsetof(format::CoreRecord, value)) == e.value);
      BOOST_TEST(v.core_field<uint64_t>(offsetof(format::CoreRecord, corr)) == e.corr);
      BOOST_TEST(v.ext_mask == e.ext_mask);
      if (e.has(Ext::kIo)) BOOST_TEST(ext_is(Ext::kIo, e.io));
      if (e.has(Ext::kWork)) BOOST_TEST(ext_is(Ext::kWork, e.work));
      if (e.has(Ext::kCopy)) BOOST_TEST(ext_is(Ext::kCopy, e.copy));
      if (e.has(Ext::kDevice)) BOOST_TEST(ext_is(Ext::kDevice, e.device));
      if (e.has(Ext::kCollective)) BOOST_TEST(ext_is(Ext::kCollective, e.collective));
      if (e.has(Ext::kApi)) BOOST_TEST(ext_is(Ext::kApi, e.api));
      if (e.has(Ext::kStep)) BOOST_TEST(ext_is(Ext::kStep, e.step));
      if (e.has(Ext::kRange)) BOOST_TEST(ext_is(Ext::kRange, e.range));
      BOOST_TEST(std::vector<uint64_t>(v.ids.begin(), v.ids.end()) == got[i].ids,
                 boost::test_tools::per_element());
    }
    ++i;
  }
  BOOST_TEST(i == got.size());
  BOOST_TEST(r.error() == "");
}

BOOST_AUTO_TEST_CASE(strings_and_tracks_resolve_and_unknown_ids_are_empty) {
  TempDir dir;
  TraceBuilder b;
  b.strings({{1, "main"}, {2, "loader"}, {4000000000u, "far away"}});
  b.tracks({thread_track(1, 100, 1), thread_track(5, 101, 2)});
  b.strings({{3, std::string("bin\0ary", 7)}});
  b.tracks({thread_track(5, 202, 3)});  // a later entry for track 5 wins
  b.end();
  b.write(dir.file("t.sst"));
  TraceReader r(dir.file("t.sst"));
  BOOST_TEST((r.status() == Status::kComplete));
  BOOST_TEST(r.string(1) == "main");
  BOOST_TEST(r.string(4000000000u) == "far away");
  BOOST_TEST(r.string(3) == std::string_view("bin\0ary", 7));
  BOOST_TEST(r.string(0) == "");
  BOOST_TEST(r.string(99) == "");
  BOOST_TEST(r.tracks().size() == 2u);
  BOOST_REQUIRE(r.track(5) != nullptr);
  BOOST_TEST(r.track(5)->tid == 202u);
  BOOST_TEST(r.track(5)->name_id == 3u);
  BOOST_TEST(r.track(1)->tid == 100u);
  BOOST_TEST(r.track(77) == nullptr);
}

BOOST_AUTO_TEST_CASE(metadata_chunks_merge_and_attachments_keep_their_bytes) {
  TempDir dir;
  TraceBuilder b;
  b.metadata(R"({"host":"node7","rank":3,"config":{"disk_budget_bytes":1048576}})");
  b.metadata(R"({"world_size":8})");
  b.metadata("{not json");
  const std::string topo("<topo>\0\x01\xff</topo>", 16);
  b.attachment("topology.xml", topo);
  b.attachment("config", "a=1");
  b.end();
  b.write(dir.file("m.sst"));
  TraceReader r(dir.file("m.sst"));
  BOOST_TEST((r.status() == Status::kComplete));
  BOOST_TEST(r.host() == "node7");
  BOOST_TEST(r.rank() == 3);
  BOOST_TEST(r.metadata_value("/world_size").value_or("") == "8");
  BOOST_TEST(r.metadata_value("/config/disk_budget_bytes").value_or("") == "1048576");
  BOOST_TEST(!r.metadata_value("/nope").has_value());
  BOOST_TEST(!r.metadata_value("not a pointer").has_value());
  bool warned = false;
  for (const auto& d : r.diagnostics())
    warned |= d.message.find("not valid JSON") != std::string::npos;
  BOOST_TEST(warned);
  BOOST_REQUIRE_EQUAL(r.attachments().size(), 2u);
  BOOST_TEST(r.attachments()[0].name == "topology.xml");
  BOOST_TEST(r.attachments()[0].data == topo);
  BOOST_TEST(r.attachments()[1].data == "a=1");
}

BOOST_AUTO_TEST_CASE(end_chunk_totals_are_read_and_the_file_is_complete) {
  TempDir dir;
  TraceBuilder b;
  b.events({{1, Records().core(Kind::kGap, format::kInstant, 5000, 12)}});
  b.end({0, 0, 99000, 7, 4096}, {{1, 0, 100, 12, 3}, {2, 0, 50, 0, 4}});
  b.write(dir.file("e.sst"));
  TraceReader r(dir.file("e.sst"));
  BOOST_TEST((r.status() == Status::kComplete));
  BOOST_TEST(r.end().present);
  BOOST_TEST(r.end().summary.disk_dropped == 7u);
  BOOST_TEST(r.end().summary.end_mono_ns == 99000u);
  BOOST_TEST(r.end().summary.bytes_written == 4096u);
  BOOST_REQUIRE_EQUAL(r.end().tracks.size(), 2u);
  BOOST_TEST(r.end().tracks[0].dropped_buffer == 12u);
  BOOST_TEST(r.end().tracks[1].dropped_disk == 4u);
  BOOST_TEST(r.lost_bytes() == 0u);
  BOOST_TEST(r.diagnostics().empty());
}

BOOST_AUTO_TEST_CASE(file_without_end_chunk_is_cut_with_nothing_lost) {
  TempDir dir;
  TraceBuilder b;
  b.events({{1, Records().core(Kind::kMark, format::kInstant, 5000)}});
  b.write(dir.file("c.sst"));
  TraceReader r(dir.file("c.sst"));
  BOOST_TEST(read_all(r).size() == 1u);
  BOOST_TEST((r.status() == Status::kTruncated));
  BOOST_TEST(r.lost_bytes() == 0u);
  BOOST_REQUIRE(!r.diagnostics().empty());
  BOOST_TEST(r.diagnostics()[0].message.find("no End chunk") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(tsc_ticks_interpolate_piecewise_between_triples) {
  TempDir dir;
  TraceBuilder b;
  b.header.flags = 0;
  b.header.tsc_hz = 3000000000;  // nominal only: the triples below win
  b.header.start = {2000, 1000, 5000000000};
  // Segment 1: 2 ticks per ns; segment 2: 4 ticks per ns.
  b.clock = {2002000, 1001000, 5001000000};
  b.events({{1, Records().core(Kind::kKernel, 0, 1002000, 2000)}});
  b.clock = {6002000, 2001000, 5002000000};
  b.events({{1, Records()
                    .core(Kind::kKernel, 0, 4002000, 4000)
                    .core(Kind::kMark, rec_flags(format::kInstant, format::kTimesNs), 777)}});
  b.end();
  b.write(dir.file("tsc.sst"));
  TraceReader r(dir.file("tsc.sst"));
  const auto got = read_all(r);
  BOOST_REQUIRE_EQUAL(got.size(), 3u);
  BOOST_TEST(got[0].e.ts_ns == 1000 + 1000000 / 2);
  BOOST_TEST(got[0].e.dur_ns == 1000);
  BOOST_TEST(got[1].e.ts_ns == 1001000 + 2000000 / 4);
  BOOST_TEST(got[1].e.dur_ns == 1000);
  BOOST_TEST(got[2].e.ts_ns == 777);  // kTimesNs: already ns, not converted
  BOOST_TEST(r.start_mono_ns() == 1000);
  BOOST_TEST(r.to_real_ns(1000) == 5000000000 - 1000 + 1000);
  BOOST_TEST(r.to_real_ns(2001000) == 5002000000);
}

// Every converted time equals TickConverter's, at and around each triple
// (where the reader's cached segments begin and end), for durations inside
// one segment and across several, with rates changing between triples.
BOOST_AUTO_TEST_CASE(converted_times_match_the_tick_converter_at_every_segment_edge) {
  TempDir dir;
  TraceBuilder b;
  b.header.flags = 0;
  b.header.tsc_hz = 2500000000;
  b.header.start = {1000000, 500000, 7000000000};
  const std::vector<format::ClockTriple> triples = {
      {3000000, 1500000, 7001000000},   // 2 ticks/ns
      {7000000, 2500000, 7002000000},   // 4 ticks/ns
      {7300000, 2600000, 7002100000},   // 3 ticks/ns
      {9800001, 3600000, 7003100000}};  // 2.5000001 ticks/ns (not exact)
  std::vector<uint64_t> edges = {0, 1, b.header.start.ticks};
  TickConverter conv(false, 1e9 / double(b.header.tsc_hz));
  conv.add(b.header.start);
  std::vector<std::vector<std::pair<int64_t, int64_t>>> expected;
  for (const auto& t : triples) {
    conv.add(t);
    edges.push_back(t.ticks);
    std::vector<uint64_t> ticks;
    for (uint64_t e : edges)
      for (int64_t d : {-2, -1, 0, 1, 2, 777})
        if (int64_t(e) + d >= 0) ticks.push_back(uint64_t(int64_t(e) + d));
    ticks.push_back(t.ticks + 123456789);  // past the newest triple
    Records recs;
    std::vector<std::pair<int64_t, int64_t>> want;
    for (uint64_t ts : ticks) {
      for (uint64_t dur : {uint64_t{0}, uint64_t{1}, uint64_t{3}, uint64_t{2000000}, uint64_t{100000000000}}) {
        recs.core(Kind::kKernel, 0, ts, dur);
        want.emplace_back(conv.to_mono_ns(ts), std::max<int64_t>(0, conv.duration_ns(ts, dur)));
      }
    }
    b.clock = t;
    b.events({{1, recs}});
    expected.push_back(std::move(want));
  }
  b.end();
  b.write(dir.file("edges.sst"));
  TraceReader r(dir.file("edges.sst"));
  const auto got = read_all(r);
  size_t i = 0, mismatches = 0;
  for (const auto& chunk : expected) {
    for (const auto& [ts, dur] : chunk) {
      BOOST_REQUIRE_LT(i, got.size());
      if (got[i].e.ts_ns != ts || got[i].e.dur_ns != dur) {
        if (++mismatches <= 5)
          BOOST_TEST_MESSAGE("record " << i << ": ts " << got[i].e.ts_ns << " want " << ts << ", dur "
                                       << got[i].e.dur_ns << " want " << dur);
      }
      ++i;
    }
  }
  BOOST_TEST(i == got.size());
  BOOST_TEST(mismatches == 0u);
}

BOOST_AUTO_TEST_CASE(ticks_are_ns_files_convert_one_to_one) {
  TempDir dir;
  TraceBuilder b;  // kFileTicksAreNs by default
  b.clock = {3000000, 3000000, 0};
  b.events({{1, Records().core(Kind::kStep, 0, 2500000, 123456)}});
  b.end();
  b.write(dir.file("ns.sst"));
  TraceReader r(dir.file("ns.sst"));
  const auto got = read_all(r);
  BOOST_REQUIRE_EQUAL(got.size(), 1u);
  BOOST_TEST(got[0].e.ts_ns == 2500000);
  BOOST_TEST(got[0].e.dur_ns == 123456);
  BOOST_TEST(got[0].e.end_ns() == 2623456);
}

BOOST_AUTO_TEST_CASE(rewind_streams_the_same_events_again) {
  TempDir dir;
  TraceBuilder b;
  b.events({{1, Records()
                    .core(Kind::kMark, format::kInstant, 10)
                    .core(Kind::kMark, format::kInstant, 20)}});
  b.events({{2, Records().core(Kind::kMark, format::kInstant, 30)}});
  b.end();
  b.write(dir.file("r.sst"));
  TraceReader r(dir.file("r.sst"));
  const auto first = read_all(r);
  r.rewind();
  const auto second = read_all(r);
  BOOST_REQUIRE_EQUAL(first.size(), 3u);
  BOOST_REQUIRE_EQUAL(second.size(), 3u);
  for (size_t i = 0; i < 3; ++i) BOOST_TEST(first[i].e.ts_ns == second[i].e.ts_ns);
  BOOST_TEST(second[2].e.track_id == 2u);
  BOOST_TEST(r.event_payload_bytes() == 2u * 8 + 3u * 32);
}

BOOST_AUTO_TEST_CASE(list_trace_files_finds_sst_files_sorted_and_names_missing_paths) {
  TempDir dir;
  TraceBuilder b;
  b.end();
  b.write(dir.file("b.seg1.sst"));
  b.write(dir.file("a.sst"));
  b.write(dir.file("notes.txt"));
  std::string err;
  const auto files = reader::list_trace_files(dir.path(), &err);
  BOOST_REQUIRE_EQUAL(files.size(), 2u);
  BOOST_TEST(files[0] == dir.file("a.sst"));
  BOOST_TEST(files[1] == dir.file("b.seg1.sst"));
  BOOST_TEST(reader::list_trace_files(dir.file("missing"), &err).empty());
  BOOST_TEST(err.find("missing: no such file") != std::string::npos);
  TempDir empty;
  BOOST_TEST(reader::list_trace_files(empty.path(), &err).empty());
  BOOST_TEST(err.find("no *.sst") != std::string::npos);
}

// Valid files of several shapes for scripts/fuzz.sh's seed corpus.
BOOST_AUTO_TEST_CASE(writes_readable_fuzz_seed_files) {
  const std::string seeds = std::string(STALLSCOPE_TEST_BINARY_DIR) + "/fuzz-seeds";
  std::filesystem::create_directories(seeds);
  const uint64_t ids[] = {7, 8};
  TraceBuilder full;
  full.strings({{1, "read"}, {2, "/f"}}).tracks({thread_track(1, 10, 1)});
  full.metadata(R"({"host":"h","rank":0})").attachment("cfg", "x=1");
  full.events({{1, Records()
                       .core(Kind::kStorageRead, format::kAsync, 100, 50, 1)
                       .ext(make_ext<format::IoExt>(Ext::kIo, 2))
                       .core(Kind::kBatchReady, format::kInstant, 200)
                       .ext(make_ext<format::WorkExt>(Ext::kWork))
                       .ids(ids)
                       .core(Kind::kStep, format::kBegin, 300)
                       .ext(make_ext<format::StepExt>(Ext::kStep))
                       .core(Kind::kStep, format::kEnd, 400)
                       .core(Kind::kCounter, format::kInstant, 500, 3)}});
  full.end({0, 0, 1000, 0, 0}, {{1, 0, 5, 0, 0}});
  full.write(seeds + "/full.sst");
  TraceBuilder tsc;
  tsc.header.flags = 0;
  tsc.header.tsc_hz = 2000000000;
  tsc.events({{1, Records()
                      .core(Kind::kKernel, 0, 5000, 100)
                      .ext(make_ext<format::DeviceExt>(Ext::kDevice))}});
  tsc.write(seeds + "/cut_tsc.sst");
  for (const char* name : {"/full.sst", "/cut_tsc.sst"}) {
    TraceReader r(seeds + name);
    BOOST_TEST(!read_all(r).empty());
    BOOST_TEST(r.error() == "");
  }
}

BOOST_AUTO_TEST_CASE(masked_decode_skips_unwanted_extensions_without_copying_them) {
  TempDir dir;
  auto io = make_ext<format::IoExt>(Ext::kIo, 2);
  io.bytes = 4096;
  auto dev = make_ext<format::DeviceExt>(Ext::kDevice, 0);
  dev.device = 7;
  auto step = make_ext<format::StepExt>(Ext::kStep, 1);
  step.index = 42;
  const uint64_t ids[] = {1, 2, 3};
  Records t1;
  t1.core(Kind::kStorageRead, format::kComplete, 100, 10).ext(io);
  t1.core(Kind::kKernel, format::kComplete, 200, 10).ext(dev);
  t1.core(Kind::kStep, format::kComplete, 300, 10).ext(step);
  t1.core(Kind::kBatchReady, format::kInstant, 400, 0).ids(ids);
  TraceBuilder b;
  b.tracks({thread_track(1, 100, 1)});
  b.events({{1, t1}}).end();
  b.write(dir.file("m.sst"));

  TraceReader r(dir.file("m.sst"));
  Event e;
  const uint32_t wanted = reader::ext_bit(Ext::kIo) | reader::ext_bit(Ext::kIdList);
  std::vector<uint32_t> masks;
  std::vector<int64_t> times;
  while (r.next(e, wanted)) {
    masks.push_back(e.ext_mask);
    times.push_back(e.ts_ns);
    if (e.kind == static_cast<uint8_t>(Kind::kStorageRead)) BOOST_TEST(e.io.bytes == 4096u);
    if (e.kind == static_cast<uint8_t>(Kind::kKernel)) BOOST_TEST(e.device.device == 0u);  // not copied
    if (e.kind == static_cast<uint8_t>(Kind::kStep)) BOOST_TEST(e.step.index == 0u);
    if (e.kind == static_cast<uint8_t>(Kind::kBatchReady)) BOOST_TEST(e.ids.size() == 3u);
  }
  BOOST_TEST((r.status() == Status::kComplete), r.error());
  BOOST_TEST(masks == (std::vector<uint32_t>{reader::ext_bit(Ext::kIo), 0, 0, reader::ext_bit(Ext::kIdList)}),
             boost::test_tools::per_element());
  BOOST_TEST(times == (std::vector<int64_t>{100, 200, 300, 400}), boost::test_tools::per_element());
  r.rewind();  // nothing wanted: the same events, no extensions, no ids
  size_t n = 0;
  while (r.next(e, 0)) {
    BOOST_TEST(e.ext_mask == 0u);
    BOOST_TEST(e.ids.empty());
    ++n;
  }
  BOOST_TEST(n == 4u);
  r.rewind();  // the full decode still sees everything
  while (r.next(e))
    if (e.kind == static_cast<uint8_t>(Kind::kStep)) BOOST_TEST(e.step.index == 42u);
  r.rewind();  // a view with the same mask: the same extensions, pointed to
  reader::RecordView v;
  masks.clear();
  while (r.next(v, wanted)) {
    masks.push_back(v.ext_mask);
    if (v.kind == static_cast<uint8_t>(Kind::kStorageRead))
      BOOST_TEST(v.ext_field<uint64_t>(Ext::kIo, offsetof(format::IoExt, bytes)) == 4096u);
    if (v.kind == static_cast<uint8_t>(Kind::kBatchReady)) BOOST_TEST(v.ids.size() == 3u);
  }
  const std::vector<uint32_t> view_masks{reader::ext_bit(Ext::kIo), 0, 0,
                                         reader::ext_bit(Ext::kIdList)};
  BOOST_TEST(masks == view_masks, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
