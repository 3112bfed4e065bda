// The C trainer (tests/preload/trainer.c, no stallscope in it) under plain
// LD_PRELOAD: its reads are in the trace exactly as it counted them, its
// blocking pipe reads are data waits labelled with who fed the pipe, a
// forked loader writes its own file naming its parent, and the report
// names preprocessing when decoding is the slow stage.
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "preload/preload_run.hpp"

using namespace stallscope;
using namespace stallscope::test;

namespace {

constexpr int kFiles = 4;

void make_dataset(const std::string& dir, size_t bytes) {
  std::filesystem::create_directories(dir);
  const std::string data(bytes, 'd');
  for (int i = 0; i < kFiles; ++i) {
    const std::string path = dir + "/f" + std::to_string(i);
    const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    BOOST_REQUIRE(fd >= 0 && ::write(fd, data.data(), bytes) == ssize_t(bytes));
    ::close(fd);
  }
}

struct Counts {
  uint64_t reads = 0, bytes = 0;
  std::set<uint32_t> pids, tids;
};

Counts data_reads(const RunTrace& t, const std::string& dir) {
  Counts c;
  for (const Ev& e : t.of_kind(format::Kind::kStorageRead)) {
    if (e.name.rfind(dir + "/f", 0) != 0) continue;
    ++c.reads;
    c.bytes += e.io.bytes;
    c.pids.insert(e.pid);
    c.tids.insert(e.tid);
  }
  return c;
}

std::vector<Ev> waits(const RunTrace& t) { return t.of_kind(format::Kind::kDataWait); }

}  // namespace

BOOST_AUTO_TEST_SUITE(preload_trainer)

BOOST_AUTO_TEST_CASE(loader_thread_reads_and_pipe_waits) {
  TempDir dir;
  make_dataset(dir / "data", 300000);
  const int steps = 20;
  const RunResult r = run({helper("preload_trainer"), dir / "data", std::to_string(kFiles),
                           std::to_string(steps), "6", "1", "thread"},
                          {{"STALLSCOPE_OUT", dir / "run"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const RunTrace t = load_run(dir / "run");
  const Counts c = data_reads(t, dir / "data");
  BOOST_TEST(c.reads == uint64_t(r.value("LOADER_READS")));  // what the program counted
  BOOST_TEST(c.reads == 2u * steps);  // the data, then end of file
  BOOST_TEST(c.bytes == uint64_t(steps) * 300000u);
  BOOST_TEST(c.tids.size() == 1u);  // the loader thread
  const auto w = waits(t);
  // Most steps wait (decoding, 6 ms, takes far longer than training, 1 ms,
  // so a loaded machine does not let the loader run ahead); a batch that
  // was ready before the read (the loader ran ahead) is no wait.
  BOOST_TEST(w.size() >= size_t(steps / 2));
  BOOST_TEST(w.size() <= size_t(steps));
  for (const Ev& e : w) {
    BOOST_TEST(e.work.h.aux == uint32_t(format::WaitSource::kPipe));
    BOOST_TEST(e.name == "channel written by a producer thread");
    BOOST_TEST(c.tids.count(e.tid) == 0u);  // waits are the trainer's, not the loader's
  }
}

BOOST_AUTO_TEST_CASE(forked_loader_has_its_own_file_naming_the_parent) {
  TempDir dir;
  make_dataset(dir / "data", 200000);
  const int steps = 16;
  const RunResult r = run({helper("preload_trainer"), dir / "data", std::to_string(kFiles),
                           std::to_string(steps), "6", "1", "fork"},
                          {{"STALLSCOPE_OUT", dir / "run"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const RunTrace t = load_run(dir / "run");
  BOOST_TEST_REQUIRE(t.files.size() == 2u);
  const FileInfo& a = t.files[0];
  const FileInfo& b = t.files[1];
  const FileInfo& child = a.parent_pid == b.pid ? a : b;
  const FileInfo& parent = a.parent_pid == b.pid ? b : a;
  BOOST_TEST(child.parent_pid == parent.pid);
  const Counts c = data_reads(t, dir / "data");
  // Every read once, all in the worker's file: nothing duplicated from the parent.
  BOOST_TEST(c.reads == 2u * steps);
  BOOST_TEST(c.reads == uint64_t(r.value("LOADER_READS")));
  BOOST_TEST(c.bytes == uint64_t(r.value("LOADER_BYTES")));
  BOOST_TEST((c.pids == std::set<uint32_t>{child.pid}));
  const auto w = waits(t);
  // Most steps wait (decoding, 6 ms, takes far longer than training, 1 ms,
  // so a loaded machine does not let the loader run ahead); a batch that
  // was ready before the read (the loader ran ahead) is no wait.
  BOOST_TEST(w.size() >= size_t(steps / 2));
  BOOST_TEST(w.size() <= size_t(steps));
  for (const Ev& e : w) {
    BOOST_TEST(e.pid == parent.pid);
    BOOST_TEST(e.name == "channel written by a forked worker");
  }
}

BOOST_AUTO_TEST_CASE(report_names_preprocessing_for_a_slow_decode) {
  TempDir dir;
  make_dataset(dir / "data", 65536);
  // Decoding (40 ms of CPU per batch) dwarfs training (4 ms): the trainer
  // waits most of each step while the loader is on a CPU.
  const RunResult r = run({helper("preload_trainer"), dir / "data", std::to_string(kFiles), "24",
                           "40", "4", "thread"},
                          {{"STALLSCOPE_OUT", dir / "run"}}, true, 120);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const RunResult rep = run({build_dir() + "/bin/stallscope", "report", "--json", dir / "run"}, {},
                            false);
  BOOST_TEST_REQUIRE(rep.exit_code == 0, rep.err);
  const auto j = nlohmann::json::parse(rep.out);
  const auto& parts = j["ranks"][0]["parts"];
  const double pre = parts["data.preprocess"]["share"], sto = parts["data.storage"]["share"];
  const double unk = parts["data.unknown"]["share"];
  // The trainer waits most of each step (>= 40 % injected) ...
  BOOST_TEST(pre + sto + unk >= 0.5, rep.out);
  // ... and of what the producers were seen doing, decoding dominates. On a
  // loaded machine part of the wait is the loader waiting for a CPU, which
  // the sampler sees as neither (data.unknown).
  BOOST_TEST(pre >= 0.15);
  BOOST_TEST(pre > 10 * sto);
  BOOST_TEST(j["ranks"][0]["data_split"].dump().find("inferred") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
