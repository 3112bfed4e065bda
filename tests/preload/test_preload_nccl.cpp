// NCCL interposition: nccl_caller, linked against a stand-in libnccl.so.2,
// makes known calls under the shim. Each successful collective or p2p call
// is one `collective` event on the calling thread with its op, bytes,
// communicator, rank, size and per-communicator sequence number; a failing
// call is not recorded; when stallscope's NCCL profiler plugin is active the
// calls are flagged join-only; the program's output is the same with and
// without the shim.
#include <algorithm>
#include <map>

#include <boost/test/unit_test.hpp>

#include "preload/preload_run.hpp"

using namespace stallscope;
using namespace stallscope::test;

namespace {

struct Coll {
  std::string name;
  format::TrackType track = format::TrackType::kThread;
  int64_t ts_ns = 0, dur_ns = 0;
  format::CollectiveExt c{};
  format::CollOp op() const { return static_cast<format::CollOp>(c.h.aux & 0xff); }
  uint32_t dtype() const { return c.h.aux >> 8; }
};

std::vector<Coll> collectives(const std::string& dir) {
  std::vector<Coll> out;
  std::string error;
  for (const std::string& f : reader::list_trace_files(dir, &error)) {
    reader::TraceReader r(f);
    reader::Event e;
    while (r.next(e)) {
      if (e.kind_enum() != format::Kind::kCollective) continue;
      BOOST_TEST_REQUIRE(e.has(format::Ext::kCollective));
      Coll c{std::string(r.string(e.name_id)), format::TrackType::kThread, e.ts_ns, e.dur_ns,
             e.collective};
      if (const reader::TrackInfo* t = r.track(e.track_id)) c.track = t->type;
      out.push_back(c);
    }
  }
  std::sort(out.begin(), out.end(), [](const Coll& a, const Coll& b) { return a.ts_ns < b.ts_ns; });
  return out;
}

std::vector<std::string> caller() { return {helper("nccl_caller")}; }

// What nccl_caller prints with the fake's default version (2.18.5): every
// successful call returned 0, the failing one ncclInvalidArgument (4); errno
// after a successful and after the failing call is the fake's ENOENT (2);
// the third communicator took the first one's address.
const char kExpectedOut[] = "version 21805\nok_results 0\nfailed_result 4\nerrno 2 2\nreused 1\n";

}  // namespace

BOOST_AUTO_TEST_SUITE(preload_nccl)

BOOST_AUTO_TEST_CASE(records_each_successful_call_with_op_bytes_comm_and_sequence) {
  TempDir dir;
  const RunResult r = run(caller(), {{"STALLSCOPE_OUT", dir / "run"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
  BOOST_TEST(r.out == kExpectedOut);
  BOOST_TEST(r.err.find("NCCL 2.18.5 calls interposed") != std::string::npos, r.err);

  const std::vector<Coll> all = collectives(dir / "run");
  // 10 + 3 + send + recv + 3 + 1 + 1; not the failing call.
  BOOST_TEST_REQUIRE(all.size() == 20u);
  std::map<uint64_t, std::vector<const Coll*>> by_comm;
  for (const Coll& c : all) by_comm[c.c.comm_id].push_back(&c);
  // C, at A's old address after A was destroyed, is a communicator of its
  // own: a new id, a sequence from 0, its own rank and size. So is D.
  BOOST_TEST_REQUIRE(by_comm.size() == 4u);
  const Coll& on_c = all[18];
  BOOST_TEST(by_comm[on_c.c.comm_id].size() == 1u);
  BOOST_TEST(on_c.c.seq == 0u);
  BOOST_TEST((on_c.c.rank == 5 && on_c.c.nranks == 8));
  BOOST_TEST(on_c.c.bytes == 4u);
  const Coll& on_d = all[19];
  BOOST_TEST(on_d.c.comm_id != on_c.c.comm_id);
  BOOST_TEST(on_d.c.seq == 0u);
  BOOST_TEST((on_d.c.rank == 0 && on_d.c.nranks == 4));
  for (const auto& [id, calls] : by_comm) {
    for (size_t i = 0; i < calls.size(); ++i) BOOST_TEST(calls[i]->c.seq == i);
  }
  // Communicator A: rank 2 of 4; B: rank 1 of 2.
  const std::vector<const Coll*>& a = by_comm[all.front().c.comm_id];
  const std::vector<const Coll*>& b = by_comm[all[10].c.comm_id];
  BOOST_TEST_REQUIRE(a.size() == 13u);
  BOOST_TEST_REQUIRE(b.size() == 5u);
  for (const Coll* c : a) BOOST_TEST((c->c.rank == 2 && c->c.nranks == 4));
  for (const Coll* c : b) BOOST_TEST((c->c.rank == 1 && c->c.nranks == 2));

  using format::CollOp;
  struct Want {
    CollOp op;
    const char* name;
    uint64_t bytes;
    uint32_t dtype;
    int32_t peer;
  };
  std::vector<Want> want(10, {CollOp::kAllReduce, "ncclAllReduce", 4u << 20, 7, -1});
  for (int i = 0; i < 3; ++i) want.push_back({CollOp::kBroadcast, "ncclBroadcast", 256, 1, -1});
  want.push_back({CollOp::kSend, "ncclSend", 2000, 6, 0});
  want.push_back({CollOp::kRecv, "ncclRecv", 2000, 6, 0});
  want.push_back({CollOp::kAllGather, "ncclAllGather", 512, 4, -1});
  want.push_back({CollOp::kReduceScatter, "ncclReduceScatter", 256, 8, -1});
  want.push_back({CollOp::kReduce, "ncclReduce", 64, 2, -1});
  for (size_t i = 0; i < want.size(); ++i) {
    BOOST_TEST_CONTEXT("call " << i) {
      BOOST_TEST((all[i].op() == want[i].op));
      BOOST_TEST(all[i].name == want[i].name);
      BOOST_TEST(all[i].c.bytes == want[i].bytes);
      BOOST_TEST(all[i].dtype() == want[i].dtype);
      BOOST_TEST(all[i].c.peer == want[i].peer);
      // A host-side span of the call (the fake sleeps 200 µs in each),
      // flagged as the enqueue it is.
      BOOST_TEST((all[i].track == format::TrackType::kThread));
      BOOST_TEST((all[i].c.flags & format::kCollEnqueued) != 0u);
      BOOST_TEST(all[i].dur_ns >= 150000);
    }
  }
}

// Two processes of one job: every communicator has the same id in both
// (from its unique id, or its parent's for a split), whatever address
// NCCL gave it in each.
BOOST_AUTO_TEST_CASE(communicator_ids_are_the_same_in_every_rank) {
  std::vector<uint64_t> ids[2];
  for (auto& v : ids) {
    TempDir dir;
    const RunResult r = run(caller(), {{"STALLSCOPE_OUT", dir / "run"}});
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
    for (const Coll& c : collectives(dir / "run"))
      if (std::find(v.begin(), v.end(), c.c.comm_id) == v.end()) v.push_back(c.c.comm_id);
  }
  BOOST_TEST(ids[0].size() == 4u);
  BOOST_TEST(ids[0] == ids[1]);
}

BOOST_AUTO_TEST_CASE(program_output_and_status_are_the_same_without_the_shim) {
  TempDir dir;
  const RunResult plain = run(caller(), {}, false);
  const RunResult traced = run(caller(), {{"STALLSCOPE_OUT", dir / "run"}});
  BOOST_TEST(plain.exit_code == 0);
  BOOST_TEST(plain.out == kExpectedOut);
  BOOST_TEST(traced.exit_code == plain.exit_code);
  BOOST_TEST(traced.out == plain.out);
}

// Once the plugin records the collectives, the calls are kept only to tie
// the NCCL kernels to them: every one flagged join-only, with its identity.
bool all_join_only(const std::vector<Coll>& all) {
  for (const Coll& c : all)
    if ((c.c.flags & format::kCollJoinOnly) == 0 || (c.c.flags & format::kCollEnqueued) == 0)
      return false;
  return true;
}

BOOST_AUTO_TEST_CASE(calls_are_join_only_once_the_profiler_plugin_announces_itself) {
  TempDir dir;
  const RunResult r = run(caller(), {{"STALLSCOPE_OUT", dir / "run"},
                                     {"FAKE_NCCL_VERSION", "22809"},
                                     {"FAKE_NCCL_ANNOUNCE", "1"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
  BOOST_TEST(r.err.find("NCCL profiler plugin v6 active: interposed NCCL calls kept only to tie "
                        "NCCL kernels to their calls") != std::string::npos,
             r.err);
  BOOST_TEST(r.err.find("calls interposed") == std::string::npos, r.err);
  const std::vector<Coll> all = collectives(dir / "run");
  BOOST_TEST(all.size() == 20u);
  BOOST_TEST(all_join_only(all));
}

#ifdef STALLSCOPE_TEST_HAVE_CUDA_LIB
// End to end: the shim sets NCCL_PROFILER_PLUGIN to libstallscope_cuda.so
// next to it; the fake, reporting NCCL 2.28.9, loads it as NCCL does, and
// the plugin tells the shim.
BOOST_AUTO_TEST_CASE(calls_are_join_only_when_nccl_loads_stallscopes_plugin) {
  TempDir dir;
  const RunResult r =
      run(caller(), {{"STALLSCOPE_OUT", dir / "run"}, {"FAKE_NCCL_VERSION", "22809"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
  BOOST_TEST(r.err.find("NCCL profiler plugin v6 loaded") != std::string::npos, r.err);
  BOOST_TEST(r.err.find("calls interposed") == std::string::npos, r.err);
  const std::vector<Coll> all = collectives(dir / "run");
  BOOST_TEST(all.size() == 20u);  // the fake NCCL starts no plugin events
  BOOST_TEST(all_join_only(all));
}

// The same NCCL version with the plugin named elsewhere: NCCL does not load
// ours, so the wrappers record.
BOOST_AUTO_TEST_CASE(records_when_a_recent_nccl_has_another_plugin) {
  TempDir dir;
  const RunResult r = run(caller(), {{"STALLSCOPE_OUT", dir / "run"},
                                     {"FAKE_NCCL_VERSION", "22809"},
                                     {"NCCL_PROFILER_PLUGIN", "/nonexistent/libother.so"}});
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.out << r.err);
  BOOST_TEST(r.err.find("NCCL 2.28.9 calls interposed") != std::string::npos, r.err);
  const std::vector<Coll> all = collectives(dir / "run");
  BOOST_TEST(all.size() == 20u);
  for (const Coll& c : all) BOOST_TEST((c.c.flags & format::kCollJoinOnly) == 0u);
}
#endif

BOOST_AUTO_TEST_SUITE_END()
