// Black-box: `stallscope info`, plus the dispatcher's usage errors and help.
#include <boost/test/unit_test.hpp>

#include "cli/cli_run.hpp"

using namespace stallscope;
using namespace stallscope::testing;
using format::Kind;

namespace {

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

void write_trace(const std::string& path, bool complete, uint32_t pid = 4242) {
  TraceBuilder b;
  b.header.pid = pid;
  b.metadata(R"({"host":"node1","rank":0,"config":{"max_mb":16}})");
  b.strings({{1, "trainer"}}).tracks({thread_track(1, 100, 1)});
  b.events({{1, Records()
                    .core(Kind::kStep, 0, 1000, 9000)
                    .core(Kind::kStorageRead, 0, 2000, 100)
                    .core(Kind::kStorageRead, 0, 2100, 100)
                    .core(Kind::kStorageRead, 0, 2200, 100)
                    .core(Kind::kGap, format::kInstant, 3000, 6)}});
  if (complete) b.end({0, 0, 20000, 2, 0}, {{1, 0, 5, 6, 0}});
  b.write(path);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_info)

BOOST_AUTO_TEST_CASE(info_names_kinds_counts_drops_and_says_complete) {
  TempDir dir;
  write_trace(dir.file("a.sst"), true);
  const auto r = run_cli(dir, {"info", dir.file("a.sst")});
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(has(r.out, "status    complete"), r.out);
  BOOST_TEST(has(r.out, "events    5: step 1, storage_read 3, gap 1"), r.out);
  BOOST_TEST(has(r.out, "track 1: thread 100 \"trainer\", 5 events, 6 dropped"), r.out);
  BOOST_TEST(has(r.out, "drops     buffer 6 (gap records 6, End totals 6); disk budget 2"), r.out);
  BOOST_TEST(has(r.out, "run: 1 files (1 complete, 0 cut, 0 unreadable), 1 processes, 5 events"),
             r.out);
  BOOST_TEST(has(r.out, "of a 16.0 MiB budget"), r.out);
}

BOOST_AUTO_TEST_CASE(info_on_a_directory_reads_its_sst_files_and_says_cut) {
  TempDir dir;
  write_trace(dir.file("node1-r0-1.sst"), true, 1);
  write_trace(dir.file("node1-r0-2.sst"), false, 2);
  TraceBuilder::write_bytes(dir.file("notes.txt"), {1, 2, 3});
  const auto r = run_cli(dir, {"info", dir.path()});
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(has(r.out, "cut (no End chunk; every written chunk is intact)"), r.out);
  BOOST_TEST(has(r.out, "run: 2 files (1 complete, 1 cut, 0 unreadable), 2 processes"), r.out);
  BOOST_TEST(!has(r.out, "notes.txt"), r.out);
}

BOOST_AUTO_TEST_CASE(info_on_a_missing_file_exits_1_naming_it) {
  TempDir dir;
  const auto r = run_cli(dir, {"info", dir.file("absent.sst")});
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(has(r.err, dir.file("absent.sst") + ": no such file or directory"), r.err);
}

BOOST_AUTO_TEST_CASE(info_on_an_unreadable_file_exits_1_with_the_error_and_offset) {
  TempDir dir;
  auto bytes = TraceBuilder().bytes();
  bytes[40] ^= 0xFF;  // header CRC no longer matches
  TraceBuilder::write_bytes(dir.file("bad.sst"), bytes);
  write_trace(dir.file("good.sst"), true);
  const auto r = run_cli(dir, {"info", dir.file("bad.sst"), dir.file("good.sst")});
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(has(r.err, dir.file("bad.sst") + ": header checksum mismatch"), r.err);
  BOOST_TEST(has(r.err, "at offset 0"), r.err);
  BOOST_TEST(has(r.out, "1 complete, 0 cut, 1 unreadable"), r.out);
}

BOOST_AUTO_TEST_CASE(usage_errors_exit_2_naming_the_flag) {
  TempDir dir;
  write_trace(dir.file("a.sst"), true);
  auto r = run_cli(dir, {"info", "--bogus", dir.file("a.sst")});
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(has(r.err, "--bogus"), r.err);
  r = run_cli(dir, {"info"});
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(has(r.err, "PATH is required"), r.err);
  r = run_cli(dir, {});
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(has(r.err, "subcommand"), r.err);
  r = run_cli(dir, {"frobnicate"});
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(has(r.err, "frobnicate"), r.err);
}

BOOST_AUTO_TEST_CASE(help_lists_the_commands_and_exits_0) {
  TempDir dir;
  auto r = run_cli(dir, {"--help"});
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(has(r.out, "info"), r.out);
  BOOST_TEST(has(r.out, "export"), r.out);
  BOOST_TEST(has(r.out, "Examples:"), r.out);
  r = run_cli(dir, {"info", "--help"});
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(has(r.out, "run directories"), r.out);
  BOOST_TEST(has(r.out, "Exit status"), r.out);
  r = run_cli(dir, {"--version"});
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(has(r.out, "0."), r.out);
}

BOOST_AUTO_TEST_SUITE_END()
