// Native stacks under plain LD_PRELOAD: a C program spinning in burn_cpu()
// (tests/preload/native_burn.c), built with and without frame pointers, is
// sampled with STALLSCOPE_PRELOAD_NATIVE_STACKS_HZ; its samples must name
// burn_cpu as the innermost frame (and its callers, with frame pointers).
// Where perf_event_open is refused (a seccomp filter in the child, as
// perf_event_paranoid 3 or a container's profile refuse it), one mark must
// say why and the report must carry it as a warning. The sampling cases
// come last and skip (exit 77, after the others ran) only where this
// machine refuses perf events to the test.
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "preload/preload_run.hpp"

using namespace stallscope;
using namespace stallscope::test;

namespace {

constexpr const char* kHz = "STALLSCOPE_PRELOAD_NATIVE_STACKS_HZ";

std::map<std::string, std::string> env_for(const std::string& out, const char* hz) {
  std::map<std::string, std::string> env{{"STALLSCOPE_OUT", out}};
  if (hz != nullptr) env.emplace(kHz, hz);
  return env;
}

void skip_unless_perf_allowed() {
  perf_event_attr a{};
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_TASK_CLOCK;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  const long fd = ::syscall(SYS_perf_event_open, &a, ::getpid(), 0, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) {
    std::cout << "SKIP: perf_event_open(PERF_COUNT_SW_TASK_CLOCK) refused here ("
              << strerrorname_np(errno) << "; perf_event_paranoid or seccomp): native stack "
              << "sampling cannot be tested on this machine\n";
    std::exit(77);
  }
  ::close(static_cast<int>(fd));
}

std::vector<Ev> samples_of(const RunTrace& t) { return t.of_kind(format::Kind::kStackSample); }

std::vector<std::string> marks_of(const RunTrace& t) {
  std::vector<std::string> m;
  for (const Ev& e : t.of_kind(format::Kind::kMark)) m.push_back(e.name);
  return m;
}

// The samples of the burn program's main thread, checked field by field.
std::vector<Ev> burn_samples(const std::string& program, const std::string& dir) {
  const RunResult r = run({helper(program), "400"}, env_for(dir, "200"));
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  BOOST_REQUIRE(r.out.find("result ") != std::string::npos);
  const RunTrace t = load_run(dir);
  BOOST_REQUIRE_EQUAL(t.files.size(), 1u);
  std::vector<Ev> main_thread;
  for (const Ev& e : samples_of(t)) {
    BOOST_TEST((e.stack.flags & format::kStackNative) != 0);
    BOOST_TEST(e.stack.interval_ns == 5000000u);
    BOOST_TEST(e.stack.on_cpu == static_cast<uint8_t>(format::OnCpu::kRunning));
    BOOST_TEST(e.stack.tid == e.tid);
    BOOST_TEST(!e.frames.empty());
    BOOST_TEST(e.frames.size() <= 32u);
    BOOST_TEST(e.name == e.frames.front());
    if (e.tid == e.pid) main_thread.push_back(e);
  }
  for (const std::string& m : marks_of(t)) BOOST_TEST(m.rfind("native stacks:", 0) != 0, m);
  return main_thread;
}

size_t with_leaf(const std::vector<Ev>& samples, const std::string& leaf) {
  return static_cast<size_t>(std::count_if(samples.begin(), samples.end(),
                                           [&](const Ev& e) { return e.frames[0] == leaf; }));
}

void show(const char* what, const std::vector<Ev>& samples) {
  std::map<std::string, int> stacks;
  for (const Ev& e : samples) {
    std::string s;
    for (const std::string& f : e.frames) s += (s.empty() ? "" : " < ") + f;
    ++stacks[s];
  }
  std::cout << what << ": " << samples.size() << " samples\n";
  for (const auto& [s, n] : stacks) std::cout << "  " << n << " x " << s << "\n";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(preload_native_stacks)

BOOST_AUTO_TEST_CASE(off_by_default_no_samples_and_no_mark) {
  TempDir dir;
  const RunResult r = run({helper("native_burn_fp"), "50"}, env_for(dir / "run", nullptr));
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  const RunTrace t = load_run(dir / "run");
  BOOST_REQUIRE_EQUAL(t.files.size(), 1u);
  BOOST_TEST(samples_of(t).empty());
  for (const std::string& m : marks_of(t)) BOOST_TEST(m.rfind("native stacks:", 0) != 0, m);
}

BOOST_AUTO_TEST_CASE(refused_perf_event_open_is_marked_and_warned) {
  for (const int refusal : {EACCES, EPERM, ENOSYS}) {
    TempDir dir;
    const RunResult r =
        run_with_perf_refused(dir, {helper("native_burn_fp"), "50"}, env_for(dir / "run", "100"),
                              refusal);
    BOOST_REQUIRE_EQUAL(r.exit_code, 0);
    BOOST_TEST(r.out.find("result ") != std::string::npos);  // the program ran unharmed
    const std::string expected = std::string("native stacks: perf_event_open refused (") +
                                 strerrorname_np(refusal) +
                                 "; /proc/sys/kernel/perf_event_paranoid = ";
    const RunTrace t = load_run(dir / "run");
    BOOST_TEST(samples_of(t).empty());
    std::vector<std::string> ours;
    for (const std::string& m : marks_of(t))
      if (m.rfind("native stacks:", 0) == 0) ours.push_back(m);
    BOOST_REQUIRE_EQUAL(ours.size(), 1u);
    BOOST_TEST(ours[0].rfind(expected, 0) == 0, ours[0]);
    BOOST_TEST(ours[0].find("; a seccomp filter is installed); no native stack samples") !=
                   std::string::npos,
               ours[0]);
    BOOST_TEST(r.err.find("stallscope: " + ours[0]) != std::string::npos, r.err);

    const RunResult rep = run({build_dir() + "/bin/stallscope", "report", "--json", dir / "run"},
                              {}, false);
    BOOST_REQUIRE_EQUAL(rep.exit_code, 0);
    const auto j = nlohmann::json::parse(rep.out);
    const std::string dump = j.dump();
    BOOST_TEST(dump.find(nlohmann::json(ours[0]).dump()) != std::string::npos);
    const RunResult text = run({build_dir() + "/bin/stallscope", "report", dir / "run"}, {}, false);
    BOOST_TEST(text.out.find("warning: " + ours[0]) != std::string::npos, text.out);
  }
}

BOOST_AUTO_TEST_CASE(a_bad_rate_is_named_and_sampling_stays_off) {
  TempDir dir;
  const RunResult r = run({helper("native_burn_fp"), "20"}, env_for(dir / "run", "fast"));
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  // The configuration table's message: the variable, the value, the range.
  BOOST_TEST(r.err.find("STALLSCOPE_PRELOAD_NATIVE_STACKS_HZ='fast': not a number") !=
             std::string::npos, r.err);
  BOOST_TEST(samples_of(load_run(dir / "run")).empty());
}

BOOST_AUTO_TEST_CASE(frame_pointers_give_burn_cpu_and_its_callers) {
  skip_unless_perf_allowed();
  TempDir dir;
  const std::vector<Ev> s = burn_samples("native_burn_fp", dir / "run");
  show("with frame pointers", s);
  BOOST_REQUIRE_GE(s.size(), 5u);  // 80 at full speed; a busy machine gives fewer
  const size_t burn = with_leaf(s, "burn_cpu");
  BOOST_TEST(burn * 2 > s.size(), burn << " of " << s.size() << " samples in burn_cpu");
  size_t walked = 0;
  for (const Ev& e : s) {
    if (e.frames[0] != "burn_cpu") continue;
    walked += e.frames.size() >= 3 && e.frames[1] == "run_work" && e.frames[2] == "main";
  }
  BOOST_TEST(walked == burn, walked << " of " << burn << " burn_cpu samples walked to main");
}


BOOST_AUTO_TEST_CASE(without_frame_pointers_the_leaf_is_still_burn_cpu) {
  skip_unless_perf_allowed();
  TempDir dir;
  const std::vector<Ev> s = burn_samples("native_burn_nofp", dir / "run");
  show("without frame pointers", s);
  BOOST_REQUIRE_GE(s.size(), 5u);
  const size_t burn = with_leaf(s, "burn_cpu");
  BOOST_TEST(burn * 2 > s.size(), burn << " of " << s.size() << " samples in burn_cpu");
}


BOOST_AUTO_TEST_SUITE_END()
