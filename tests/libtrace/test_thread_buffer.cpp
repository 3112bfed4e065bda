// White-box tests of the per-thread ring: whole records, wrap-around,
// drops counted exactly and announced by a gap record.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <thread>

#include "stallscope/internal/thread_buffer.hpp"

using stallscope::detail::count_records;
using stallscope::detail::RecordCounts;
using stallscope::detail::ThreadBuffer;
using stallscope::format::CoreRecord;
using stallscope::format::Kind;

namespace {
CoreRecord rec(uint64_t i) {
  return CoreRecord{static_cast<uint8_t>(Kind::kRange), 0, 0, 1, i, 1, i};
}
}  // namespace

BOOST_AUTO_TEST_SUITE(thread_buffer)

BOOST_AUTO_TEST_CASE(drains_whole_records_in_order_across_wraparound) {
  ThreadBuffer b(1, 64 << 10);
  std::vector<uint8_t> out;
  uint64_t next = 0, seen = 0;
  for (int round = 0; round < 50; ++round) {  // ~3 laps of the ring
    for (int i = 0; i < 100; ++i) BOOST_REQUIRE(b.write(rec(next++), nullptr, 0));
    out.clear();
    b.drain(out, ~size_t{0});
    BOOST_REQUIRE_EQUAL(out.size() % sizeof(CoreRecord), 0u);
    for (size_t off = 0; off < out.size(); off += sizeof(CoreRecord)) {
      CoreRecord r;
      std::memcpy(&r, out.data() + off, sizeof r);
      BOOST_REQUIRE_EQUAL(r.ts, seen++);
    }
  }
  BOOST_TEST(seen == next);
  BOOST_TEST(b.dropped() == 0u);
}

BOOST_AUTO_TEST_CASE(drops_and_counts_when_full_then_writes_a_gap) {
  ThreadBuffer b(1, 64 << 10);
  const size_t fit = (64 << 10) / sizeof(CoreRecord);
  size_t ok = 0;
  for (size_t i = 0; i < fit + 500; ++i) ok += b.write(rec(i), nullptr, 0) ? 1 : 0;
  BOOST_TEST(ok == fit);
  BOOST_TEST(b.dropped() == 500u);
  std::vector<uint8_t> out;
  b.drain(out, ~size_t{0});
  BOOST_REQUIRE(b.write(rec(99999), nullptr, 0));
  out.clear();
  b.drain(out, ~size_t{0});
  RecordCounts c;
  BOOST_REQUIRE(count_records(out.data(), out.size(), c));
  BOOST_TEST(c.events == 1u);
  BOOST_TEST(c.gap_dropped == 500u);
  CoreRecord gap;
  std::memcpy(&gap, out.data(), sizeof gap);
  BOOST_TEST(gap.kind == static_cast<uint8_t>(Kind::kGap));
  BOOST_TEST(gap.ts == fit);  // the time of the first event dropped
}

BOOST_AUTO_TEST_CASE(keeps_an_event_and_its_extensions_together) {
  ThreadBuffer b(1, 64 << 10);
  alignas(8) uint8_t ext[24] = {};
  ext[0] = 0x83;
  ext[2] = 24;
  size_t ok = 0, tries = 0;
  while (b.write(rec(tries), ext, sizeof ext)) ++ok, ++tries;
  std::vector<uint8_t> out;
  b.drain(out, 1000);  // a partial drain must stop at a record boundary
  BOOST_TEST(out.size() % 56 == 0u);
  b.drain(out, ~size_t{0});
  RecordCounts c;
  BOOST_REQUIRE(count_records(out.data(), out.size(), c));
  BOOST_TEST(c.events == ok);
}

namespace {
int g_wakes = 0;
void count_wake() noexcept { ++g_wakes; }
}  // namespace

// Past half full the fast paths decline and write() takes over; it asks for
// a drain once, and again only after the ring was below half in between.
BOOST_AUTO_TEST_CASE(passing_half_full_wakes_the_flusher_once) {
  g_wakes = 0;
  stallscope::detail::g_half_full_hook = &count_wake;
  ThreadBuffer b(1, 4096);
  uint64_t i = 0;
  const auto put = [&] {
    const bool ok = b.write_complete(4, 1, i, 1, i);
    ++i;
    return ok;
  };
  while (b.pending_bytes() + 32 <= 2048) BOOST_REQUIRE(put());
  BOOST_TEST(g_wakes == 0);
  for (int k = 0; k < 20; ++k) BOOST_REQUIRE(put());  // past half
  BOOST_TEST(g_wakes == 1);  // once, not per record
  std::vector<uint8_t> out;
  b.drain(out, ~size_t{0});
  while (b.pending_bytes() + 32 <= 2048) BOOST_REQUIRE(put());
  BOOST_REQUIRE(put());
  BOOST_REQUIRE(put());
  BOOST_TEST(g_wakes == 2);  // below half in between: asked again
  stallscope::detail::g_half_full_hook = nullptr;
}

BOOST_AUTO_TEST_CASE(fixed_size_fast_path_leaves_wraps_gaps_and_full_rings_to_write) {
  // 88-byte records (core + 56 bytes of extension, a storage read's size) in
  // a 4 KiB ring: the 47th would wrap, so the fast path declines it.
  ThreadBuffer b(1, 4096);
  alignas(8) uint8_t ext[56] = {};
  ext[0] = 0x80;
  ext[2] = 56;
  const auto put = [&](uint64_t i) {
    std::memcpy(ext + 8, &i, sizeof i);
    return b.try_write_fixed<56>(rec(i), ext) || b.write(rec(i), ext, sizeof ext);
  };
  uint64_t i = 0;
  while (b.try_write_fixed<56>(rec(i), (std::memcpy(ext + 8, &i, 8), ext))) ++i;
  BOOST_TEST(i == 2048u / 88u);  // the fast path stops at half full
  std::vector<uint8_t> out;
  b.drain(out, ~size_t{0});
  BOOST_REQUIRE(put(i++));  // write() sees the drained ring (the fast path trusts its cached tail)
  while (b.try_write_fixed<56>(rec(i), (std::memcpy(ext + 8, &i, 8), ext))) ++i;
  BOOST_TEST(i == 4096u / 88u);  // declined at the wrap, with room left...
  BOOST_TEST(b.pending_bytes() == (i - 2048u / 88u) * 88u);
  b.drain(out, ~size_t{0});
  BOOST_REQUIRE(put(i++));  // ...which write() takes, across the end
  while (put(i)) ++i;       // then full: dropped and counted
  BOOST_TEST(b.dropped() == 1u);
  b.drain(out, ~size_t{0});
  BOOST_TEST(!b.try_write_fixed<56>(rec(i), ext));  // a gap to announce first
  BOOST_REQUIRE(put(i + 1));
  b.drain(out, ~size_t{0});
  RecordCounts c;
  BOOST_REQUIRE(count_records(out.data(), out.size(), c));
  BOOST_TEST(c.events == i + 1);
  BOOST_TEST(c.gap_dropped == 1u);
  uint64_t expect = 0;  // every record whole and in order, its extension with it
  for (size_t off = 0; off < out.size();) {
    CoreRecord r;
    std::memcpy(&r, out.data() + off, sizeof r);
    off += sizeof r;
    if (r.kind == static_cast<uint8_t>(Kind::kGap)) {
      expect = i + 1;
      continue;
    }
    uint64_t carried;
    std::memcpy(&carried, out.data() + off + 8, sizeof carried);
    BOOST_TEST(r.ts == expect);
    BOOST_TEST(carried == expect);
    off += sizeof ext;
    ++expect;
  }
  BOOST_TEST(expect == i + 2);
}

BOOST_AUTO_TEST_CASE(producer_and_consumer_threads_lose_nothing) {
  ThreadBuffer b(1, 64 << 10);
  constexpr uint64_t kN = 2000000;
  std::atomic<bool> done{false};
  uint64_t issued_ok = 0;
  std::thread producer([&] {
    for (uint64_t i = 0; i < kN; ++i) issued_ok += b.write(rec(i), nullptr, 0) ? 1 : 0;
    done = true;
  });
  std::vector<uint8_t> out;
  RecordCounts c;
  uint64_t last = 0;
  bool ordered = true;
  while (!done || b.pending_bytes() != 0) {
    out.clear();
    b.drain(out, ~size_t{0});
    BOOST_REQUIRE(count_records(out.data(), out.size(), c));
    for (size_t off = 0; off < out.size(); off += sizeof(CoreRecord)) {
      CoreRecord r;
      std::memcpy(&r, out.data() + off, sizeof r);
      if (r.kind == static_cast<uint8_t>(Kind::kGap)) continue;
      ordered = ordered && (last == 0 || r.ts > last);
      last = r.ts;
    }
  }
  producer.join();
  BOOST_TEST(ordered);
  BOOST_TEST(c.events == issued_ok);
  BOOST_TEST(c.events + b.dropped() == kN);
}

BOOST_AUTO_TEST_CASE(rejects_malformed_blocks) {
  uint8_t junk[40] = {};
  junk[0] = 0x80;
  junk[2] = 4;  // extension shorter than its header
  RecordCounts c;
  BOOST_TEST(!count_records(junk, sizeof junk, c));
  BOOST_TEST(!count_records(junk + 8, 20, c));  // a truncated core record
}

BOOST_AUTO_TEST_SUITE_END()
