// White-box: the /proc/self/maps parser and address lookup the page-fault
// sampler resolves faulting addresses with.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include <boost/test/unit_test.hpp>

#include "proc_maps.hpp"

using namespace stallscope::preload;

namespace {

const char* kMaps =
    "55d0c0a00000-55d0c0a28000 r--p 00000000 fd:01 1183 /usr/bin/python3.11\n"
    "55d0c0a28000-55d0c0d1c000 r-xp 00028000 fd:01 1183 /usr/bin/python3.11\n"
    "55d0c2000000-55d0c2400000 rw-p 00000000 00:00 0 [heap]\n"
    "7f0000000000-7f0000100000 r--s 00200000 fd:01 4242 /data/my dataset/train.arrow\n"
    "7f0000100000-7f0000200000 rw-p 00000000 00:00 0 \n"
    "7f0000200000-7f0000201000 r--p 00000000 fd:01 77 /tmp/gone.bin (deleted)\n"
    "garbage line\n"
    "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n";

}  // namespace

BOOST_AUTO_TEST_SUITE(proc_maps)

BOOST_AUTO_TEST_CASE(parses_ranges_offsets_paths_and_skips_bad_lines) {
  const auto maps = parse_maps(kMaps);
  BOOST_REQUIRE_EQUAL(maps.size(), 7u);
  BOOST_CHECK_EQUAL(maps[0].path, "/usr/bin/python3.11");
  BOOST_CHECK(!maps[0].exec);
  BOOST_CHECK(maps[1].exec);
  BOOST_CHECK_EQUAL(maps[1].offset, 0x28000u);
  BOOST_CHECK_EQUAL(maps[2].path, "");                              // [heap] is anonymous
  BOOST_CHECK_EQUAL(maps[3].path, "/data/my dataset/train.arrow");  // spaces kept
  BOOST_CHECK_EQUAL(maps[3].start, 0x7f0000000000u);
  BOOST_CHECK_EQUAL(maps[3].end, 0x7f0000100000u);
  BOOST_CHECK_EQUAL(maps[3].offset, 0x200000u);
  BOOST_CHECK_EQUAL(maps[4].path, "");
  BOOST_CHECK_EQUAL(maps[5].path, "/tmp/gone.bin");  // " (deleted)" dropped
  BOOST_CHECK_EQUAL(maps[6].path, "");               // [stack]
}

BOOST_AUTO_TEST_CASE(finds_the_mapping_holding_an_address_and_nothing_between) {
  const auto maps = parse_maps(kMaps);
  const Mapping* m = find_mapping(maps, 0x7f0000000000u + 5 * 4096 + 17);
  BOOST_REQUIRE(m != nullptr);
  BOOST_CHECK_EQUAL(m->path, "/data/my dataset/train.arrow");
  BOOST_CHECK(find_mapping(maps, 0x7f00000fffffu) == m);        // last byte
  BOOST_CHECK(find_mapping(maps, 0x7f0000100000u) != m);        // end is excluded
  BOOST_CHECK(find_mapping(maps, 0x1000u) == nullptr);          // below every mapping
  BOOST_CHECK(find_mapping(maps, 0x55d0c1000000u) == nullptr);  // a hole
  BOOST_CHECK(find_mapping(maps, ~0ull) == nullptr);
}

BOOST_AUTO_TEST_CASE(reads_its_own_maps_and_finds_a_file_it_mapped) {
  char path[] = "/tmp/stallscope-maps-XXXXXX";
  const int fd = ::mkstemp(path);
  BOOST_REQUIRE(fd >= 0);
  BOOST_REQUIRE_EQUAL(::ftruncate(fd, 8192), 0);
  void* p = ::mmap(nullptr, 8192, PROT_READ, MAP_SHARED, fd, 4096);
  BOOST_REQUIRE(p != MAP_FAILED);
  std::string text;
  BOOST_REQUIRE(read_self_maps(&text));
  const auto maps = parse_maps(text);
  const Mapping* m = find_mapping(maps, reinterpret_cast<uint64_t>(p) + 100);
  BOOST_REQUIRE(m != nullptr);
  BOOST_CHECK_EQUAL(m->path, path);
  BOOST_CHECK_EQUAL(m->offset, 4096u);
  ::munmap(p, 8192);
  ::close(fd);
  ::unlink(path);
}

BOOST_AUTO_TEST_SUITE_END()
