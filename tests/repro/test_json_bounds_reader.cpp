// Regression (RELIABILITY.md case 32): metadata nested 60,000 deep overflowed
// the stack in TraceReader (a recursive copy while merging metadata), and a
// 64 MiB metadata chunk cost over 1 GiB. Now both are ignored with a warning
// naming the file and the chunk's offset, and the events are still read.
#include <boost/test/unit_test.hpp>

#include "repro/hostile_json.hpp"
#include "stallscope/reader.hpp"

using namespace stallscope;
using namespace stallscope::testing;
using reader::Status;
using reader::TraceReader;

namespace {

size_t count_events(TraceReader& r) {
  reader::Event e;
  size_t n = 0;
  while (r.next(e)) ++n;
  return n;
}

std::string warnings_of(const TraceReader& r) {
  std::string all;
  for (const auto& d : r.diagnostics())
    if (d.level == reader::Diagnostic::Level::kWarning) all += d.message + "\n";
  return all;
}

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// The payload of the first chunk: after the header (96 bytes) and its chunk header (48).
constexpr const char* kFirstPayload = "metadata chunk at offset 144";

}  // namespace

BOOST_AUTO_TEST_SUITE(json_bounds_reader)

BOOST_AUTO_TEST_CASE(metadata_nested_60000_deep_is_ignored_with_a_warning) {
  TempDir dir;
  const std::string path = dir.file("deep.sst");
  write_trainer_trace(path, deep_metadata(60000, "deep", 7));
  TraceReader r(path);
  const std::string w = warnings_of(r);
  BOOST_TEST((r.status() == Status::kComplete), r.error());
  BOOST_TEST(has(w, path + ": " + kFirstPayload), w);
  BOOST_TEST(has(w, "deeper than 64 levels"), w);
  BOOST_TEST(r.metadata_json() == "{}");
  BOOST_TEST(r.host().empty());
  BOOST_TEST(r.rank() == -1);
  BOOST_TEST(count_events(r) == 3u);
}

BOOST_AUTO_TEST_CASE(metadata_at_the_depth_limit_is_read) {
  TempDir dir;
  const std::string path = dir.file("limit.sst");
  write_trainer_trace(path, deep_metadata(64, "limit", 3));
  TraceReader r(path);
  BOOST_TEST(warnings_of(r).empty(), warnings_of(r));
  BOOST_TEST(r.host() == "limit");
  BOOST_TEST(r.rank() == 3);
  BOOST_TEST(r.metadata_value("/x/a/a/a").has_value());
}

BOOST_AUTO_TEST_CASE(metadata_one_level_past_the_limit_is_ignored) {
  TempDir dir;
  const std::string path = dir.file("past.sst");
  write_trainer_trace(path, deep_metadata(65, "past", 3));
  TraceReader r(path);
  BOOST_TEST(has(warnings_of(r), "deeper than 64 levels"), warnings_of(r));
  BOOST_TEST(r.host().empty());
}

// 600 KB of text whose tree would take ~5 MiB: past the value limit.
BOOST_AUTO_TEST_CASE(metadata_of_300000_values_is_ignored) {
  TempDir dir;
  const std::string path = dir.file("values.sst");
  write_trainer_trace(path, wide_metadata(600000, "values", 4));
  TraceReader r(path);
  BOOST_TEST(has(warnings_of(r), path + ": " + kFirstPayload + " holds more than 262144 values"),
             warnings_of(r));
  BOOST_TEST(r.host().empty());
}

BOOST_AUTO_TEST_CASE(a_64_mib_metadata_chunk_is_skipped_and_later_metadata_kept) {
  TempDir dir;
  const std::string path = dir.file("big.sst");
  TraceBuilder b;
  b.metadata(wide_metadata(kLargestChunk, "big", 8));
  b.metadata(R"({"host":"small","rank":9})");
  b.strings({{1, "trainer"}}).tracks({thread_track(1, 100, 1)});
  b.events({{1, Records().core(format::Kind::kStep, 0, 1000, 900)}});
  b.end();
  b.write(path);
  TraceReader r(path);
  const std::string w = warnings_of(r);
  BOOST_TEST((r.status() == Status::kComplete), r.error());
  BOOST_TEST(has(w, path + ": " + kFirstPayload + " is 67108864 bytes"), w);
  BOOST_TEST(has(w, "4 MiB"), w);
  BOOST_TEST(r.host() == "small");
  BOOST_TEST(r.rank() == 9);
  BOOST_TEST(count_events(r) == 1u);
}

BOOST_AUTO_TEST_CASE(attachments_past_16_mib_in_all_are_skipped_with_a_warning) {
  TempDir dir;
  const std::string path = dir.file("attach.sst");
  TraceBuilder b;
  const std::string mib(1u << 20, 'x');
  for (int i = 0; i < 20; ++i) b.attachment("blob" + std::to_string(i), mib);
  b.attachment("small", "{}");
  b.end();
  b.write(path);
  TraceReader r(path);
  const std::string w = warnings_of(r);
  BOOST_TEST((r.status() == Status::kComplete), r.error());
  BOOST_TEST(has(w, path + ": attachment chunk at offset"), w);
  BOOST_TEST(has(w, "16 MiB"), w);
  uint64_t kept = 0;
  for (const auto& a : r.attachments()) kept += a.data.size();
  BOOST_TEST(kept <= uint64_t{16} << 20);
  BOOST_TEST(r.attachments().size() >= 15u);
  BOOST_TEST(r.attachments().back().name == "small");
}

BOOST_AUTO_TEST_SUITE_END()
