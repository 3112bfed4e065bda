// Reads from memory-mapped files: a program that knows nothing of
// stallscope maps a file dropped from the page cache and touches its pages
// from two threads (then from a forked child); each major fault must be in
// the trace as a one-page storage read of that file, with the faulting
// thread, its file offset and the tier its ordinary reads get. Also: off
// with STALLSCOPE_MMAP_FAULTS=0, and one warning where perf events are
// refused (a seccomp filter in the child makes perf_event_open fail with
// EACCES, as perf_event_paranoid 3 does). Skipped (exit 77) only where this
// machine refuses perf events to the test itself.
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "preload/preload_run.hpp"

using namespace stallscope;
using namespace stallscope::test;

namespace {

constexpr long kPages = 256;  // touched by the two threads (and again by the child)
constexpr long kPage = 4096;
constexpr uint8_t kFault = static_cast<uint8_t>(format::CacheMethod::kFault);

struct Read {
  uint32_t pid = 0, parent_pid = 0, track_tid = 0;
  uint64_t corr = 0;
  std::string thread, path;
  int64_t ts_ns = 0, dur_ns = 0;
  format::IoExt io{};
};

struct Loaded {
  std::vector<Read> reads;
  std::vector<std::string> marks;
};

Loaded load(const std::string& dir) {
  Loaded l;
  std::string error;
  for (const std::string& f : reader::list_trace_files(dir, &error)) {
    reader::TraceReader r(f);
    reader::Event e;
    while (r.next(e)) {
      if (e.kind == static_cast<uint8_t>(format::Kind::kMark)) {
        l.marks.emplace_back(r.string(e.name_id));
      }
      if (e.kind != static_cast<uint8_t>(format::Kind::kStorageRead) || !e.has(format::Ext::kIo))
        continue;
      Read rd{r.header().pid,
              r.header().parent_pid,
              0,
              e.corr,
              "",
              std::string(r.string(e.name_id)),
              e.ts_ns,
              e.dur_ns,
              e.io};
      if (const reader::TrackInfo* t = r.track(e.track_id)) {
        rd.track_tid = t->tid;
        rd.thread = std::string(r.string(t->name_id));
      }
      l.reads.push_back(rd);
    }
  }
  return l;
}

std::vector<Read> faults_of(const Loaded& l, const std::string& path) {
  std::vector<Read> out;
  for (const Read& r : l.reads)
    if (r.io.cache_method == kFault && r.path == path) out.push_back(r);
  return out;
}

// Skips (77) where the kernel refuses the events the shim opens.
void require_perf_events() {
  perf_event_attr a{};
  a.size = sizeof a;
  a.type = PERF_TYPE_SOFTWARE;
  a.config = PERF_COUNT_SW_PAGE_FAULTS_MAJ;
  a.sample_period = 1;
  a.inherit = 1;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  const long fd = ::syscall(SYS_perf_event_open, &a, ::getpid(), 0, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0) {
    std::cout << "SKIP: perf_event_open(PERF_COUNT_SW_PAGE_FAULTS_MAJ) refused here ("
              << strerrorname_np(errno) << "; perf_event_paranoid or seccomp): page-fault "
              << "sampling cannot be tested on this machine\n";
    std::exit(77);
  }
  ::close(static_cast<int>(fd));
}

// `pages` pages of data in a directory on the build tree's filesystem (a
// disk, where dropping pages from the cache makes faults major).
std::string make_data(const TempDir& dir, long pages = 2 * kPages,
                      const std::string& name = "dataset.bin") {
  const std::string path = dir / name;
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  BOOST_REQUIRE(fd >= 0);
  std::vector<char> page(kPage);
  for (long p = 0; p < pages; ++p) {
    std::snprintf(page.data(), page.size(), "page %ld", p);
    BOOST_REQUIRE_EQUAL(::write(fd, page.data(), page.size()), kPage);
  }
  BOOST_REQUIRE_EQUAL(::fsync(fd), 0);  // clean pages: POSIX_FADV_DONTNEED drops them
  ::close(fd);
  return path;
}

struct Touched {
  long tid, majflt, touched;
};

std::vector<Touched> lines_of(const std::string& out, const std::string& key) {
  std::vector<Touched> v;
  std::istringstream in(out);
  std::string word;
  while (in >> word) {
    if (word != key) continue;
    Touched t{};
    in >> t.tid >> t.majflt >> t.touched;
    v.push_back(t);
  }
  return v;
}

std::map<std::string, std::string> env_for(const std::string& out_dir) {
  return {{"STALLSCOPE_OUT", out_dir}, {"STALLSCOPE_QUIET", "0"}};
}

struct Fixture {
  Fixture() : dir(STALLSCOPE_TEST_BINARY_DIR), data(make_data(dir)) { require_perf_events(); }
  RunResult run_reader(std::map<std::string, std::string> env, bool fork_child = false) {
    std::vector<std::string> argv{helper("mmap_reader"), data, std::to_string(kPages), "2"};
    if (fork_child) argv.push_back("--fork");
    RunResult r = run(argv, std::move(env));
    BOOST_TEST_INFO("stdout: " << r.out << "\nstderr: " << r.err);
    BOOST_REQUIRE_EQUAL(r.exit_code, 0);
    // The faults are major only if the pages really left the cache.
    BOOST_REQUIRE_LT(r.value("RESIDENT"), kPages / 10);
    return r;
  }
  TempDir dir;
  std::string data;
};

// The interposed pread of the same file: the tier its ordinary reads get.
const Read* plain_read(const Loaded& l, const std::string& path) {
  for (const Read& r : l.reads)
    if (r.path == path && r.io.cache_method != kFault) return &r;
  return nullptr;
}

}  // namespace

BOOST_FIXTURE_TEST_SUITE(preload_mmap, Fixture)

BOOST_AUTO_TEST_CASE(major_faults_are_page_reads_of_the_file_on_the_faulting_thread) {
  const RunResult r = run_reader(env_for(dir / "run"));
  const std::vector<Touched> threads = lines_of(r.out, "THREAD");
  BOOST_REQUIRE_EQUAL(threads.size(), 2u);
  const Loaded l = load(dir / "run");
  const Read* plain = plain_read(l, data);
  BOOST_REQUIRE(plain != nullptr);
  const std::vector<Read> faults = faults_of(l, data);
  for (const Touched& t : threads) {
    BOOST_TEST_INFO("thread " << t.tid << " touched " << t.touched << ", majflt " << t.majflt);
    BOOST_CHECK_GE(t.majflt, t.touched * 9 / 10);  // the kernel saw major faults
    std::set<uint64_t> offsets;
    for (const Read& f : faults) {
      if (f.corr != static_cast<uint64_t>(t.tid)) continue;
      offsets.insert(f.io.offset);
      BOOST_CHECK_EQUAL(f.io.offset % kPage, 0u);
      BOOST_CHECK_LT(f.io.offset, static_cast<uint64_t>(kPages * kPage));
    }
    BOOST_TEST_MESSAGE("thread " << t.tid << ": touched " << t.touched << " pages, " << t.majflt
                                 << " major faults, " << offsets.size() << " sampled");
    // Every fault sampled (period 1) unless the kernel lost some: 90 %.
    BOOST_CHECK_GE(static_cast<long>(offsets.size()), t.touched * 9 / 10);
    BOOST_CHECK_LE(static_cast<long>(offsets.size()), t.touched);
  }
  BOOST_CHECK_GE(static_cast<long>(faults.size()), kPages * 9 / 10);
  BOOST_CHECK_LE(static_cast<long>(faults.size()), kPages);
  for (const Read& f : faults) {
    BOOST_CHECK_EQUAL(f.io.bytes, static_cast<uint64_t>(kPage));
    BOOST_CHECK_EQUAL(f.io.cache, static_cast<uint8_t>(format::Cache::kMiss));
    BOOST_CHECK_EQUAL(f.io.hit_bytes, 0u);
    BOOST_CHECK_EQUAL(f.io.tier, plain->io.tier);
    BOOST_CHECK_EQUAL(f.thread, "stallscope-mmap");  // written by the drain thread
    BOOST_CHECK_EQUAL(f.track_tid, f.corr);            // on a track of the faulting thread
    BOOST_CHECK_GT(f.dur_ns, 0);
    BOOST_CHECK_LE(f.dur_ns, 101000);       // 100 µs drawn, converted with the file's clock pairs
    BOOST_CHECK_GT(f.ts_ns, plain->ts_ns);  // clocks agree: touched after the pread
  }
}

BOOST_AUTO_TEST_CASE(a_forked_child_records_its_own_faults_in_its_own_file) {
  const RunResult r = run_reader(env_for(dir / "run"), true);
  const std::vector<Touched> child = lines_of(r.out, "CHILD");
  BOOST_REQUIRE_EQUAL(child.size(), 1u);
  const Loaded l = load(dir / "run");
  long in_child = 0, child_pages_in_parent = 0;
  for (const Read& f : faults_of(l, data)) {
    const bool child_page = f.io.offset >= static_cast<uint64_t>(kPages * kPage);
    if (f.pid == static_cast<uint32_t>(child[0].tid)) {
      BOOST_CHECK(child_page);
      BOOST_CHECK_EQUAL(f.corr, static_cast<uint64_t>(child[0].tid));
      ++in_child;
    } else if (child_page) {
      ++child_pages_in_parent;
    }
  }
  BOOST_TEST_INFO("child touched " << child[0].touched << ", majflt " << child[0].majflt);
  BOOST_CHECK_GE(in_child, child[0].touched * 9 / 10);
  BOOST_CHECK_EQUAL(child_pages_in_parent, 0);
}

BOOST_AUTO_TEST_CASE(nothing_is_sampled_with_mmap_faults_off) {
  auto env = env_for(dir / "run");
  env["STALLSCOPE_MMAP_FAULTS"] = "0";
  run_reader(env);
  const Loaded l = load(dir / "run");
  BOOST_CHECK(plain_read(l, data) != nullptr);  // tracing itself is on
  BOOST_CHECK_EQUAL(faults_of(l, data).size(), 0u);
}

BOOST_AUTO_TEST_CASE(refused_perf_events_leave_one_warning_and_no_fault_reads) {
  const std::vector<std::string> argv{helper("mmap_reader"), data, std::to_string(kPages), "2"};
  const RunResult r = run_with_perf_refused(dir, argv, env_for(dir / "run"));
  BOOST_TEST_INFO("stdout: " << r.out << "\nstderr: " << r.err);
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  BOOST_CHECK_EQUAL(lines_of(r.out, "THREAD").size(), 2u);  // the program is unharmed
  BOOST_CHECK_NE(r.err.find("memory-mapped reads not traced"), std::string::npos);
  const Loaded l = load(dir / "run");
  BOOST_CHECK(plain_read(l, data) != nullptr);
  BOOST_CHECK_EQUAL(faults_of(l, data).size(), 0u);
  int warnings = 0;
  for (const std::string& m : l.marks) {
    if (m.find("memory-mapped reads not traced") == std::string::npos) continue;
    ++warnings;
    BOOST_CHECK_NE(m.find("EACCES"), std::string::npos);
  }
  BOOST_CHECK_EQUAL(warnings, 1);
}

// A process that never maps a file for reading never opens perf events:
// the sampler starts at the first such mapping (here perf is refused, so an
// attempt would leave its note on stderr).
BOOST_AUTO_TEST_CASE(a_process_that_maps_no_file_starts_no_sampler) {
  const RunResult r = run_with_perf_refused(dir, {helper("lifecycle"), "read", data, "10"}, env_for(dir / "run2"));
  BOOST_TEST_INFO("stdout: " << r.out << "\nstderr: " << r.err);
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  BOOST_CHECK_EQUAL(r.err.find("memory-mapped reads not traced"), std::string::npos);
  const Loaded l = load(dir / "run2");
  BOOST_CHECK(plain_read(l, data) != nullptr);  // traced all the same
}

BOOST_AUTO_TEST_CASE(report_counts_mapped_reads_as_storage) {
  // 30 batches of 64 pages, each page one major fault (~3 ms here); 1 ms of
  // training a step: the trainer waits for mapped reads most of the time.
  const std::string file = make_data(dir, 30 * 64, "batches.bin");
  const RunResult r =
      run({helper("mmap_trainer"), file, "64", "30", "1"}, env_for(dir / "trainer-run"), true, 120);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const Loaded l = load(dir / "trainer-run");
  BOOST_CHECK_GE(static_cast<long>(faults_of(l, file).size()), 30 * 64 * 9 / 10);
  const RunResult rep =
      run({build_dir() + "/bin/stallscope", "report", "--json", dir / "trainer-run"}, {}, false);
  BOOST_TEST_REQUIRE(rep.exit_code == 0, rep.err);
  const auto j = nlohmann::json::parse(rep.out);
  const auto& parts = j["ranks"][0]["parts"];
  BOOST_TEST_MESSAGE("report parts: " << parts.dump());
  // Unloaded, storage is the bottleneck here (35-65 % of step time); on a
  // machine whose CPUs are all busy the report rightly says host-bound, so
  // only the storage part's presence is asserted.
  BOOST_TEST_MESSAGE("bottleneck: " << j["ranks"][0]["bottleneck"]
                                    << ", cause: " << j["ranks"][0]["cause"]);
  const double storage = parts["data.storage"]["share"];
  BOOST_TEST(storage > 0.0, parts.dump());
}

BOOST_AUTO_TEST_SUITE_END()
