// Direct reads (integrations/preload/src/direct_read.hpp): the shim makes
// the read and pread system calls of local files itself, unless another
// interposer follows it or STALLSCOPE_PRELOAD_DIRECT=off; the program sees
// the same results and errors as from libc, and a thread reading in a loop
// can still be cancelled.
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "skip_visibly.hpp"
#include "preload/preload_run.hpp"

using namespace stallscope;
using namespace stallscope::test;

namespace {

std::string make_file(const TempDir& dir) {
  const std::string path = dir / "data";
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  const std::string data(64 << 10, 'd');
  BOOST_REQUIRE(fd >= 0 && ::write(fd, data.data(), data.size()) == ssize_t(data.size()));
  ::close(fd);
  return path;
}

// The word after `key` on its output line, or "" when absent.
std::string word(const RunResult& r, const std::string& key) {
  const size_t at = r.out.find(key + " ");
  if (at == std::string::npos) return "";
  const size_t from = at + key.size() + 1;
  return r.out.substr(from, r.out.find('\n', from) - from);
}

struct Where {
  std::string pread_by, read_by, counted, err;
  uint8_t tier = 0;  // of the traced pread; 0 when untraced
};

// direct_reads `where` with LD_PRELOAD set to `preload` ("" for none).
Where where(const std::string& preload, std::map<std::string, std::string> env = {}) {
  TempDir dir;
  const std::string data = make_file(dir);
  env.emplace("STALLSCOPE_OUT", dir / "run");
  if (!preload.empty()) env.emplace("LD_PRELOAD", preload);
  const RunResult r = run({helper("direct_reads"), "where", data}, env, false);
  Where w;
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
  w.pread_by = word(r, "pread_by");
  w.read_by = word(r, "read_by");
  w.counted = word(r, "pread_counted");
  w.err = r.err;
  if (!preload.empty()) {
    const RunTrace t = load_run(dir / "run");
    int reads = 0;
    for (const Ev& e : t.of_kind(format::Kind::kStorageRead)) {
      if (e.name != data) continue;
      ++reads;
      if (e.io.offset == 8192) {
        BOOST_TEST(e.io.bytes == 4096u);
        w.tier = e.io.tier;
      }
    }
    BOOST_TEST(reads == 2);  // the pread and the read, each once
  }
  return w;
}

// The `where` check traps the program's read and pread with seccomp to see
// which library made them; where it cannot (not x86-64, seccomp refused) the
// helper exits 77 and the cases that use it are skipped, visibly.
boost::test_tools::assertion_result can_trap_reads(boost::unit_test::test_unit_id) {
  static const RunResult probe = [] {
    TempDir dir;
    return run({helper("direct_reads"), "where", make_file(dir)}, {}, false);
  }();
  boost::test_tools::assertion_result r(probe.exit_code != 77);
  r.message() << "direct_reads where: " << probe.out;
  return r;
}

bool local_tier(uint8_t tier) {
  return tier == uint8_t(format::Tier::kLocal) || tier == uint8_t(format::Tier::kMemory);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(preload_direct)

// Calibration: the probe sees libc make the calls when nothing is preloaded.
BOOST_AUTO_TEST_CASE(without_the_shim_libc_makes_the_calls,
                     *stallscope::test::skip_unless(can_trap_reads)) {
  const Where w = where("");
  BOOST_TEST(w.pread_by == "libc.so.6");
  BOOST_TEST(w.read_by == "libc.so.6");
}

BOOST_AUTO_TEST_CASE(the_shim_makes_local_reads_itself,
                     *stallscope::test::skip_unless(can_trap_reads)) {
  const Where w = where(shim());
  BOOST_TEST_REQUIRE(w.tier != 0, "the pread was not traced");
  // /tmp is a local or memory filesystem on every machine the tests run on;
  // elsewhere libc keeps the call.
  const std::string expect = local_tier(w.tier) ? "libstallscope_preload.so" : "libc.so.6";
  BOOST_TEST(w.pread_by == expect);
  BOOST_TEST(w.read_by == expect);
}

BOOST_AUTO_TEST_CASE(the_off_switch_leaves_the_calls_to_libc,
                     *stallscope::test::skip_unless(can_trap_reads)) {
  const Where w = where(shim(), {{"STALLSCOPE_PRELOAD_DIRECT", "off"}});
  BOOST_TEST(w.tier != 0);
  BOOST_TEST(w.pread_by == "libc.so.6");
  BOOST_TEST(w.read_by == "libc.so.6");
}

BOOST_AUTO_TEST_CASE(a_bad_switch_value_is_named_and_the_default_kept,
                     *stallscope::test::skip_unless(can_trap_reads)) {
  const Where w = where(shim(), {{"STALLSCOPE_PRELOAD_DIRECT", "maybe"}});
  BOOST_TEST(w.err.find("STALLSCOPE_PRELOAD_DIRECT='maybe': not on or off (expected on, off, 1, 0, "
                        "true, false); using the default on") != std::string::npos,
             w.err);
  BOOST_TEST(w.pread_by == where(shim()).pread_by);  // as with the default
}

BOOST_AUTO_TEST_CASE(an_interposer_after_the_shim_still_gets_every_pread,
                     *stallscope::test::skip_unless(can_trap_reads)) {
  const Where w = where(shim() + ":" + helper("libpread_counter.so"));
  BOOST_TEST(w.tier != 0);
  BOOST_TEST(w.pread_by == "libc.so.6");
  BOOST_TEST(w.counted == "1");
}

BOOST_AUTO_TEST_CASE(errors_come_back_as_from_libc) {
  TempDir dir;
  const std::string data = make_file(dir);
  // Calibration: the expectations hold for libc itself.
  const RunResult plain = run({helper("direct_reads"), "errors", data}, {}, false);
  BOOST_TEST_REQUIRE(plain.exit_code == 0, plain.out << plain.err);
  const RunResult r =
      run({helper("direct_reads"), "errors", data}, {{"STALLSCOPE_OUT", dir / "run"}});
  BOOST_TEST(r.exit_code == 0, r.out << r.err);
  BOOST_TEST(r.out.find("errors_ok") != std::string::npos);
  // The failed reads are recorded as reads of the file too, the good ones
  // with their bytes.
  const RunTrace t = load_run(dir / "run");
  int reads = 0;
  for (const Ev& e : t.of_kind(format::Kind::kStorageRead)) reads += e.name == data;
  BOOST_TEST(reads >= 2);
}

BOOST_AUTO_TEST_CASE(a_thread_reading_in_a_loop_can_be_cancelled) {
  TempDir dir;
  const std::string data = make_file(dir);
  const RunResult r =
      run({helper("direct_reads"), "cancel", data}, {{"STALLSCOPE_OUT", dir / "run"}}, true, 60);
  BOOST_TEST(r.term_signal == 0, "killed by signal " << r.term_signal << " (SIGALRM: it hung)");
  BOOST_TEST(r.exit_code == 0, r.out << r.err);
  BOOST_TEST(r.value("cancelled_after") >= 20000);
}

BOOST_AUTO_TEST_SUITE_END()
