// Chrome trace-event export: valid JSON, slices, async pairs for overlaps,
// Begin/End pairing, counters, instants, names, windows, size warnings.
#include <bit>
#include <sstream>

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "libtrace/trace_builder.hpp"
#include "stallscope/chrome_export.hpp"

using namespace stallscope;
using namespace stallscope::testing;
using format::Ext;
using format::Kind;
using nlohmann::json;

namespace {

struct Exported {
  json doc;
  reader::ChromeExportResult res;

  // Events with phase `ph` (and name, when given).
  std::vector<json> with(const std::string& ph, const std::string& name = "") const {
    std::vector<json> out;
    for (const auto& e : doc["traceEvents"])
      if (e["ph"] == ph && (name.empty() || e["name"] == name)) out.push_back(e);
    return out;
  }
  bool warned(const std::string& text) const {
    for (const auto& w : res.warnings)
      if (w.find(text) != std::string::npos) return true;
    return false;
  }
};

Exported export_files(const std::vector<std::string>& paths,
                      const reader::ChromeExportOptions& opt = {}) {
  std::ostringstream out;
  Exported x;
  x.res = reader::export_chrome(paths, out, opt);
  x.doc = json::parse(out.str());  // throws (fails the test) on invalid JSON
  return x;
}

// Builder file with host/rank metadata and one named thread track.
TraceBuilder named_file() {
  TraceBuilder b;
  b.metadata(R"({"host":"node7","rank":3})");
  b.strings({{1, "main"}, {2, "read"}, {3, "/data/f0"}});
  b.tracks({thread_track(1, 100, 1), thread_track(2, 9, 0, format::TrackType::kGpuStream, 1)});
  return b;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(chrome_export)

BOOST_AUTO_TEST_CASE(time_bounds_and_step_ranges_parse_with_units) {
  reader::TimeBound b;
  std::string err;
  BOOST_TEST(reader::parse_time_bound("1500", b, &err));
  BOOST_TEST(b.ns == 1500);
  BOOST_TEST(!b.absolute);
  BOOST_TEST(reader::parse_time_bound("1.5ms", b, &err));
  BOOST_TEST(b.ns == 1500000);
  BOOST_TEST(reader::parse_time_bound("250us", b, &err));
  BOOST_TEST(b.ns == 250000);
  BOOST_TEST(reader::parse_time_bound("@2s", b, &err));
  BOOST_TEST(b.ns == 2000000000);
  BOOST_TEST(b.absolute);
  for (const char* bad : {"", "-5", "1x", "ms", "nan", "1e300s", "@"}) {
    BOOST_TEST(!reader::parse_time_bound(bad, b, &err), bad);
    BOOST_TEST(err.find("is not a time") != std::string::npos);
  }
  std::pair<uint64_t, uint64_t> r;
  BOOST_TEST(reader::parse_step_range("10:12", r, &err));
  BOOST_TEST((r == std::pair<uint64_t, uint64_t>{10, 12}));
  BOOST_TEST(reader::parse_step_range("7", r, &err));
  BOOST_TEST((r == std::pair<uint64_t, uint64_t>{7, 7}));
  for (const char* bad : {"12:10", "a:b", ":3", "3:", ""})
    BOOST_TEST(!reader::parse_step_range(bad, r, &err), bad);
}

BOOST_AUTO_TEST_CASE(slices_carry_kind_name_times_and_args_under_named_process_and_threads) {
  TempDir dir;
  auto b = named_file();
  auto io = make_ext<format::IoExt>(Ext::kIo, 3);
  io.bytes = 4096;
  io.tier = 2;
  b.events({{1, Records().core(Kind::kStorageRead, 0, 3000, 1500, 2, 77).ext(io)},
            {2, Records()
                    .core(Kind::kKernel, format::kEmulated, 4000, 250)
                    .ext(make_ext<format::DeviceExt>(Ext::kDevice, 9))}});
  b.end();
  b.write(dir.file("a.sst"));
  const auto x = export_files({dir.file("a.sst")});
  BOOST_TEST(x.res.ok());
  const auto proc = x.with("M", "process_name");
  BOOST_REQUIRE_EQUAL(proc.size(), 1u);
  BOOST_TEST(proc[0]["args"]["name"] == "node7 rank 3 (pid 4242)");
  BOOST_TEST(proc[0]["pid"] == 4242);
  const auto threads = x.with("M", "thread_name");
  BOOST_REQUIRE_EQUAL(threads.size(), 2u);
  BOOST_TEST(threads[0]["args"]["name"] == "main (tid 100)");
  BOOST_TEST(threads[1]["args"]["name"] == "GPU 1 stream 9");
  const auto read = x.with("X", "read");
  BOOST_REQUIRE_EQUAL(read.size(), 1u);
  BOOST_TEST(read[0]["cat"] == "storage_read");
  BOOST_TEST(read[0]["tid"] == 1);
  BOOST_TEST(read[0]["ts"].get<double>() == 2.0);  // (3000 - start 1000) ns
  BOOST_TEST(read[0]["dur"].get<double>() == 1.5);
  BOOST_TEST(read[0]["args"]["bytes"] == 4096);
  BOOST_TEST(read[0]["args"]["file"] == "/data/f0");
  BOOST_TEST(read[0]["args"]["tier"] == "network");
  BOOST_TEST(read[0]["args"]["corr"] == 77);
  const auto kernel = x.with("X", "kernel");
  BOOST_REQUIRE_EQUAL(kernel.size(), 1u);
  BOOST_TEST(kernel[0]["args"]["stream"] == 9);
  BOOST_TEST(kernel[0]["args"]["emulated"] == true);
  BOOST_TEST(x.doc["otherData"]["base_mono_ns"] == 1000);
}

BOOST_AUTO_TEST_CASE(device_side_and_api_attributes_appear_in_args) {
  TempDir dir;
  auto b = named_file();
  auto coll = make_ext<format::CollectiveExt>(Ext::kCollective, 1 | (7 << 8));
  coll.nranks = 4;
  coll.peer = -1;
  auto copy = make_ext<format::CopyExt>(Ext::kCopy, 7);
  copy.bytes = 1 << 20;
  copy.src = 2;
  copy.dst = 3;
  auto api = make_ext<format::ApiExt>(Ext::kApi, 211);
  api.domain = 3;
  api.result = -2;
  auto range = make_ext<format::RangeExt>(Ext::kRange, 3);
  range.color = 255;
  const uint64_t ids[] = {5, 6, 7};
  b.events({{1, Records()
                    .core(Kind::kCollective, 0, 1000, 10)
                    .ext(coll)
                    .core(Kind::kApiCall, 0, 1020, 10)
                    .ext(api)
                    .core(Kind::kRange, 0, 1040, 10)
                    .ext(range)
                    .core(Kind::kBatchReady, format::kInstant, 1060, 0, 0, 9)
                    .ids(ids)},
            {2, Records().core(Kind::kH2D, 0, 1100, 10).ext(copy)}});
  b.end();
  b.write(dir.file("d.sst"));
  const auto x = export_files({dir.file("d.sst")});
  const auto c = x.with("X", "collective")[0]["args"];
  BOOST_TEST(c["op"] == "all_reduce");
  BOOST_TEST(c["dtype"] == 7);
  BOOST_TEST(c["nranks"] == 4);
  BOOST_TEST(c["peer"] == -1);
  const auto a = x.with("X", "api_call")[0]["args"];
  BOOST_TEST(a["domain"] == "nccl");
  BOOST_TEST(a["cbid"] == 211);
  BOOST_TEST(a["result"] == -2);
  BOOST_TEST(x.with("X", "range")[0]["args"]["domain"] == "/data/f0");
  BOOST_TEST(x.with("X", "range")[0]["args"]["color"] == 255);
  const auto h = x.with("X", "h2d")[0]["args"];
  BOOST_TEST(h["src"] == "pinned");
  BOOST_TEST(h["dst"] == "device");
  BOOST_TEST(h["stream"] == 7);
  const auto ready = x.with("i", "batch_ready")[0]["args"];
  BOOST_TEST(ready["id_count"] == 3);
  BOOST_TEST(ready["ids"] == json::parse("[5,6,7]"));
  BOOST_TEST(ready["corr"] == 9);
}

BOOST_AUTO_TEST_CASE(overlapping_reads_become_async_pairs_and_nested_spans_stay_slices) {
  TempDir dir;
  auto b = named_file();
  b.events({{1, Records()
                    .core(Kind::kPreprocess, 0, 1100, 10)     // child written first …
                    .core(Kind::kStep, 0, 1000, 500)          // … then its parent
                    .core(Kind::kStorageRead, 0, 2000, 1000)  // read A
                    .core(Kind::kStorageRead, 0, 2500, 1000)  // read B crosses A
                    .core(Kind::kStorageRead, 0, 2600, 100)   // nested in A
                    .core(Kind::kStorageRead, format::kAsync, 5000, 10)}});  // flagged async
  b.end();
  b.write(dir.file("o.sst"));
  const auto x = export_files({dir.file("o.sst")});
  BOOST_TEST(x.with("X", "preprocess").size() == 1u);
  BOOST_TEST(x.with("X", "step").size() == 1u);
  BOOST_TEST(x.with("X", "storage_read").size() == 2u);
  const auto b_ev = x.with("b", "storage_read");
  const auto e_ev = x.with("e", "storage_read");
  BOOST_REQUIRE_EQUAL(b_ev.size(), 2u);
  BOOST_REQUIRE_EQUAL(e_ev.size(), 2u);
  BOOST_TEST(b_ev[0]["id"] == e_ev[0]["id"]);
  BOOST_TEST(b_ev[0]["id"] != b_ev[1]["id"]);
  BOOST_TEST(b_ev[0]["ts"].get<double>() == 1.5);  // read B: 2500 - 1000 ns
  BOOST_TEST(e_ev[0]["ts"].get<double>() == 2.5);
}

BOOST_AUTO_TEST_CASE(begin_end_pairs_by_stack_and_by_corr_and_closes_missing_ends) {
  TempDir dir;
  auto b = named_file();
  b.events({{1, Records()
                    .core(Kind::kStep, format::kBegin, 1000)
                    .ext(make_ext<format::StepExt>(Ext::kStep))
                    .core(Kind::kRange, format::kBegin, 1100, 0, 2)
                    .core(Kind::kRange, format::kEnd, 1200)
                    .core(Kind::kStep, format::kEnd, 1900)
                    .core(Kind::kApiCall, rec_flags(format::kBegin, format::kAsync), 1300, 0, 0, 42)
                    .core(Kind::kDataWait, format::kBegin, 2000)
                    .core(Kind::kSync, format::kEnd, 2100)  // no begin
                    .core(Kind::kMark, format::kInstant, 2500)},
            {2, Records().core(Kind::kApiCall, rec_flags(format::kEnd, format::kAsync), 1400, 0, 0,
                               42)}});
  b.end();
  b.write(dir.file("p.sst"));
  const auto x = export_files({dir.file("p.sst")});
  const auto step = x.with("X", "step 0");
  BOOST_REQUIRE_EQUAL(step.size(), 1u);
  BOOST_TEST(step[0]["dur"].get<double>() == 0.9);
  BOOST_TEST(x.with("X", "read").size() == 1u);  // the range named "read"
  const auto api = x.with("b", "api_call");
  BOOST_REQUIRE_EQUAL(api.size(), 1u);
  BOOST_TEST(x.with("e", "api_call")[0]["ts"].get<double>() == 0.4);
  const auto wait = x.with("X", "data_wait");
  BOOST_REQUIRE_EQUAL(wait.size(), 1u);
  BOOST_TEST(wait[0]["dur"].get<double>() == 0.5);  // closed at the track's last ts (2500)
  BOOST_TEST(x.warned("1 begin records without an end were closed"));
  BOOST_TEST(x.warned("1 end records without a begin were ignored"));
}

BOOST_AUTO_TEST_CASE(counters_instants_and_gaps_have_their_own_phases) {
  TempDir dir;
  auto b = named_file();
  b.strings({{4, "queue_depth"}, {5, "handed to nsys"}});
  b.events({{1, Records()
                    .core(Kind::kCounter, rec_flags(format::kInstant, format::kValueDouble), 1500,
                          std::bit_cast<uint64_t>(2.5), 4)
                    .core(Kind::kCounter, format::kInstant, 1600, 7, 4, 555)
                    .core(Kind::kMark, format::kInstant, 1700, 0, 5)
                    .core(Kind::kGap, format::kInstant, 1800, 17)}});
  b.end();
  b.write(dir.file("c.sst"));
  const auto x = export_files({dir.file("c.sst")});
  const auto c = x.with("C", "queue_depth");
  BOOST_REQUIRE_EQUAL(c.size(), 1u);
  BOOST_TEST(c[0]["args"]["value"].get<double>() == 2.5);
  BOOST_TEST(x.with("C", "queue_depth [555]")[0]["args"]["value"] == 7);
  const auto mark = x.with("i", "handed to nsys");
  BOOST_REQUIRE_EQUAL(mark.size(), 1u);
  BOOST_TEST(mark[0]["s"] == "t");
  const auto gap = x.with("i", "dropped 17 events");
  BOOST_REQUIRE_EQUAL(gap.size(), 1u);
  BOOST_TEST(gap[0]["args"]["dropped"] == 17);
}

BOOST_AUTO_TEST_CASE(names_are_escaped_and_invalid_utf8_replaced) {
  TempDir dir;
  TraceBuilder b;
  const std::string nasty = std::string("a\"b\\c\n\x01\x7f") + "\xff" + "\xc3\xa9" + "\xe2\x82";
  b.strings({{1, nasty}});
  b.events({{1, Records().core(Kind::kRange, 0, 1000, 5, 1)}}).end();
  b.write(dir.file("n.sst"));
  const auto x = export_files({dir.file("n.sst")});
  const auto r = x.with("X", "");
  BOOST_REQUIRE_EQUAL(r.size(), 1u);
  BOOST_TEST(r[0]["name"].get<std::string>() == std::string("a\"b\\c\n\x01\x7f") + "\xEF\xBF\xBD" +
                                                    "\xc3\xa9" + "\xEF\xBF\xBD\xEF\xBF\xBD");
}

BOOST_AUTO_TEST_CASE(from_to_and_step_windows_keep_only_overlapping_events) {
  TempDir dir;
  TraceBuilder b;
  Records recs;
  for (uint64_t i = 0; i < 5; ++i) {
    auto s = make_ext<format::StepExt>(Ext::kStep);
    s.index = i;
    recs.core(Kind::kStep, 0, 10000 + i * 1000, 900).ext(s);
    recs.core(Kind::kKernel, 0, 10100 + i * 1000, 100);
  }
  b.events({{1, recs}}).end();
  b.write(dir.file("w.sst"));
  reader::ChromeExportOptions opt;
  opt.from = reader::TimeBound{12000 - 1000, false};  // relative to the start (1000)
  opt.to = reader::TimeBound{13050, true};
  auto x = export_files({dir.file("w.sst")}, opt);
  BOOST_TEST(x.with("X", "kernel").size() == 1u);  // kernel 2 (12100); kernel 3 starts at 13100
  BOOST_TEST(x.with("X", "").size() == 3u);        // and steps 2 and 3; step 1 ended at 11900
  opt = {};
  opt.steps = {{1, 2}};
  x = export_files({dir.file("w.sst")}, opt);
  BOOST_TEST(x.res.from_ns == 11000);
  BOOST_TEST(x.res.to_ns == 12900);
  BOOST_TEST(x.with("X", "kernel").size() == 2u);
  opt.steps = {{40, 41}};
  x = export_files({dir.file("w.sst")}, opt);
  BOOST_TEST(!x.res.ok());
  BOOST_TEST(x.res.errors[0].find("no step events with an index in 40:41") != std::string::npos);
  BOOST_TEST(x.with("X", "").empty());
}

BOOST_AUTO_TEST_CASE(step_window_from_begin_end_records_uses_the_index_in_corr) {
  TempDir dir;
  TraceBuilder b;
  Records recs;
  for (uint64_t i = 0; i < 3;
       ++i) {  // as StepScope writes them: End carries the index in corr only
    auto s = make_ext<format::StepExt>(Ext::kStep);
    s.index = i;
    recs.core(Kind::kStep, format::kBegin, 10000 + i * 1000, 0, 0, i).ext(s);
    recs.core(Kind::kKernel, 0, 10100 + i * 1000, 100);
    if (i < 2) recs.core(Kind::kStep, format::kEnd, 10900 + i * 1000, 0, 0, i);
  }
  b.events({{1, recs}}).end();
  b.write(dir.file("s.sst"));
  reader::ChromeExportOptions opt;
  opt.steps = {{1, 1}};
  auto x = export_files({dir.file("s.sst")}, opt);
  BOOST_TEST(x.res.from_ns == 11000);
  BOOST_TEST(x.res.to_ns == 11900);
  BOOST_TEST(x.with("X", "kernel").size() == 1u);
  BOOST_TEST(x.with("X", "step 1").size() == 1u);
  opt.steps = {{1, 2}};  // step 2 never ends: the window stays open
  x = export_files({dir.file("s.sst")}, opt);
  BOOST_TEST(x.with("X", "kernel").size() == 2u);
  BOOST_TEST(x.warned("1 begin records without an end were closed"));
}

BOOST_AUTO_TEST_CASE(size_estimate_warns_above_the_browser_limit) {
  TempDir dir;
  TraceBuilder b;
  Records recs;
  for (int i = 0; i < 100; ++i) recs.core(Kind::kKernel, 0, 2000 + i * 10, 5);
  b.events({{1, recs}}).end();
  b.write(dir.file("big.sst"));
  reader::ChromeExportOptions opt;
  opt.size_warning_bytes = 1000;
  auto x = export_files({dir.file("big.sst")}, opt);
  BOOST_TEST(x.warned("more than a browser opens"));
  opt.from = reader::TimeBound{0, false};  // a window: no estimate, but the running count
  x = export_files({dir.file("big.sst")}, opt);
  BOOST_TEST(!x.warned("more than a browser opens"));
  BOOST_TEST(x.warned("the export passed"));
  BOOST_TEST(x.res.bytes > 1000u);
}

BOOST_AUTO_TEST_CASE(ring_segments_of_one_process_share_a_pid_and_pair_across_files) {
  TempDir dir;
  for (uint32_t seg = 0; seg < 2; ++seg) {
    auto b = named_file();
    b.header.flags |= format::kFileRingSegment;
    b.header.segment = seg;
    if (seg == 0) b.events({{1, Records().core(Kind::kDataWait, format::kBegin, 1500)}});
    if (seg == 1) b.events({{1, Records().core(Kind::kDataWait, format::kEnd, 2500)}});
    b.end();
    b.write(dir.file("x.seg" + std::to_string(seg) + ".sst"));
  }
  const auto x = export_files({dir.file("x.seg1.sst"), dir.file("x.seg0.sst")});
  BOOST_TEST(x.with("M", "process_name").size() == 1u);
  BOOST_TEST(x.with("M", "thread_name").size() == 2u);
  const auto wait = x.with("X", "data_wait");
  BOOST_REQUIRE_EQUAL(wait.size(), 1u);
  BOOST_TEST(wait[0]["dur"].get<double>() == 1.0);
  BOOST_TEST(x.res.warnings.empty());
}

BOOST_AUTO_TEST_CASE(unreadable_files_are_errors_and_the_rest_is_exported) {
  TempDir dir;
  TraceBuilder::write_bytes(dir.file("junk.sst"), {});
  auto b = named_file();
  b.events({{1, Records().core(Kind::kKernel, 0, 1000, 10)}}).end();
  b.write(dir.file("ok.sst"));
  const auto x = export_files({dir.file("junk.sst"), dir.file("ok.sst")});
  BOOST_TEST(!x.res.ok());
  BOOST_TEST(x.res.errors[0].find(dir.file("junk.sst") + ": empty file") == 0u);
  BOOST_TEST(x.with("X", "kernel").size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
