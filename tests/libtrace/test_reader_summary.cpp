// File and run summaries (what `stallscope info` prints).
#include <sstream>

#include <boost/test/unit_test.hpp>

#include "libtrace/trace_builder.hpp"
#include "stallscope/file_summary.hpp"

using namespace stallscope;
using namespace stallscope::testing;
using format::Kind;
using reader::Status;

namespace {

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// One process file: metadata with host/rank/budget, two tracks, reads, gaps.
TraceBuilder process_file(uint32_t pid, const std::string& host, int rank, int max_mb) {
  TraceBuilder b;
  b.header.pid = pid;
  b.metadata(R"({"host":")" + host + R"(","rank":)" + std::to_string(rank) +
             R"(,"config":{"max_mb":)" + std::to_string(max_mb) + "}}");
  b.strings({{1, "main"}, {2, "loader"}});
  b.tracks({thread_track(1, 100, 1), thread_track(2, 101, 2)});
  b.events({{1, Records()
                    .core(Kind::kStep, 0, 10000, 5000)
                    .core(Kind::kStorageRead, 0, 11000, 100)
                    .core(Kind::kStorageRead, 0, 11500, 100)
                    .core(Kind::kGap, format::kInstant, 12000, 5)},
            {2, Records()
                    .core(Kind::kGap, format::kInstant, 13000, 7)
                    .core(Kind::kPreprocess, 0, 14000, 2000)}});
  return b;
}

std::string printed(const reader::RunSummary& run) {
  std::ostringstream s;
  reader::print_run_summary(s, run);
  return s.str();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(file_summary)

BOOST_AUTO_TEST_CASE(counts_kinds_tracks_span_and_drops_of_a_complete_file) {
  TempDir dir;
  auto b = process_file(4242, "node7", 3, 64);
  b.end({0, 0, 20000, 4, 0}, {{1, 0, 4, 5, 1}, {2, 0, 2, 7, 2}});
  b.write(dir.file("a.sst"));
  const auto f = reader::summarize_file(dir.file("a.sst"));
  BOOST_TEST((f.status == Status::kComplete));
  BOOST_TEST(f.pid == 4242u);
  BOOST_TEST(f.host == "node7");
  BOOST_TEST(f.rank == 3);
  BOOST_TEST(f.events == 6u);
  BOOST_TEST(f.events_by_kind[static_cast<size_t>(Kind::kStorageRead)] == 2u);
  BOOST_TEST(f.events_by_kind[static_cast<size_t>(Kind::kGap)] == 2u);
  BOOST_TEST(f.first_ns == 10000);
  BOOST_TEST(f.last_ns == 16000);
  BOOST_TEST(f.gap_dropped == 12u);
  BOOST_TEST(f.end_dropped_buffer == 12u);
  BOOST_TEST(f.end_dropped_disk == 4u);  // max(summary 4, tracks 1 + 2)
  BOOST_TEST(f.end_written == 6u);
  BOOST_TEST(f.disk_budget_bytes == 64u << 20);
  BOOST_REQUIRE_EQUAL(f.tracks.size(), 2u);
  BOOST_TEST(f.tracks[0].name == "main");
  BOOST_TEST(f.tracks[0].events == 4u);
  BOOST_TEST(f.tracks[1].gap_dropped == 7u);

  const std::string text = printed(reader::summarize_run({dir.file("a.sst")}));
  BOOST_TEST(contains(text, "status    complete"), text);
  BOOST_TEST(contains(text, "events    6: step 1, storage_read 2, preprocess 1, gap 2"), text);
  BOOST_TEST(contains(text, "track 1: thread 100 \"main\", 4 events, 5 dropped"), text);
  BOOST_TEST(contains(text, "drops     buffer 12 (gap records 12, End totals 12); disk budget 4"),
             text);
  BOOST_TEST(contains(text, "pid 4242 (parent 1) on node7, rank 3"), text);
  BOOST_TEST(contains(text, "of a 64.0 MiB budget"), text);
}

BOOST_AUTO_TEST_CASE(cut_file_reports_lost_bytes_and_drops_from_gaps) {
  TempDir dir;
  auto bytes = process_file(1, "h", 0, 0).bytes();
  bytes.resize(bytes.size() - 20);  // cut inside the last events chunk
  TraceBuilder::write_bytes(dir.file("cut.sst"), bytes);
  const auto run = reader::summarize_run({dir.file("cut.sst")});
  const auto& f = run.files[0];
  BOOST_TEST((f.status == Status::kTruncated));
  BOOST_TEST(f.lost_bytes > 0u);
  BOOST_TEST(f.events == 0u);  // the only events chunk was cut
  BOOST_TEST(!f.has_end);
  BOOST_TEST(run.files_cut == 1u);
  const std::string text = printed(run);
  BOOST_TEST(contains(text, "cut (no End chunk; "), text);
  BOOST_TEST(contains(text, "disk budget unknown (no End chunk)"), text);
  BOOST_TEST(contains(text, "(no disk budget recorded)"), text);
}

BOOST_AUTO_TEST_CASE(ring_segments_group_by_process_with_discarded_events) {
  TempDir dir;
  const uint64_t discarded[] = {0, 100, 250};
  for (uint32_t seg = 0; seg < 3; ++seg) {
    auto b = process_file(77, "nodeA", 1, 32);
    b.header.flags |= format::kFileRingSegment;
    b.header.segment = seg;
    b.header.ring_discarded = discarded[seg];
    b.end();
    b.write(dir.file("nodeA-r1-77.seg" + std::to_string(seg) + ".sst"));
  }
  auto other = process_file(78, "nodeA", 0, 0);
  other.end();
  other.write(dir.file("nodeA-r0-78.sst"));
  std::string err;
  const auto run = reader::summarize_run(reader::list_trace_files(dir.path(), &err));
  BOOST_REQUIRE_EQUAL(run.files.size(), 4u);
  BOOST_REQUIRE_EQUAL(run.processes.size(), 2u);
  const auto& p = run.processes[1];  // sorted by host, rank: rank 1 second
  BOOST_TEST(p.pid == 77u);
  BOOST_TEST(p.files.size() == 3u);
  BOOST_TEST(run.files[p.files[2]].segment == 2u);
  BOOST_TEST(p.ring_discarded == 250u);
  BOOST_TEST(run.ring_discarded == 250u);
  BOOST_TEST(run.disk_budget_bytes == 32u << 20);
  BOOST_TEST(run.processes_without_budget == 1u);
  uint64_t bytes = 0;
  for (const auto& f : run.files) bytes += f.file_bytes;
  BOOST_TEST(run.disk_bytes == bytes);
  BOOST_TEST(run.events == 24u);
  const std::string text = printed(run);
  BOOST_TEST(contains(text, "nodeA pid 77 rank 1: 3 files (segments 0 1 2)"), text);
  BOOST_TEST(contains(text, "250 events discarded with deleted segments"), text);
  BOOST_TEST(contains(text, "ring discarded 250"), text);
  BOOST_TEST(contains(text, "(1 processes had no limit)"), text);
}

BOOST_AUTO_TEST_CASE(unreadable_file_is_an_error_in_the_totals) {
  TempDir dir;
  TraceBuilder::write_bytes(dir.file("junk.sst"), {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto good = process_file(5, "h", 0, 0);
  good.end();
  good.write(dir.file("good.sst"));
  const auto run = reader::summarize_run({dir.file("junk.sst"), dir.file("good.sst")});
  BOOST_TEST(run.files_error == 1u);
  BOOST_TEST(run.files_complete == 1u);
  BOOST_TEST(run.processes.size() == 1u);
  const std::string text = printed(run);
  BOOST_TEST(
      contains(text, "status    error: " + dir.file("junk.sst") + ": not a stallscope trace"),
      text);
  BOOST_TEST(contains(text, "1 unreadable"), text);
}

BOOST_AUTO_TEST_CASE(events_on_an_undeclared_track_are_listed) {
  TempDir dir;
  TraceBuilder b;
  b.events({{9, Records().core(Kind::kMark, format::kInstant, 10)}}).end();
  b.write(dir.file("u.sst"));
  const auto f = reader::summarize_file(dir.file("u.sst"));
  BOOST_REQUIRE_EQUAL(f.tracks.size(), 1u);
  BOOST_TEST(!f.tracks[0].in_table);
  BOOST_TEST(f.tracks[0].events == 1u);
  std::ostringstream s;
  reader::print_file_summary(s, f);
  BOOST_TEST(contains(s.str(), "track 9: (not in the track table), 1 events"), s.str());
}

BOOST_AUTO_TEST_CASE(format_bytes_uses_binary_units) {
  BOOST_TEST(reader::format_bytes(512) == "512 B");
  BOOST_TEST(reader::format_bytes(1536) == "1.5 KiB");
  BOOST_TEST(reader::format_bytes(uint64_t{3} << 30) == "3.0 GiB");
}

BOOST_AUTO_TEST_SUITE_END()
