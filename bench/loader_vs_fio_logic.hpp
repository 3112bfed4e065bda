// The pieces of loader_vs_fio's method that can be checked without a disk
// (tests/loader/test_loader_vs_fio_logic.cpp): the /proc/diskstats parser,
// the ABBA order, a row's validity against its fio reference and what
// fio's buffers must be to match the loader's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>

namespace stallscope::bench {

// /proc/diskstats counters of one block device.
struct Disk {
  uint64_t reads = 0, sectors = 0, queue_ms = 0;
};

// The line of `major:minor` in /proc/diskstats text: fields 4, 6 and 14
// (reads completed, sectors read, weighted ms in queue). false if absent
// or shorter than 14 fields.
inline bool parse_diskstats(const std::string& text, unsigned major, unsigned minor, Disk* out) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    unsigned ma = 0, mi = 0;
    std::string name;
    uint64_t f[11] = {};
    if (!(l >> ma >> mi >> name)) continue;
    int n = 0;
    while (n < 11 && (l >> f[n])) ++n;
    if (ma != major || mi != minor || n < 11) continue;
    *out = {f[0], f[2], f[10]};
    return true;
  }
  return false;
}

// ABBA over an even number of rounds: round i runs the loader first when
// i is even (LF FL LF FL ...).
inline bool loader_first(int round) { return round % 2 == 0; }

// A row is valid when its compared fio reached >= 80 % of the reference
// (a separate, longer fio run of the row's shape); no reference: valid.
inline bool row_valid(double fio_mb_s, double ref_mb_s, bool have_ref) {
  return !have_ref || (ref_mb_s > 0 && fio_mb_s >= 0.8 * ref_mb_s);
}

// A row whose fio fell below 80 % of the reference taken before it gets a
// second reference after it: a device that slowed down during the row (a
// virtual disk drifts by 2x within a minute) slowed both sides, which the
// ABBA order compares fairly, and the row is valid against the slower of
// the two references. A second reference that failed (0) proves nothing.
inline bool row_valid_bracketed(double fio_mb_s, double ref_before, double ref_after,
                                bool have_ref) {
  if (row_valid(fio_mb_s, ref_before, have_ref)) return true;
  return have_ref && ref_after > 0 && row_valid(fio_mb_s, std::min(ref_before, ref_after), true);
}

// A side was served (partly) from a cache when it delivered more than 5 %
// more bytes than the device moved meanwhile.
inline bool served_from_cache(double delivered_bytes, const Disk& d) {
  return delivered_bytes > 1.05 * double(d.sectors) * 512;
}

// What fio's buffers must be for a like-for-like row. With HUGE_PAGES on
// (`advised`) the loader's buffers are 2 MiB-aligned and
// madvise(MADV_HUGEPAGE)d: with THP in "always" or "madvise" mode they are
// huge pages, and O_DIRECT reads into them go to the device as one segment
// per page, not one per 4 KiB (on a virtio disk, several times the
// throughput). fio's malloc'd buffers get the system's default pages;
// --iomem=shmhuge puts them in hugetlb pages, which must be reserved
// (vm.nr_hugepages). With HUGE_PAGES off the loader's buffers are not
// advised either: both sides get the system's default pages (4 KiB, or
// THP where it is "always" for both), like for like on any machine.
struct FioBuffers {
  bool advised = true;       // the loader runs with HUGE_PAGES on
  bool loader_huge = false;  // THP would back the loader's buffers
  bool fio_huge = false;     // fio's buffers on huge pages (see fio_shmhuge)
  bool fio_shmhuge = false;  // enough free hugetlb pages: --iomem=shmhuge
  bool like_for_like() const noexcept { return loader_huge == fio_huge; }
};

// From /sys/kernel/mm/transparent_hugepage/enabled ("always [madvise]
// never"), /proc/meminfo and the bytes fio's largest job needs.
inline FioBuffers fio_buffers(const std::string& thp_enabled, const std::string& meminfo,
                              uint64_t need_bytes, bool advised = true) {
  FioBuffers b;
  b.advised = advised;
  const bool always = thp_enabled.find("[always]") != std::string::npos;
  if (!advised) {  // neither side asks: the same default pages on both
    b.loader_huge = b.fio_huge = always;
    return b;
  }
  b.loader_huge = always || thp_enabled.find("[madvise]") != std::string::npos;
  uint64_t free_pages = 0, page_kb = 0;
  std::istringstream in(meminfo);
  std::string key;
  uint64_t v = 0;
  while (in >> key >> v) {
    if (key == "HugePages_Free:") free_pages = v;
    if (key == "Hugepagesize:") page_kb = v;
    in.ignore(256, '\n');
  }
  b.fio_huge = b.fio_shmhuge = b.loader_huge && free_pages * page_kb * 1024 >= need_bytes;
  return b;
}

}  // namespace stallscope::bench
