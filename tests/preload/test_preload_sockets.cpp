// Reads from network sockets are storage reads of the network tier, named
// by the peer (socket_reads.hpp); unix sockets and pipes never are; EAGAIN
// and end of stream record nothing; short reads are summed, not dropped.
// The child (socket_reads.c) checks every byte it got, so the shim is also
// seen not to change what the program reads.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "preload/preload_run.hpp"

using namespace stallscope;
using namespace stallscope::test;

namespace {

std::string peer_of(const RunResult& r) {
  const size_t at = r.out.find("PEER ");
  if (at == std::string::npos) return "";
  return r.out.substr(at + 5, r.out.find('\n', at) - at - 5);
}

struct Reads {
  std::vector<Ev> all;     // every storage read of the run
  std::vector<Ev> named;   // those named `peer`
  uint64_t bytes = 0;      // of `named`
};

Reads reads_of(const RunTrace& t, const std::string& peer) {
  Reads r;
  r.all = t.of_kind(format::Kind::kStorageRead);
  for (const Ev& e : r.all) {
    if (e.name != peer) continue;
    r.named.push_back(e);
    r.bytes += e.io.bytes;
  }
  return r;
}

RunResult run_child(const TempDir& dir, const std::vector<std::string>& args,
                    std::map<std::string, std::string> env = {},
                    const std::string& binary = "socket_reads") {
  std::vector<std::string> argv{helper(binary)};
  argv.insert(argv.end(), args.begin(), args.end());
  env.emplace("STALLSCOPE_OUT", dir / "run");
  return run(argv, env);
}

void check_tcp(const std::string& binary) {
  TempDir dir;
  constexpr uint64_t kBytes = 3u << 20;
  const RunResult r = run_child(dir, {"tcp", std::to_string(kBytes)}, {}, binary);
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(r.value("GOT") == static_cast<long long>(kBytes));
  const std::string peer = peer_of(r);
  BOOST_TEST_REQUIRE(peer.rfind("tcp:127.0.0.1:", 0) == 0u, r.out);
  const Reads reads = reads_of(load_run(dir / "run"), peer);
  BOOST_TEST(reads.bytes == kBytes);
  BOOST_TEST(reads.named.size() == reads.all.size());  // nothing else is storage here
  uint64_t offset = 0;
  for (const Ev& e : reads.named) {
    BOOST_TEST(e.io.tier == uint8_t(format::Tier::kNetwork));
    BOOST_TEST(e.io.cache == uint8_t(format::Cache::kMiss));
    BOOST_TEST(e.io.cache_method == uint8_t(format::CacheMethod::kTier));
    BOOST_TEST(e.io.bytes > 0u);
    BOOST_TEST(e.dur_ns >= 0);
    BOOST_TEST(e.io.offset == offset);  // bytes received before, in stream order
    offset += e.io.bytes;
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(preload_sockets)

BOOST_AUTO_TEST_CASE(tcp_reads_are_network_storage_with_every_byte_and_the_peer) {
  check_tcp("socket_reads");
}

BOOST_AUTO_TEST_CASE(fortified_receives_are_recorded_too) { check_tcp("socket_reads_fortify"); }

BOOST_AUTO_TEST_CASE(udp_datagrams_are_network_storage) {
  TempDir dir;
  const RunResult r = run_child(dir, {"udp", "50"});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const std::string peer = peer_of(r);
  BOOST_TEST_REQUIRE(peer.rfind("udp:127.0.0.1:", 0) == 0u, r.out);
  const Reads reads = reads_of(load_run(dir / "run"), peer);
  BOOST_TEST(reads.bytes == 50u * 1000u);
}

BOOST_AUTO_TEST_CASE(unix_sockets_and_pipes_are_never_storage) {
  TempDir dir;
  const RunResult r = run_child(dir, {"local", std::to_string(2u << 20)});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(r.out.find("GOT 2097152\nGOT 2097152\nGOT 2097152\n") != std::string::npos, r.out);
  const RunTrace t = load_run(dir / "run");
  BOOST_TEST_REQUIRE(!t.events.empty());  // the run was traced
  BOOST_TEST(t.of_kind(format::Kind::kStorageRead).size() == 0u);
}

BOOST_AUTO_TEST_CASE(eagain_records_nothing_and_keeps_errno) {
  TempDir dir;
  constexpr long kPolls = 30000;
  constexpr uint64_t kBytes = 100000;
  const RunResult r = run_child(dir, {"eagain", std::to_string(kPolls), std::to_string(kBytes)});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(r.value("EAGAIN") == kPolls);  // every poll saw EAGAIN in errno
  BOOST_TEST(r.value("GOT") == static_cast<long long>(kBytes));
  const Reads reads = reads_of(load_run(dir / "run"), peer_of(r));
  BOOST_TEST(reads.bytes == kBytes);
  // Only the reads that returned bytes, and not one event per EAGAIN.
  BOOST_TEST(reads.named.size() >= 1u);
  BOOST_TEST(static_cast<long long>(reads.named.size()) <= r.value("READS"));
  for (const Ev& e : reads.named) BOOST_TEST(e.io.bytes > 0u);
}

BOOST_AUTO_TEST_CASE(a_read_lasts_its_call_or_the_poll_right_before_it) {
  TempDir dir;
  const RunResult r = run_child(dir, {"latency"});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const Reads reads = reads_of(load_run(dir / "run"), peer_of(r));
  BOOST_TEST(reads.bytes == 2000u);
  // The server waits 100 ms before each message: the blocking recv waits
  // in the call, the second message in the poll before its recv. Each
  // message's longest read lasts about as long as the program saw its wait
  // last (on a busy machine, less than the 100 ms).
  int64_t longest[2] = {0, 0};
  for (const Ev& e : reads.named) {
    int64_t& l = longest[e.io.offset < 1000 ? 0 : 1];
    l = std::max(l, e.dur_ns);
  }
  const int64_t wait1 = r.value("WAIT1_US") * 1000, wait2 = r.value("WAIT2_US") * 1000;
  BOOST_TEST_REQUIRE(wait1 > 0);
  BOOST_TEST(longest[0] >= wait1 / 2, longest[0] << " ns of " << wait1);
  BOOST_TEST(longest[0] <= wait1);
  // A poll counts for the read that follows it within 10 ms.
  if (r.value("GAP_US") < 5000) {
    BOOST_TEST(longest[1] >= wait2 / 2, longest[1] << " ns of " << wait2);
    BOOST_TEST(longest[1] <= wait2);
  } else {
    BOOST_TEST_MESSAGE("the recv came " << r.value("GAP_US") << " us after the poll: not checked");
  }
}

BOOST_AUTO_TEST_CASE(short_reads_are_summed_not_one_event_each) {
  TempDir dir;
  constexpr uint64_t kBytes = 100000;
  // One record per 100 us of reading: a 1-byte recv takes about 1 us, so
  // even ten times slower on a busy machine there are 10 reads per record.
  const RunResult r = run_child(dir, {"tiny", std::to_string(kBytes)},
                                {{"STALLSCOPE_PRELOAD_SOCKET_MIN_US", "100"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(r.value("GOT") == static_cast<long long>(kBytes));
  const Reads reads = reads_of(load_run(dir / "run"), peer_of(r));
  BOOST_TEST(reads.bytes == kBytes);  // summed at close, none lost
  BOOST_TEST(reads.named.size() * 10 < kBytes, "events: " << reads.named.size());
  uint64_t offset = 0;  // in stream order, each where its first byte was
  for (const Ev& e : reads.named) {
    BOOST_TEST(e.io.offset == offset);
    offset += e.io.bytes;
  }
}

BOOST_AUTO_TEST_CASE(every_read_is_an_event_with_no_minimum) {
  TempDir dir;
  constexpr uint64_t kBytes = 2000;
  const RunResult r =
      run_child(dir, {"tiny", std::to_string(kBytes)}, {{"STALLSCOPE_PRELOAD_SOCKET_MIN_US", "0"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const Reads reads = reads_of(load_run(dir / "run"), peer_of(r));
  BOOST_TEST(reads.named.size() == kBytes);
}

BOOST_AUTO_TEST_CASE(sockets_off_records_none) {
  TempDir dir;
  const RunResult r = run_child(dir, {"tcp", "100000"}, {{"STALLSCOPE_PRELOAD_SOCKETS", "off"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  const RunTrace t = load_run(dir / "run");
  BOOST_TEST_REQUIRE(!t.events.empty());
  BOOST_TEST(t.of_kind(format::Kind::kStorageRead).size() == 0u);
}

BOOST_AUTO_TEST_CASE(a_bad_sockets_value_is_named_and_the_default_kept) {
  TempDir dir;
  const RunResult r = run_child(dir, {"tcp", "100000"}, {{"STALLSCOPE_PRELOAD_SOCKETS", "maybe"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(r.err.find("STALLSCOPE_PRELOAD_SOCKETS='maybe': not on or off") != std::string::npos,
             r.err);
  BOOST_TEST(reads_of(load_run(dir / "run"), peer_of(r)).bytes == 100000u);
}

BOOST_AUTO_TEST_CASE(nothing_is_recorded_when_tracing_is_off) {
  TempDir dir;
  const RunResult r = run_child(dir, {"tcp", "100000"}, {{"STALLSCOPE_ENABLE", "0"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.err);
  BOOST_TEST(r.value("GOT") == 100000);
  BOOST_TEST(load_run(dir / "run").of_kind(format::Kind::kStorageRead).size() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
