// Black-box: a traced loader run, read back. From every batch_ready the
// analyzer's chain must be walkable: its samples' storage_reads, the
// preprocess spans that cover them, the collate, the h2d copy and the
// consumer's data_wait all carry the batch id; counters and attachments
// (loader.probe, device.model, loader.config) are there; samples skipped by
// the error policy are counted and named (RELIABILITY.md 24).
#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "loader_fixtures.hpp"

using namespace stallscope;
using namespace stallscope::test;
using format::Kind;

BOOST_AUTO_TEST_SUITE(loader_trace)

BOOST_AUTO_TEST_CASE(every_batch_ready_leads_to_its_reads_preprocessing_and_copy) {
  FileSet files({70000, 1, 4097, 20000, 0, 33333, 16384, 5, 100000, 2});
  TempDir out;
  const auto r = run_cmd({loader_probe_path(), "epoch", files.root(), "--loader-device=emulated",
                          "--loader-backend=uring", "--loader-batch-size=3"},
                         {{"STALLSCOPE_ENABLE", "on"}, {"STALLSCOPE_OUT", out.path()}});
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  BOOST_REQUIRE_EQUAL(r.value("mismatches"), 0);
  const auto traces = trace_files(out.path());
  BOOST_REQUIRE_EQUAL(traces.size(), 1u);
  const Loaded l = load(traces[0]);
  BOOST_TEST(l.gap_dropped == 0u);

  std::map<uint64_t, std::vector<uint64_t>> batches;  // id -> sample ids
  std::map<uint64_t, std::set<uint64_t>> read_samples, copies, waits;
  std::map<uint64_t, uint64_t> transformed, collated;
  for (size_t i = 0; i < l.events.size(); ++i) {
    const auto& e = l.events[i];
    const std::string& name = l.strings_of_events[i];
    switch (e.kind_enum()) {
      case Kind::kBatchReady:
        batches[e.corr] = l.ids[i];
        break;
      case Kind::kStorageRead:
        BOOST_TEST(l.track_names.at(e.track_id) == "ss-loader-io");
        BOOST_TEST(e.io.tier == uint8_t(format::Tier::kLocal));
        BOOST_TEST(e.io.queue_depth >= 1u);
        BOOST_TEST(e.io.cache != uint8_t(format::Cache::kUnknown));
        read_samples[e.corr].insert(e.io.sample_id);
        break;
      case Kind::kPreprocess: {
        // oneTBB's workers, whoever created them, are named as such.
        const std::string& thread = l.track_names.at(e.track_id);
        BOOST_TEST((thread == "ss-loader-work" || thread == "ss-loader-prep"), thread);
        if (name == "loader.transform") transformed[e.work.batch_id] += e.work.count;
        if (name == "loader.collate") collated[e.work.batch_id] += e.work.count;
        break;
      }
      case Kind::kH2D:
        BOOST_TEST(e.copy.src == uint8_t(format::MemKind::kPinned));
        copies[e.corr].insert(e.copy.bytes);
        break;
      case Kind::kDataWait:
        waits[e.work.batch_id].insert(1);
        break;
      default:
        break;
    }
  }
  BOOST_TEST(batches.size() == 4u);
  size_t samples = 0;
  for (const auto& [id, ids] : batches) {
    BOOST_TEST_CONTEXT("batch " << id) {
      samples += ids.size();
      for (uint64_t s : ids)
        if (files.hashes.size() && s != 5)  // sample index 4 (id 5) is empty: no read
          BOOST_TEST(read_samples[id].count(s) == 1u);
      BOOST_TEST(transformed[id] == ids.size());
      BOOST_TEST(collated[id] == ids.size());
      BOOST_TEST(copies[id].size() == 1u);
      BOOST_TEST(waits.count(id) == 1u);
    }
  }
  BOOST_TEST(samples == 10u);
  BOOST_TEST(l.by_name.count("loader.reads_in_flight") == 1u);
  BOOST_TEST(l.by_name.count("loader.batches_ready") == 1u);
  std::set<std::string> att;
  for (const auto& a : l.attachments) {
    att.insert(a.name);
    BOOST_TEST(nlohmann::json::accept(a.data), a.name << ": " << a.data);
  }
  BOOST_TEST(att.count("loader.probe") == 1u);
  BOOST_TEST(att.count("device.model") == 1u);
  BOOST_TEST(att.count("loader.config") == 1u);
}

BOOST_AUTO_TEST_CASE(skipped_samples_are_counted_and_named_in_the_trace) {
  // Policy skip, a file the (unprivileged) reader may not open: the epoch
  // goes on, and the trace says how many were skipped and which.
  FileSet files({100, 200, 300, 400, 500, 600});
  const std::string victim = files.root() + "/s000003.bin";
  ::chmod(victim.c_str(), 0);
  TempDir out;
  ::chmod(out.path().c_str(), 0777);
  const auto r =
      run_cmd({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", loader_probe_path(),
               "epoch", files.root(), "--loader-probe=0", "--loader-error-policy=skip"},
              {{"STALLSCOPE_ENABLE", "on"}, {"STALLSCOPE_OUT", out.path()}});
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  BOOST_TEST(r.value("samples") == 5);
  BOOST_TEST(r.value("skipped") == 1);
  const auto traces = trace_files(out.path());
  BOOST_REQUIRE_EQUAL(traces.size(), 1u);
  const Loaded l = load(traces[0]);
  double skipped = -1;
  size_t named = 0;
  for (size_t i = 0; i < l.events.size(); ++i) {
    const auto& e = l.events[i];
    if (e.kind_enum() == Kind::kCounter && l.strings_of_events[i] == "loader.skipped_samples")
      skipped = e.number();
    if (e.kind_enum() == Kind::kMark &&
        l.strings_of_events[i].find(victim + ": offset 0: cannot open") != std::string::npos)
      ++named;
  }
  BOOST_TEST(skipped == 1.0);
  BOOST_TEST(named == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
