// The importer's streaming walk (kineto_stream.cpp), white-box: a trace read
// through windows of any size, from 16 bytes up, gives the same events as
// through the default one (batches cut anywhere, the window compacted and
// grown mid-string, mid-number, mid-key); an event larger than the largest
// window is skipped and counted; gzip members are read however they fall.
#include <boost/test/unit_test.hpp>

#include "kineto/kineto_internal.hpp"
#include "kineto/kineto_writer.hpp"

namespace kin = stallscope::analyzer::kineto;
using stallscope::testing::KinetoWriter;

namespace {

kin::ImportedRank walk(const std::string& json, kin::Window w) {
  kin::ImportedRank out;
  out.file = "w.json";
  kin::Mapper m(out);
  const auto src = kin::memory_source(json);
  kin::parse_trace(*src, out.file, m, out, w);
  m.finish();
  return out;
}

KinetoWriter sample() {
  KinetoWriter w(KinetoWriter::kCurrent);
  w.rank = 3;
  w.world = 8;
  w.base_ns = 1'700'000'000'123'456'789;
  for (int i = 0; i < 30; ++i) {
    const double t = i * 10.0;
    w.step(i + 1, t, t + 10).dataloader(t, t + 2).runtime(t + 2, t + 2.5, "cudaLaunchKernel");
    w.kernel(t + 3, t + 8, R"(void k<\"q\\>(float*))").nccl(t + 8, t + 9, 1024, "Float", 8);
    w.memcpy(t + 9, t + 9.5, "Memcpy HtoD (Pageable -> Device)", 4096);
    w.annotation("fetch \xC3\xA9t\xC3\xA9", t + 1, t + 1.5);  // UTF-8 split by any window
  }
  return w;
}

void same(const kin::ImportedRank& a, const kin::ImportedRank& b) {
  BOOST_TEST(a.stats.events == b.stats.events);
  BOOST_TEST(a.stats.kept == b.stats.kept);
  BOOST_TEST(a.stats.steps == b.stats.steps);
  BOOST_TEST(a.stats.collectives == b.stats.collectives);
  BOOST_TEST(a.stats.skipped == b.stats.skipped);
  BOOST_TEST(a.rank == b.rank);
  BOOST_TEST(a.world_size == b.world_size);
  BOOST_TEST(a.base_time_ns == b.base_time_ns);
  BOOST_TEST(a.json_bytes == b.json_bytes);
  BOOST_TEST(a.trace.names == b.trace.names, boost::test_tools::per_element());
  BOOST_REQUIRE(a.trace.events.size() == b.trace.events.size());
  for (size_t i = 0; i < a.trace.events.size(); ++i) {
    const auto &x = a.trace.events[i], &y = b.trace.events[i];
    BOOST_TEST_CONTEXT("event " << i) {
      BOOST_TEST(int(x.kind) == int(y.kind));
      BOOST_TEST(x.start == y.start);
      BOOST_TEST(x.end == y.end);
      BOOST_TEST(x.track == y.track);
      BOOST_TEST(x.name == y.name);
      BOOST_TEST(x.corr == y.corr);
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(kineto_stream)

BOOST_AUTO_TEST_CASE(any_window_size_gives_the_same_events) {
  const std::string json = "\xEF\xBB\xBF" + sample().json();
  const auto ref = walk(json, {});
  BOOST_TEST(ref.stats.steps == 30u);
  BOOST_TEST(ref.rank == 3);
  BOOST_TEST(ref.base_time_ns == 1'700'000'000'123'456'789);
  BOOST_TEST(ref.json_bytes == json.size());
  for (size_t first : {16, 17, 31, 64, 100, 257, 1000, 4096}) {
    BOOST_TEST_CONTEXT("window " << first) {
      const auto r = walk(json, {first, 1u << 20});
      same(r, ref);
      BOOST_TEST(r.warnings == ref.warnings, boost::test_tools::per_element());
    }
  }
}

BOOST_AUTO_TEST_CASE(an_event_past_the_largest_window_is_skipped_and_counted) {
  KinetoWriter w = sample();
  const std::string big(5000, 'x');
  w.raw(R"({"ph": "X", "cat": "kernel", "name": ")" + big +
        R"(", "pid": 0, "tid": 7, "ts": 1.0, "dur": 2.0, "args": {"a": [1, [2, {"b": "]}"}]]}})");
  w.raw(
      R"({"ph": "X", "cat": "kernel", "name": "after", "pid": 0, "tid": 7, "ts": 5.0, "dur": 1.0})");
  const std::string json = w.json();
  const auto all = walk(json, {});
  const auto r = walk(json, {64, 1024});
  BOOST_TEST(r.stats.skipped == 1u);
  BOOST_TEST(r.stats.events == all.stats.events);
  BOOST_TEST(r.stats.kept == all.stats.kept - 1);
  const std::string at =
      "byte " + std::to_string(json.find("{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"xxx"));
  BOOST_TEST(r.stats.first_skip.find("more than 1024 bytes") != std::string::npos,
             r.stats.first_skip);
  BOOST_TEST(r.stats.first_skip.find(at) != std::string::npos, r.stats.first_skip << " vs " << at);
  // A value the importer reads (not an event) past the bound is an error.
  KinetoWriter d(KinetoWriter::kCurrent);
  d.rank = 1;
  std::string dj = d.json();
  dj.insert(dj.find("\"rank\""), "\"pad\": \"" + big + "\", ");
  std::string e;
  try {
    walk(dj, {64, 1024});
  } catch (const kin::ImportError& x) {
    e = x.what();
  }
  BOOST_TEST(e.find("w.json: malformed JSON at byte") != std::string::npos, e);
  BOOST_TEST(e.find("more than 1024 bytes") != std::string::npos, e);
}

// The scanner keeps a bit per open bracket: nesting far past simdjson's
// 1,024 levels, in an event's args or a top-level value, is scanned.
BOOST_AUTO_TEST_CASE(nesting_deeper_than_simdjson_goes_is_scanned_not_refused) {
  KinetoWriter w = sample();
  std::string deep;
  for (int i = 0; i < 5000; ++i) deep += "{\"a\":";
  deep += "1" + std::string(5000, '}');
  w.raw(R"({"ph": "X", "cat": "cpu_op", "name": "deep", "pid": 4242, "tid": 4242, "ts": 1.0, )"
        R"("dur": 2.0, "args": )" +
        deep + "}");
  std::string json = w.json();
  json.insert(json.rfind('}'), ", \"x\": " + std::string(5000, '[') + std::string(5000, ']'));
  const auto ref = walk(json, {});
  BOOST_TEST(ref.stats.events == walk(sample().json(), {}).stats.events + 1);
  BOOST_TEST(ref.stats.skipped == 0u);
  same(walk(json, {64, 1u << 20}), ref);
}

// A batch with invalid UTF-8 is parsed from a repaired copy, 2 bytes
// longer for each U+FFFD: offsets after them still count the file's bytes.
BOOST_AUTO_TEST_CASE(offsets_after_a_replaced_byte_are_the_files) {
  KinetoWriter w = sample();
  w.annotation("a\xFF\xFE\xC3", 1, 2).annotation("b\xE2\x82", 2, 3);
  w.raw(R"({"ph": "X", "cat": "kernel", "name": "no_dur", "pid": 0, "tid": 7, "ts": 5.0})");
  const std::string json = w.json();
  const size_t skipped = json.find(R"({"ph": "X", "cat": "kernel", "name": "no_dur")");
  for (size_t first : {size_t{64}, size_t{4096}, size_t{1} << 22}) {
    BOOST_TEST_CONTEXT("window " << first) {
      const auto r = walk(json, {first, 1u << 20});
      BOOST_TEST(r.stats.first_skip.find("byte " + std::to_string(skipped)) != std::string::npos,
                 r.stats.first_skip << " vs " << skipped);
      BOOST_REQUIRE(!r.warnings.empty());
      BOOST_TEST(r.warnings[0].find("5 byte(s) of invalid UTF-8") != std::string::npos,
                 r.warnings[0]);
      BOOST_TEST(r.warnings[0].find("at byte " + std::to_string(json.find("a\xFF") + 1)) !=
                     std::string::npos,
                 r.warnings[0]);
    }
  }
  KinetoWriter bad = sample();
  bad.annotation("a\xFF\xFF\xFF", 1, 2);
  bad.raw(R"({"ph": "X", "cat": "kernel", "name": "x", "pid": 0, "tid": 7, "ts": true, "dur": 1})");
  const std::string text = bad.json();
  std::string e;
  try {
    walk(text, {});
  } catch (const kin::ImportError& x) {
    e = x.what();
  }
  const size_t at = text.rfind("\"ts\": true") + 6;
  BOOST_TEST(e.find("at byte " + std::to_string(at) + ":") != std::string::npos, e << " vs " << at);
}

BOOST_AUTO_TEST_CASE(gzip_members_are_read_wherever_they_end) {
  const std::string json = sample().json();
  const auto dir = stallscope::testing::test_dir("stream_members");
  const auto path = dir / "members.json.gz";
  std::remove(path.c_str());
  for (size_t at = 0, n = 0; at < json.size(); at += n) {
    n = std::min<size_t>(json.size() - at, 777 + at % 5000);
    gzFile g = gzopen(path.c_str(), "ab");  // one member per append
    gzwrite(g, json.data() + at, static_cast<unsigned>(n));
    gzclose(g);
  }
  const auto r = kin::import_file(path.string());
  same(r, walk(json, {}));
}

BOOST_AUTO_TEST_SUITE_END()
