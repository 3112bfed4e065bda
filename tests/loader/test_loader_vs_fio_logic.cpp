// bench/loader_vs_fio's own logic: the /proc/diskstats parser, the ABBA
// order, the validity of a row against its fio reference, the cache flag.
#define BOOST_TEST_MODULE loader_vs_fio_logic
#include <boost/test/unit_test.hpp>

#include "../bench/loader_vs_fio_logic.hpp"

namespace sb = stallscope::bench;

namespace {
const char* kStats =
    "   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
    " 254       0 vda 229170 14489 60682022 777006 77225 41331 15252488 65245 0 62772 848797 "
    "21080 3 10958080 6234 5659 310\n"
    " 254       1 vda1 11 0 88 5 0 0 0 0 0 4 5\n"
    " 259       0 nvme0n1 5 6 7 8 9 10\n";
}  // namespace

BOOST_AUTO_TEST_CASE(diskstats_picks_the_device_fields) {
  sb::Disk d;
  BOOST_REQUIRE(sb::parse_diskstats(kStats, 254, 0, &d));
  BOOST_TEST(d.reads == 229170u);
  BOOST_TEST(d.sectors == 60682022u);
  BOOST_TEST(d.queue_ms == 848797u);
  BOOST_REQUIRE(sb::parse_diskstats(kStats, 254, 1, &d));  // exactly 14 fields
  BOOST_TEST(d.reads == 11u);
  BOOST_TEST(d.sectors == 88u);
  BOOST_TEST(d.queue_ms == 5u);
}

BOOST_AUTO_TEST_CASE(diskstats_rejects_absent_or_short_lines) {
  sb::Disk d{1, 2, 3};
  BOOST_TEST(!sb::parse_diskstats(kStats, 8, 0, &d));
  BOOST_TEST(!sb::parse_diskstats(kStats, 259, 0, &d));  // too few fields
  BOOST_TEST(!sb::parse_diskstats("", 254, 0, &d));
  BOOST_TEST(d.reads == 1u);  // untouched
}

BOOST_AUTO_TEST_CASE(abba_order_balances_who_reads_first) {
  for (int rounds : {2, 4, 6}) {
    int first = 0;
    for (int i = 0; i < rounds; ++i) first += sb::loader_first(i) ? 1 : 0;
    BOOST_TEST(first * 2 == rounds);
  }
  BOOST_TEST(sb::loader_first(0));
  BOOST_TEST(!sb::loader_first(1));
}

BOOST_AUTO_TEST_CASE(row_invalid_below_80_percent_of_the_reference) {
  BOOST_TEST(sb::row_valid(800, 1000, true));
  BOOST_TEST(!sb::row_valid(799, 1000, true));
  BOOST_TEST(!sb::row_valid(800, 0, true));  // a failed reference is no proof
  BOOST_TEST(sb::row_valid(10, 0, false));
}

BOOST_AUTO_TEST_CASE(a_device_that_slowed_during_the_row_is_judged_by_the_later_reference) {
  BOOST_TEST(sb::row_valid_bracketed(900, 1000, 0, true));   // valid before: no second needed
  BOOST_TEST(sb::row_valid_bracketed(600, 1000, 700, true)); // the device slowed: 600 >= 560
  BOOST_TEST(!sb::row_valid_bracketed(500, 1000, 700, true));  // fio still below the slower one
  BOOST_TEST(!sb::row_valid_bracketed(600, 1000, 0, true));  // a failed second reference
  BOOST_TEST(!sb::row_valid_bracketed(600, 1000, 1200, true));  // the device was not slower
  BOOST_TEST(sb::row_valid_bracketed(10, 0, 0, false));
}

BOOST_AUTO_TEST_CASE(cache_flag_when_delivered_exceeds_device_bytes) {
  const sb::Disk d{10, 2048, 0};  // 1 MiB moved
  BOOST_TEST(!sb::served_from_cache(1 << 20, d));
  BOOST_TEST(sb::served_from_cache(2 << 20, d));
}

// fio's buffers match the loader's: hugetlb pages where THP backs the
// loader's and enough are free, else a row that is not like for like.
BOOST_AUTO_TEST_CASE(fio_buffers_match_the_loaders_pages) {
  const std::string mem_free = "MemTotal: 24683648 kB\nHugePages_Total: 64\nHugePages_Free: 64\n"
                               "Hugepagesize: 2048 kB\n";
  const std::string mem_none = "MemTotal: 24683648 kB\nHugePages_Total: 0\nHugePages_Free: 0\n"
                               "Hugepagesize: 2048 kB\n";
  auto b = sb::fio_buffers("always [madvise] never\n", mem_free, 64ull << 20);
  BOOST_TEST(b.loader_huge);
  BOOST_TEST(b.fio_huge);
  BOOST_TEST(b.like_for_like());
  b = sb::fio_buffers("always [madvise] never\n", mem_free, 129ull << 20);  // 64 pages = 128 MiB
  BOOST_TEST(!b.fio_huge);
  BOOST_TEST(!b.like_for_like());
  b = sb::fio_buffers("[always] madvise never\n", mem_none, 1);
  BOOST_TEST(b.loader_huge);
  BOOST_TEST(!b.like_for_like());
  b = sb::fio_buffers("always madvise [never]\n", mem_free, 1);  // 4 KiB pages on both sides
  BOOST_TEST(!b.loader_huge);
  BOOST_TEST(!b.fio_huge);
  BOOST_TEST(b.like_for_like());
  b = sb::fio_buffers("", "", 1);  // no THP in this kernel
  BOOST_TEST(b.like_for_like());
}

// HUGE_PAGES off: neither side advises, so both get the system's default
// pages and every row compares like for like, reserved pages or not.
BOOST_AUTO_TEST_CASE(unadvised_buffers_are_like_for_like_on_any_machine) {
  const std::string mem_none = "MemTotal: 24683648 kB\nHugePages_Total: 0\nHugePages_Free: 0\n"
                               "Hugepagesize: 2048 kB\n";
  for (const char* thp : {"always [madvise] never\n", "[always] madvise never\n",
                          "always madvise [never]\n", ""}) {
    const auto b = sb::fio_buffers(thp, mem_none, 64ull << 20, false);
    BOOST_TEST(b.like_for_like(), thp);
    BOOST_TEST(!b.fio_shmhuge, thp);
    BOOST_TEST(!b.advised);
  }
  BOOST_TEST(!sb::fio_buffers("always [madvise] never\n", mem_none, 1, false).loader_huge);
  BOOST_TEST(sb::fio_buffers("[always] madvise never\n", mem_none, 1, false).loader_huge);
}
