// TraceReader on damaged and foreign input (RELIABILITY.md item 6): a clear
// error or a partial result with a warning, never a crash or an over-read.
#include <random>

#include <boost/test/unit_test.hpp>

#include "libtrace/trace_builder.hpp"
#include "stallscope/reader.hpp"

using namespace stallscope;
using namespace stallscope::testing;
using format::Ext;
using format::Kind;
using reader::Event;
using reader::Status;
using reader::TraceReader;

namespace {

size_t count_events(TraceReader& r) {
  Event e;
  size_t n = 0;
  while (r.next(e)) ++n;
  return n;
}

bool has_warning(const TraceReader& r, const std::string& text) {
  for (const auto& d : r.diagnostics())
    if (d.level == reader::Diagnostic::Level::kWarning && d.message.find(text) != std::string::npos)
      return true;
  return false;
}

// strings, tracks, metadata, three events chunks (2 + 3 + 1 records), End.
TraceBuilder small_file() {
  TraceBuilder b;
  const uint64_t ids[] = {1, 2, 3};
  b.strings({{1, "read"}, {2, "/data/x"}}).tracks({thread_track(1, 10, 1)});
  b.metadata(R"({"host":"n1","rank":0})");
  b.events({{1, Records()
                    .core(Kind::kStorageRead, 0, 100, 10, 1)
                    .ext(make_ext<format::IoExt>(Ext::kIo, 2))
                    .core(Kind::kBatchReady, format::kInstant, 120)
                    .ids(ids)}});
  b.events({{1, Records().core(Kind::kStep, 0, 200, 50).ext(make_ext<format::StepExt>(Ext::kStep))},
            {2, Records().core(Kind::kKernel, 0, 210, 5).core(Kind::kKernel, 0, 220, 5)}});
  b.events({{1, Records().core(Kind::kGap, format::kInstant, 300, 4)}});
  b.end({0, 0, 400, 0, 0}, {{1, 0, 4, 4, 0}});
  return b;
}

// Events chunk whose single track block holds `recs` verbatim.
std::string write_with_records(const TempDir& dir, const Records& recs) {
  TraceBuilder b;
  b.events({{1, Records().core(Kind::kMark, format::kInstant, 50)}});
  b.events({{1, recs}});
  b.end();
  std::string path = dir.file("bad.sst");
  b.write(path);
  return path;
}

// Expects an error naming the file and `offset`, after `good` events.
void expect_error_at(const std::string& path, uint64_t offset, size_t good,
                     const std::string& what) {
  TraceReader r(path);
  BOOST_TEST(count_events(r) == good);
  BOOST_TEST((r.status() == Status::kError));
  BOOST_TEST(r.error().find(path) == 0u, r.error());
  BOOST_TEST(r.error().find("at offset " + std::to_string(offset)) != std::string::npos, r.error());
  BOOST_TEST(r.error().find(what) != std::string::npos, r.error());
}

}  // namespace

BOOST_AUTO_TEST_SUITE(reader_faults)

BOOST_AUTO_TEST_CASE(empty_file_is_an_error_naming_the_file) {
  TempDir dir;
  TraceBuilder::write_bytes(dir.file("empty.sst"), {});
  TraceReader r(dir.file("empty.sst"));
  BOOST_TEST((r.status() == Status::kError));
  BOOST_TEST(r.error() ==
             dir.file("empty.sst") + ": empty file (0 bytes), not a stallscope trace at offset 0");
  Event e;
  BOOST_TEST(!r.next(e));
}

BOOST_AUTO_TEST_CASE(missing_file_and_directory_are_errors_naming_the_path) {
  TempDir dir;
  TraceReader missing(dir.file("nope.sst"));
  BOOST_TEST((missing.status() == Status::kError));
  BOOST_TEST(missing.error().find(dir.file("nope.sst") + ": cannot open") == 0u);
  TraceReader directory(dir.path());
  BOOST_TEST(directory.error().find("is a directory") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_magic_and_header_checksum_are_errors_at_offset_0) {
  TempDir dir;
  auto bytes = small_file().bytes();
  bytes[0] = 'X';
  TraceBuilder::write_bytes(dir.file("magic.sst"), bytes);
  expect_error_at(dir.file("magic.sst"), 0, 0, "not a stallscope trace (bad magic)");
  bytes = small_file().bytes();
  bytes[20] ^= 0x01;  // pid, covered by the header CRC
  TraceBuilder::write_bytes(dir.file("crc.sst"), bytes);
  expect_error_at(dir.file("crc.sst"), 0, 0, "header checksum mismatch");
}

// The files users pass by mistake: JSON that is no profiler trace (with or
// without a byte order mark), gzip data.
BOOST_AUTO_TEST_CASE(json_and_gzip_that_are_no_trace_say_what_they_are) {
  TempDir dir;
  const auto put = [&](const std::string& name, const std::string& text) {
    TraceBuilder::write_bytes(dir.file(name), std::vector<uint8_t>(text.begin(), text.end()));
  };
  put("metrics.json", "\n  {\"loss\": [1.5, 1.2], \"epoch\": 3}\n");
  put("bom.json", "\xEF\xBB\xBF[{\"a\": 1}]");
  put("data.gz", std::string("\x1f\x8b\x08\x00", 4) + "junkjunk");
  const std::string json = "JSON without \"traceEvents\": not a PyTorch profiler trace";
  expect_error_at(dir.file("metrics.json"), 0, 0, json);
  expect_error_at(dir.file("bom.json"), 0, 0, json);
  expect_error_at(dir.file("data.gz"), 0, 0, "gzip data that is no PyTorch profiler trace");
}

BOOST_AUTO_TEST_CASE(newer_major_version_is_refused_naming_both_versions) {
  TempDir dir;
  auto b = small_file();
  b.header.version_major = 2;
  b.header.version_minor = 3;
  b.write(dir.file("v2.sst"));
  TraceReader r(dir.file("v2.sst"));
  BOOST_TEST((r.status() == Status::kError));
  BOOST_TEST(r.error().find("written by a newer stallscope: format 2.3, this reader reads 1.x") !=
                 std::string::npos,
             r.error());
}

BOOST_AUTO_TEST_CASE(newer_minor_version_with_a_longer_header_is_accepted) {
  TempDir dir;
  TraceBuilder b;
  b.header.version_minor = 7;
  b.header.header_bytes = 96 + 16;  // fields this reader does not know
  b.events({{1, Records().core(Kind::kMark, format::kInstant, 5)}}).end();
  b.write(dir.file("v1_7.sst"));
  TraceReader r(dir.file("v1_7.sst"));
  BOOST_TEST(count_events(r) == 1u);
  BOOST_TEST((r.status() == Status::kComplete), r.error());
}

BOOST_AUTO_TEST_CASE(cut_at_every_byte_keeps_complete_chunks_and_warns) {
  TempDir dir;
  const auto b = small_file();
  const auto full = b.bytes();
  const std::string path = dir.file("cut.sst");
  for (size_t len = 0; len <= full.size(); ++len) {
    BOOST_TEST_CONTEXT("cut at " << len << " of " << full.size()) {
      TraceBuilder::write_bytes(path, std::vector<uint8_t>(full.begin(), full.begin() + len));
      TraceReader r(path);
      const size_t got = count_events(r);
      if (len < sizeof(format::FileHeader)) {
        BOOST_TEST((r.status() == Status::kError));
        BOOST_TEST(got == 0u);
        continue;
      }
      size_t expected = 0;
      uint64_t last_end = sizeof(format::FileHeader);
      for (const auto& c : b.chunks()) {
        if (c.end > len) break;
        expected += c.cores;
        last_end = c.end;
      }
      BOOST_TEST(got == expected);
      if (len == full.size()) {
        BOOST_TEST((r.status() == Status::kComplete));
      } else {
        BOOST_TEST((r.status() == Status::kTruncated), r.error());
        BOOST_TEST(r.lost_bytes() == len - last_end);
        BOOST_TEST((has_warning(r, "file cut") || has_warning(r, "no End chunk")));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(zero_filled_tail_counts_as_cut_not_corrupt) {
  TempDir dir;
  const auto b = small_file();
  auto bytes = b.bytes();
  bytes.resize(b.chunks().back().offset);  // lose the End chunk
  const size_t good_end = bytes.size();
  bytes.resize(good_end + 4096, 0);
  TraceBuilder::write_bytes(dir.file("zeros.sst"), bytes);
  TraceReader r(dir.file("zeros.sst"));
  BOOST_TEST(count_events(r) == 6u);
  BOOST_TEST((r.status() == Status::kTruncated), r.error());
  BOOST_TEST(r.lost_bytes() == 4096u);
}

BOOST_AUTO_TEST_CASE(bad_chunk_magic_size_or_checksum_is_an_error_naming_the_chunk_offset) {
  TempDir dir;
  const auto b = small_file();
  const auto& chunks = b.chunks();
  const uint64_t second_events = chunks[4].offset;  // strings, tracks, metadata, events, events
  struct Damage {
    size_t at;
    uint32_t value;
    const char* what;
  };
  const Damage cases[] = {
      {0, 0x12345678, "bad chunk magic 0x12345678"},
      {8, format::kMaxChunkPayload + 8, "chunk payload_bytes"},
      {8, 12, "chunk payload_bytes 12 (must be a multiple of 8"},
      {12, 0xdeadbeef, "chunk checksum mismatch"},
  };
  for (const auto& d : cases) {
    BOOST_TEST_CONTEXT(d.what) {
      auto bytes = b.bytes();
      std::memcpy(bytes.data() + second_events + d.at, &d.value, 4);
      TraceBuilder::write_bytes(dir.file("chunk.sst"), bytes);
      expect_error_at(dir.file("chunk.sst"), second_events, 2, d.what);
    }
  }
}

BOOST_AUTO_TEST_CASE(record_lengths_past_their_container_are_errors_without_over_read) {
  TempDir dir;
  // The second events chunk starts at 96 + (48 + 40) + 48; its block at +8.
  const uint64_t block = 96 + 48 + 40 + 48;
  const uint64_t records = block + 8;
  {  // extension longer than its track block
    Records recs;
    recs.core(Kind::kStorageRead, 0, 1, 1).ext(make_ext<format::IoExt>(Ext::kIo));
    recs.bytes[32 + 2] = 64;  // ExtHeader::bytes = 64 > 56 left
    expect_error_at(write_with_records(dir, recs), records + 32, 1, "runs past its track block");
  }
  {  // extension shorter than 8 and not a multiple of 8
    for (uint8_t len : {0, 4, 12}) {
      Records recs;
      recs.core(Kind::kStep, 0, 1, 1).ext(make_ext<format::StepExt>(Ext::kStep));
      recs.bytes[32 + 2] = len;
      expect_error_at(write_with_records(dir, recs), records + 32, 1, "must be at least 8");
    }
  }
  {  // typed extension shorter than format 1 defines
    Records recs;
    recs.core(Kind::kStep, 0, 1, 1).ext(make_ext<format::StepExt>(Ext::kStep));
    recs.bytes[32 + 2] = 8;
    recs.bytes.resize(recs.bytes.size() - 8);
    expect_error_at(write_with_records(dir, recs), records + 32, 1, "shorter than format 1");
  }
  {  // id count that does not fit its extension
    const uint64_t ids[] = {1, 2};
    Records recs;
    recs.core(Kind::kBatchReady, format::kInstant, 1).ids(ids);
    const uint32_t lie = 0xFFFFFFFF;
    std::memcpy(recs.bytes.data() + 32 + 4, &lie, 4);
    expect_error_at(write_with_records(dir, recs), records + 32, 1,
                    "id list claims 4294967295 ids");
  }
  {  // core record cut by its block, extension without core record
    Records cut;
    cut.core(Kind::kMark, format::kInstant, 1);
    cut.bytes.resize(24);
    expect_error_at(write_with_records(dir, cut), records, 1, "core record runs past");
    Records orphan;
    orphan.ext(make_ext<format::StepExt>(Ext::kStep));
    expect_error_at(write_with_records(dir, orphan), records, 1, "without a core record");
  }
}

// Found by the fuzzer: an empty id list made a memcpy from a null pointer.
BOOST_AUTO_TEST_CASE(empty_id_list_is_read_as_no_ids) {
  TempDir dir;
  Records recs;
  recs.core(Kind::kBatchReady, format::kInstant, 1).ids({}).ids({});
  TraceReader r(write_with_records(dir, recs));
  Event e;
  BOOST_REQUIRE(r.next(e));
  BOOST_REQUIRE(r.next(e));
  BOOST_TEST(e.has(Ext::kIdList));
  BOOST_TEST(e.ids.empty());
  BOOST_TEST(!r.next(e));
  BOOST_TEST((r.status() == Status::kComplete), r.error());
}

BOOST_AUTO_TEST_CASE(track_block_past_its_chunk_is_an_error) {
  TempDir dir;
  auto b = small_file();
  auto bytes = b.bytes();
  const uint64_t block = b.chunks()[4].offset + 48;
  for (uint32_t len : {0xFFFFFFF8u, 4000u, 12u}) {
    std::memcpy(bytes.data() + block + 4, &len, 4);
    // Recompute the chunk CRC so the record-level check is what fires.
    const uint32_t payload = b.chunks()[4].end - block;
    const uint32_t crc = crc32_of(bytes.data() + block, payload);
    std::memcpy(bytes.data() + b.chunks()[4].offset + 12, &crc, 4);
    TraceBuilder::write_bytes(dir.file("block.sst"), bytes);
    expect_error_at(dir.file("block.sst"), block, 2, "track block of " + std::to_string(len));
  }
}

BOOST_AUTO_TEST_CASE(huge_table_lengths_are_errors_not_allocations) {
  TempDir dir;
  {
    TraceBuilder b;
    std::vector<uint8_t> p;
    append_pod(p, format::StringEntry{1, 0xFFFFFFFFu});
    b.chunk(format::ChunkType::kStrings, p).end();
    b.write(dir.file("s.sst"));
    expect_error_at(dir.file("s.sst"), 96 + 48, 0, "string entry of 4294967295 bytes runs past");
  }
  {
    TraceBuilder b;
    std::vector<uint8_t> p;
    append_pod(p, format::AttachmentHeader{4, 0, ~uint64_t{0} - 2});
    p.resize(p.size() + 8, 'n');
    b.chunk(format::ChunkType::kAttachment, p).end();
    b.write(dir.file("a.sst"));
    expect_error_at(dir.file("a.sst"), 96 + 48, 0, "run past their chunk");
  }
  {
    TraceBuilder b;
    std::vector<uint8_t> p;
    append_pod(p, format::EndSummary{0xFFFFFFFFu, 0, 0, 0, 0});
    b.chunk(format::ChunkType::kEnd, p);
    b.write(dir.file("end.sst"));
    expect_error_at(dir.file("end.sst"), 96 + 48, 0, "claims 4294967295 track totals but holds 0");
  }
}

BOOST_AUTO_TEST_CASE(unknown_kinds_extensions_and_chunks_are_skipped_and_counted) {
  TempDir dir;
  TraceBuilder b;
  b.chunk_raw(99, {1, 2, 3});
  format::ExtHeader future{0xC0, 0, 24, 0};
  std::vector<uint8_t> future_ext;
  append_pod(future_ext, future);
  future_ext.resize(24, 0xEE);
  b.events({{1, Records()
                    .core_raw(0x7F, 0, 10)                       // unknown kind …
                    .ext(make_ext<format::StepExt>(Ext::kStep))  // … with its extension
                    .core(Kind::kStep, 0, 20, 5)
                    .raw(future_ext)  // unknown extension
                    .ext(make_ext<format::StepExt>(Ext::kStep, 2))
                    .core_raw(0, 0, 30)}});  // kind 0: unknown too
  b.chunk_raw(200, {});
  b.end();
  b.write(dir.file("future.sst"));
  TraceReader r(dir.file("future.sst"));
  Event e;
  BOOST_REQUIRE(r.next(e));
  BOOST_TEST(e.kind == static_cast<uint8_t>(Kind::kStep));
  BOOST_TEST(e.ts_ns == 20);
  BOOST_TEST(e.has(Ext::kStep));
  BOOST_TEST(e.step.h.aux == 2u);
  BOOST_TEST(!r.next(e));
  BOOST_TEST((r.status() == Status::kComplete), r.error());
  BOOST_TEST(r.skipped().unknown_kinds == 2u);
  BOOST_TEST(r.skipped().unknown_exts == 1u);
  BOOST_TEST(r.skipped().unknown_chunks == 2u);
  BOOST_TEST(has_warning(r, "skipping chunks of unknown type 99"));
  BOOST_TEST(has_warning(r, "skipped 2 records of unknown kinds and 1 unknown extensions"));
}

BOOST_AUTO_TEST_CASE(out_of_range_ticks_saturate_instead_of_overflowing) {
  TempDir dir;
  TraceBuilder b;
  b.header.flags = 0;
  b.header.tsc_hz = 1;  // implausible: warned, triples used
  b.header.start = {0, 0, 0};
  b.clock = {1000, 500, 500};
  b.events({{1, Records()
                    .core(Kind::kKernel, 0, ~uint64_t{0} / 2, ~uint64_t{0})
                    .core(Kind::kKernel, format::kTimesNs, ~uint64_t{0}, ~uint64_t{0})}});
  b.end();
  b.write(dir.file("ticks.sst"));
  TraceReader r(dir.file("ticks.sst"));
  Event e;
  BOOST_REQUIRE(r.next(e));
  BOOST_TEST(e.ts_ns == int64_t{1} << 61);
  BOOST_TEST(e.dur_ns == int64_t{1} << 61);
  BOOST_REQUIRE(r.next(e));
  BOOST_TEST(e.ts_ns == -1);  // all ones as int64
  BOOST_TEST(e.dur_ns == int64_t{1} << 61);
  BOOST_TEST(!r.next(e));
  BOOST_TEST(has_warning(r, "implausible tsc_hz 1"));
  BOOST_TEST(has_warning(r, "clamped"));
}

BOOST_AUTO_TEST_CASE(random_bit_flips_give_an_error_or_a_warning_never_a_crash) {
  TempDir dir;
  const auto b = small_file();
  const auto base = b.bytes();
  std::mt19937_64 rng(1234);
  const std::string path = dir.file("flip.sst");
  size_t most = 0;  // core records that could fit in the events payloads
  for (const auto& c : b.chunks())
    if (c.type == static_cast<uint16_t>(format::ChunkType::kEvents))
      most += (c.end - c.offset - 48) / 32;
  size_t errors = 0, survived = 0;
  for (int i = 0; i < 1500; ++i) {
    auto bytes = base;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f)
      bytes[rng() % bytes.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
    if (i % 2 == 0) {  // re-seal chunk CRCs so record-level checks run
      for (const auto& c : b.chunks()) {
        const uint32_t crc = crc32_of(bytes.data() + c.offset + 48, c.end - c.offset - 48);
        std::memcpy(bytes.data() + c.offset + 12, &crc, 4);
      }
    }
    TraceBuilder::write_bytes(path, bytes);
    TraceReader r(path);
    const size_t n = count_events(r);
    BOOST_TEST(n <= most);
    if (r.status() == Status::kError) {
      ++errors;
      BOOST_TEST(r.error().find(path) == 0u);
    } else {
      ++survived;
    }
  }
  // Both outcomes occur: the checks are reached, not bypassed.
  BOOST_TEST(errors > 100u);
  BOOST_TEST(survived > 10u);
}

BOOST_AUTO_TEST_SUITE_END()
