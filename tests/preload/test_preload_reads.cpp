// Storage reads through every wrapped libc entry point (RELIABILITY.md 11):
// the list is symbols.txt (generated from nm -D of libc), each symbol must
// resolve to the shim, and a probe built plain, with _FILE_OFFSET_BITS=64
// and with _FORTIFY_SOURCE=3 sees each call exactly once with its size and
// offset (above 4 GiB) in the trace.
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "preload/preload_run.hpp"

using namespace stallscope;
using namespace stallscope::test;

namespace {

constexpr long long kGiB = 1024LL * 1024 * 1024;
constexpr long long kText = 4 * kGiB + 64 * 1024 * 1024;

// A sparse file past 4 GiB with text lines (100 + k bytes each) at kText.
std::string make_data(const TempDir& dir) {
  const std::string path = dir / "data.bin";
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  BOOST_REQUIRE(fd >= 0);
  std::string text;
  for (int k = 0; k < 64; ++k) text += std::string(99 + k, 'a' + k % 26) + "\n";
  BOOST_REQUIRE_EQUAL(::pwrite(fd, text.data(), text.size(), kText), ssize_t(text.size()));
  BOOST_REQUIRE_EQUAL(::ftruncate(fd, kText + (4 << 20)), 0);
  ::close(fd);
  return path;
}

using Pair = std::pair<long long, long long>;  // bytes, offset

std::string show(const std::vector<Pair>& v) {
  std::string s;
  for (const Pair& p : v) s += std::to_string(p.first) + "@" + std::to_string(p.second) + " ";
  return s;
}

std::vector<Pair> expected_of(const std::string& out) {
  std::vector<Pair> v;
  std::istringstream in(out);
  std::string word;
  while (in >> word) {
    if (word != "EXPECT") continue;
    Pair p;
    in >> p.first >> p.second;
    v.push_back(p);
  }
  std::sort(v.begin(), v.end());
  return v;
}

// `classify_every` "1": every read classified (the shim's slow path);
// "64" (the default): most reads take the inline path, unclassified.
void check_probe(const std::string& binary, const std::string& classify_every = "1") {
  TempDir dir;
  const std::string data = make_data(dir);
  const RunResult r = run({helper(binary), data},
                          {{"STALLSCOPE_OUT", dir / "run"},
                           {"STALLSCOPE_PRELOAD_CLASSIFY_EVERY", classify_every}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const auto expected = expected_of(r.out);
  BOOST_TEST(expected.size() >= 45u);
  const RunTrace t = load_run(dir / "run");
  std::vector<Pair> seen;
  size_t unclassified = 0;
  for (const Ev& e : t.of_kind(format::Kind::kStorageRead)) {
    if (e.name != data) continue;
    seen.emplace_back(static_cast<long long>(e.io.bytes), static_cast<long long>(e.io.offset));
    BOOST_TEST(e.io.tier == uint8_t(format::Tier::kLocal));  // ext4 here
    if (classify_every == "1") {
      // Every read classified (N = 1): cachestat as root on a recent kernel.
      BOOST_TEST(e.io.cache_method != uint8_t(format::CacheMethod::kNone));
      BOOST_TEST(e.io.cache != uint8_t(format::Cache::kUnknown));
    } else if (e.io.cache_method == uint8_t(format::CacheMethod::kNone)) {
      BOOST_TEST(e.io.cache == uint8_t(format::Cache::kUnknown));
      BOOST_TEST(e.io.hit_bytes == 0u);
      ++unclassified;
    }
    BOOST_TEST(e.dur_ns > 0);  // both timestamps taken
  }
  if (classify_every != "1") BOOST_TEST(unclassified * 2 >= seen.size());
  std::sort(seen.begin(), seen.end());
  // Exactly once each: no call missing, none counted twice.
  BOOST_TEST((seen == expected), "trace: " << show(seen) << "\nprobe: " << show(expected));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(preload_reads)

BOOST_AUTO_TEST_CASE(every_listed_symbol_resolves_to_the_shim) {
  const std::string list = std::string(STALLSCOPE_SOURCE_DIR) + "/integrations/preload/symbols.txt";
  const RunResult r = run({helper("probe_reads"), "--symbols", list}, {{"STALLSCOPE_ENABLE", "0"}});
  BOOST_TEST(r.exit_code == 0, r.out << r.err);
  BOOST_TEST(r.value("SYMBOLS") >= 50);
  BOOST_TEST(r.value("UNWRAPPED") == 0);
}

BOOST_AUTO_TEST_CASE(symbols_list_matches_this_libc) {
  // A libc upgrade that adds an entry point fails here until the list is
  // regenerated (and the new symbol wrapped).
  const std::string src = STALLSCOPE_SOURCE_DIR;
  const RunResult r = run({"/bin/sh", "-c", src + "/integrations/preload/gen_symbols.sh | grep -v '^#' | "
                           "diff - <(grep -v '^#' " + src + "/integrations/preload/symbols.txt)"},
                          {}, false);
  // /bin/sh may lack process substitution: fall back to bash.
  const RunResult b = r.exit_code == 0 ? r : run({"/bin/bash", "-c", src + "/integrations/preload/gen_symbols.sh | grep -v '^#' | "
                           "diff - <(grep -v '^#' " + src + "/integrations/preload/symbols.txt)"}, {}, false);
  BOOST_TEST(b.exit_code == 0, b.out << b.err);
}

BOOST_AUTO_TEST_CASE(plain_build_sees_each_call_once) { check_probe("probe_reads"); }
BOOST_AUTO_TEST_CASE(offset_bits_64_build_sees_each_call_once) { check_probe("probe_reads_fob64"); }
BOOST_AUTO_TEST_CASE(fortify_build_sees_each_call_once) { check_probe("probe_reads_fortify"); }
BOOST_AUTO_TEST_CASE(unclassified_reads_are_each_recorded_once_and_keep_errno) {
  check_probe("probe_reads", "64");
}

// Regression: ' 5' and '+8' were accepted (every other STALLSCOPE_* variable
// refuses them) and a bad value was "a bad numeric value of a
// STALLSCOPE_PRELOAD_* variable". Now parsed through the configuration
// table, as the recorder parses its variables, and named with the value,
// the problem, the variable's own range and unit, and its default.
BOOST_AUTO_TEST_CASE(shim_numbers_are_parsed_as_strictly_as_the_recorders_and_named) {
  TempDir dir;
  const std::string data = dir / "data";
  { std::ofstream(data) << std::string(4096, 'x'); }
  const std::string every = "(expected 1..1048576 reads); using the default 256";
  const std::string wait = "(expected 0..1000000 µs); using the default 20";
  const std::vector<std::tuple<std::string, std::string, std::string>> bad = {
      {"STALLSCOPE_PRELOAD_CLASSIFY_EVERY", " 5", "not a number " + every},
      {"STALLSCOPE_PRELOAD_CLASSIFY_EVERY", "+8", "not a number " + every},
      {"STALLSCOPE_PRELOAD_CLASSIFY_EVERY", "0", "out of range " + every},
      {"STALLSCOPE_PRELOAD_WAIT_MIN_US", "+8", "not a number " + wait},
      {"STALLSCOPE_PRELOAD_WAIT_MIN_US", "20us", "not a number " + wait},
      {"STALLSCOPE_PRELOAD_WAIT_MIN_US", "-1", "out of range " + wait}};
  for (const auto& [var, value, what] : bad) {
    BOOST_TEST_CONTEXT(var << "='" << value << "'") {
      const RunResult r = run({helper("lifecycle"), "read", data, "100"},
                              {{"STALLSCOPE_OUT", dir / "run"}, {var, value}}, true, 20);
      BOOST_TEST(r.exit_code == 0, r.err);
      BOOST_TEST(r.err.find("stallscope: " + var + "='" + value + "': " + what) !=
                     std::string::npos,
                 r.err);
    }
  }
  const RunResult good = run({helper("lifecycle"), "read", data, "100"},
                             {{"STALLSCOPE_OUT", dir / "run"},
                              {"STALLSCOPE_PRELOAD_CLASSIFY_EVERY", "8"},
                              {"STALLSCOPE_PRELOAD_WAIT_MIN_US", "0"}},
                             true, 20);
  BOOST_TEST(good.exit_code == 0, good.err);
  BOOST_TEST(good.err.find("using the default") == std::string::npos, good.err);
}

BOOST_AUTO_TEST_SUITE_END()
