// Black-box: `stallscope export --chrome`: the JSON parses, holds the
// expected events, and flags and inputs are checked.
#include <filesystem>
#include <map>
#include <set>

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "cli/cli_run.hpp"

using namespace stallscope;
using namespace stallscope::testing;
using format::Ext;
using format::Kind;
using nlohmann::json;

namespace {

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

size_t count(const json& doc, const std::string& ph, const std::string& cat = "") {
  size_t n = 0;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == ph && (cat.empty() || e.value("cat", "") == cat)) ++n;
  return n;
}

// A trainer thread with two steps and, on a loader thread, three reads of
// which two overlap without nesting.
void write_trace(const std::string& path) {
  TraceBuilder b;
  b.metadata(R"({"host":"node1","rank":2})");
  b.strings({{1, "trainer"}, {2, "loader"}});
  b.tracks({thread_track(1, 100, 1), thread_track(2, 101, 2)});
  Records trainer;
  for (uint64_t i = 0; i < 2; ++i) {
    auto s = make_ext<format::StepExt>(Ext::kStep);
    s.index = i;
    trainer.core(Kind::kStep, 0, 10000 + i * 10000, 9000).ext(s);
  }
  b.events({{1, trainer},
            {2, Records()
                    .core(Kind::kStorageRead, 0, 11000, 3000)
                    .core(Kind::kStorageRead, 0, 12000, 3000)
                    .core(Kind::kStorageRead, 0, 21000, 500)}});
  b.end();
  b.write(path);
}

json load(const std::string& path) {
  std::ifstream f(path);
  return json::parse(f);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_export)

BOOST_AUTO_TEST_CASE(chrome_export_parses_and_holds_slices_async_reads_and_names) {
  TempDir dir;
  write_trace(dir.file("a.sst"));
  const auto r = run_cli(dir, {"export", "--chrome", dir.file("out.json"), dir.file("a.sst")});
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(has(r.err, "to " + dir.file("out.json")), r.err);
  BOOST_TEST(!std::filesystem::exists(dir.file("out.json.tmp")));
  const json doc = load(dir.file("out.json"));
  BOOST_TEST(count(doc, "X", "step") == 2u);
  BOOST_TEST(count(doc, "X", "storage_read") == 2u);
  BOOST_TEST(count(doc, "b", "storage_read") == 1u);
  BOOST_TEST(count(doc, "e", "storage_read") == 1u);
  bool process_named = false, thread_named = false;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "M") continue;
    process_named |= e["name"] == "process_name" && e["args"]["name"] == "node1 rank 2 (pid 4242)";
    thread_named |= e["name"] == "thread_name" && e["args"]["name"] == "loader (tid 101)";
  }
  BOOST_TEST(process_named);
  BOOST_TEST(thread_named);
}

BOOST_AUTO_TEST_CASE(step_window_and_stdout_output) {
  TempDir dir;
  write_trace(dir.file("a.sst"));
  const auto r = run_cli(dir, {"export", "--chrome", "-", "--steps", "1:1", dir.file("a.sst")});
  BOOST_TEST(r.exit_code == 0, r.err);
  const json doc = json::parse(r.out);
  BOOST_TEST(count(doc, "X", "step") == 1u);
  BOOST_TEST(count(doc, "X", "storage_read") == 1u);  // the read at 21000
  BOOST_TEST(count(doc, "b") == 0u);
}

// The attribution process of rank 2: its pid, or 0 when absent.
uint64_t attribution_pid(const json& doc) {
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"] == "attribution rank 2")
      return e["pid"].get<uint64_t>();
  return 0;
}

BOOST_AUTO_TEST_CASE(attribution_track_lays_each_steps_parts_end_to_end) {
  TempDir dir;
  write_trace(dir.file("a.sst"));
  auto r = run_cli(dir, {"export", "--chrome", dir.file("out.json"), dir.file("a.sst")});
  BOOST_TEST(r.exit_code == 0, r.err);
  json doc = load(dir.file("out.json"));
  const uint64_t pid = attribution_pid(doc);
  BOOST_REQUIRE(pid != 0);
  std::map<uint64_t, double> step_ts, step_dur;  // of the recorded steps, µs
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "X" && e["cat"] == "step") {
      step_ts[e["args"]["step"].get<uint64_t>()] = e["ts"].get<double>();
      step_dur[e["args"]["step"].get<uint64_t>()] = e["dur"].get<double>();
    }
  BOOST_REQUIRE_EQUAL(step_ts.size(), 2u);
  std::map<uint64_t, double> end;  // where the next part of each step starts
  std::set<uint64_t> tids, named_tids;
  for (const auto& [i, ts] : step_ts) end[i] = ts;
  size_t slices = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["pid"] != pid) continue;
    if (e["ph"] == "M" && e["name"] == "thread_name") named_tids.insert(e["tid"].get<uint64_t>());
    if (e["ph"] != "X") continue;
    ++slices;
    BOOST_TEST(e["cat"] == "attribution");
    BOOST_TEST(e["dur"].get<double>() > 0);
    const uint64_t step = e["args"]["step"].get<uint64_t>();
    BOOST_REQUIRE(end.count(step));
    BOOST_TEST(e["ts"].get<double>() == end[step], boost::test_tools::tolerance(1e-9));
    end[step] += e["dur"].get<double>();
    tids.insert(e["tid"].get<uint64_t>());
  }
  BOOST_TEST(slices >= 2u);
  BOOST_TEST(tids == named_tids, "one named thread per part");
  for (const auto& [i, ts] : step_ts)  // the parts sum to the step: 9 µs each
    BOOST_TEST(end[i] - ts == step_dur[i], boost::test_tools::tolerance(1e-9));
  BOOST_TEST(step_dur[0] == 9.0);

  r = run_cli(dir, {"export", "--chrome", dir.file("out.json"), "--no-attribution", dir.file("a.sst")});
  BOOST_TEST(r.exit_code == 0, r.err);
  doc = load(dir.file("out.json"));
  BOOST_TEST(attribution_pid(doc) == 0u);
  BOOST_TEST(count(doc, "X", "attribution") == 0u);
  BOOST_TEST(count(doc, "X", "step") == 2u);
}

BOOST_AUTO_TEST_CASE(bad_flags_exit_2_naming_the_flag) {
  TempDir dir;
  write_trace(dir.file("a.sst"));
  const std::string out = dir.file("o.json");
  struct Case {
    std::vector<std::string> args;
    std::string text;
  };
  const Case cases[] = {
      {{"export", "--chrome", out, "--from", "soon", dir.file("a.sst")},
       "--from: 'soon' is not a time"},
      {{"export", "--chrome", out, "--to", "-3", dir.file("a.sst")}, "--to: '-3' is not a time"},
      {{"export", "--chrome", out, "--steps", "9:2", dir.file("a.sst")},
       "--steps: '9:2' is not a step range"},
      {{"export", dir.file("a.sst")}, "--chrome is required"},
      {{"export", "--chrome", out, "--frm", "1", dir.file("a.sst")}, "--frm"},
  };
  for (const auto& c : cases) {
    const auto r = run_cli(dir, c.args);
    BOOST_TEST(r.exit_code == 2, c.text);
    BOOST_TEST(has(r.err, c.text), r.err);
  }
  BOOST_TEST(!std::filesystem::exists(out));
}

// Past a file-size limit (ulimit -f) the write fails with EFBIG instead of
// SIGXFSZ killing stallscope: exit 1 naming the file, nothing half-written.
BOOST_AUTO_TEST_CASE(a_file_size_limit_fails_the_write_clearly) {
  TempDir dir;
  write_trace(dir.file("a.sst"));
  const auto full = run_cli(dir, {"export", "--chrome", dir.file("full.json"), dir.file("a.sst")});
  BOOST_TEST_REQUIRE(full.exit_code == 0, full.err);
  BOOST_TEST_REQUIRE(std::filesystem::file_size(dir.file("full.json")) > 1024u);
  // dash counts -f in 512-byte blocks, bash in KiB: either is below the output.
  const auto r = run_cli(dir, {"export", "--chrome", dir.file("out.json"), dir.file("a.sst")},
                         "ulimit -f 1");
  BOOST_TEST(r.exit_code == 1, "exit " << r.exit_code << " (153: killed by SIGXFSZ) " << r.err);
  BOOST_TEST(has(r.err, "cannot write " + dir.file("out.json")), r.err);
  BOOST_TEST(!std::filesystem::exists(dir.file("out.json")));
  BOOST_TEST(!std::filesystem::exists(dir.file("out.json.tmp")));
}

BOOST_AUTO_TEST_CASE(missing_or_unreadable_input_exits_1_naming_the_file) {
  TempDir dir;
  const std::string out = dir.file("o.json");
  auto r = run_cli(dir, {"export", "--chrome", out, dir.file("absent.sst")});
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(has(r.err, dir.file("absent.sst") + ": no such file or directory"), r.err);
  BOOST_TEST(!std::filesystem::exists(out));
  TraceBuilder::write_bytes(dir.file("empty.sst"), {});
  write_trace(dir.file("a.sst"));
  r = run_cli(dir, {"export", "--chrome", out, dir.file("empty.sst"), dir.file("a.sst")});
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(has(r.err, "error: " + dir.file("empty.sst") + ": empty file"), r.err);
  BOOST_TEST(count(load(out), "X", "step") == 2u);  // the readable file is still exported
  r = run_cli(dir, {"export", "--chrome", dir.file("no/such/dir/o.json"), dir.file("a.sst")});
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(has(r.err, "cannot write " + dir.file("no/such/dir/o.json")), r.err);
}

BOOST_AUTO_TEST_SUITE_END()
