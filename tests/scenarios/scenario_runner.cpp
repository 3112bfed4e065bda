// Runs one scenario of the suite end to end and checks the analyzer's
// verdict (issue 5): (1) the top cause, strictly; (2) the expected remedy
// among the top two; (3) the attributed share of the injected cause against
// what the calibration run implies (injected step - calibration step), within
// the scenario's tolerance; (4) after applying the remedy's knob, the step
// improves by at least half the predicted gain (one rerun on a miss; bounds
// exempt). Exit 0 pass (also for a scenario marked expected-to-fail, which
// prints XFAIL or XPASS), 1 fail, 77 skipped (no FUSE, no MPI; or the verdict
// right but a number (3, 4) missed while other processes kept the CPUs busy,
// as the calibration compares runs that then saw different machines). Writes
// a result JSON for scripts/scenarios_table.sh when --results DIR is given.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include "demo_knobs.hpp"  // integrations/cli: what `stallscope demo` changes
#include "../cpu_busy.hpp"
#include "../keep_traces.hpp"
#include "mount.hpp"
#include "runs.hpp"
#include "scenario.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using scenarios::Run;
using scenarios::Scenario;
using scenarios::Tools;

namespace {

double part_ms(const json& rank, const std::string& key) {
  const double steady = std::max(1.0, rank["steps"]["steady"].get<double>());
  return rank["parts"][key]["total_ms"].get<double>() / steady;
}

double share(const json& rank, const std::string& key) {
  return rank["parts"][key]["share"].get<double>();
}

// The largest part other than compute, or "" when compute is >= 90 %.
std::string top_cause(const json& rank) {
  if (share(rank, "compute") >= 0.9) return "";
  std::string best;
  double most = -1;
  for (const auto& [k, v] : rank["parts"].items())
    if (k != "compute" && v["share"].get<double>() > most)
      best = k, most = v["share"].get<double>();
  return best;
}

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

struct Verdict {
  json out = json::object();
  bool pass = true;
  bool verdict_ok = true;  // the checks of causes and remedies, not of numbers
  void check(bool ok, const std::string& what, bool number = false) {
    std::fprintf(stderr, "%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
    pass = pass && ok;
    verdict_ok = verdict_ok && (ok || number);
    out["checks"].push_back({{"ok", ok}, {"what", what}});
  }
};

const json* find_remedy(const json& rank, const std::string& id, int within) {
  for (int i = 0; i < within && i < static_cast<int>(rank["remedies"].size()); ++i)
    if (rank["remedies"][i]["id"] == id) return &rank["remedies"][i];
  return nullptr;
}

void check_gain(const Tools& t, const Scenario& s, const std::string& data,
                const std::vector<std::string>& flags, const Run& inj, const json& remedy,
                Verdict& v) {
  const trainer::KnobChange k = trainer::knob_for_remedy(remedy["id"], [&](const char* n) {
    return remedy["inputs"].contains(n) ? remedy["inputs"][n]["value"].get<double>() : -1.0;
  });
  const double predicted = remedy["gain_ms"].get<double>();
  v.out["predicted_gain_ms"] = predicted;
  v.out["bound"] = remedy["bound"];
  if (!k.applicable() || predicted <= 0) return;
  for (int attempt = 0; attempt < 2; ++attempt) {
    Run after;
    if (!run_once(t, s, data, trainer::apply_knob(flags, k), "after" + std::to_string(attempt),
                  &after))
      return v.check(false, "the run with the remedy applied failed");
    const double gain = inj.mean_ms - after.mean_ms;
    v.out["measured_gain_ms"] = gain;
    const bool ok = remedy["bound"].get<bool>() || gain >= 0.5 * predicted;
    if (ok || attempt == 1)
      return v.check(ok,
                     "remedy " + k.note + ": gain " + fmt(gain) + " ms vs predicted " +
                         fmt(predicted) + " ms (need half; bound exempt)",
                     true);
  }
}

// (1): the top cause; for mixed causes any of the injected parts, and each
// of them must be shown with at least kMixedMinShare.
void check_cause(const Scenario& s, const json& rank, Verdict& v) {
  const std::string cause = top_cause(rank);
  const auto parts = concat({s.cause_part}, s.also_parts);
  const bool top_ok = std::find(parts.begin(), parts.end(), cause) != parts.end();
  std::string want = s.cause_part;
  for (const auto& p : s.also_parts) want += " or " + p;
  v.check(top_ok, "top cause '" + cause + "' (expected '" + want +
                      "'; report: " + rank["cause"].get<std::string>() + ")");
  if (s.also_parts.empty()) return;
  for (const auto& p : parts)
    v.check(share(rank, p) >= scenarios::kMixedMinShare,
            "part " + p + " shown with " + fmt(100 * share(rank, p)) +
                " % of step time (need >= " + fmt(100 * scenarios::kMixedMinShare) + " %)",
            true);
}

// (3): the injected parts' time per step against injected - calibration.
void check_share(const Scenario& s, const Run& cal, const Run& inj, Verdict& v) {
  if (s.cause_part.empty() || s.inject.empty()) return;
  const int r = s.straggler_rank >= 0 ? 0 : s.remedy_rank;
  const json* ri = inj.rank(r);
  const json* rc = cal.rank(r);
  if (!ri || !rc) return v.check(false, "rank " + std::to_string(r) + " missing from a report");
  double got = 0;
  std::string what;
  for (const auto& p : concat({s.cause_part}, s.also_parts)) {
    got += part_ms(*ri, p) - part_ms(*rc, p);
    what += (what.empty() ? "" : "+") + p;
  }
  const double implied = inj.mean_ms - cal.mean_ms;
  v.out["implied_ms"] = implied;
  v.out["attributed_ms"] = got;
  v.check(implied > 0 && std::abs(got - implied) <= s.share_tolerance * implied + 1.0,
          "attributed " + what + " " + fmt(got) + " ms vs implied " + fmt(implied) +
              " ms (tolerance " + std::to_string(static_cast<int>(s.share_tolerance * 100)) +
              " % + 1 ms)",
          true);
}

// Scenario 9: the cross-rank report names the straggler and its storage.
void check_straggler(const Scenario& s, const Run& inj, Verdict& v) {
  if (s.straggler_rank < 0) return;
  const json& cross = inj.all.value("cross_rank", json::object());
  const json st = cross.value("stragglers", json::array());
  const bool named = !st.empty() && st[0].value("rank", -1) == s.straggler_rank;
  const std::string cause = named ? st[0].value("cause", std::string()) : "";
  v.check(
      named && cause.find("storage") != std::string::npos,
      "straggler named: " +
          (st.empty() ? std::string("none") : "rank " + std::to_string(st[0].value("rank", -1))) +
          " with cause '" + cause + "' (expected rank " + std::to_string(s.straggler_rank) +
          ", storage; cross-rank summary: " + cross.value("summary", std::string("none")) + ")");
}

// The "cache decoded samples" evidence states what was measured: when this
// rank used little of its budget, the CPUs were busy with other processes,
// and the text must say so instead of calling them saturated by the rank.
void check_cache_evidence(const json& rank, Verdict& v) {
  const json* m = find_remedy(rank, "cache_decoded", 5);
  if (m == nullptr) return;
  const std::string ev = (*m)["evidence"];
  const double used = rank["cpu"].value("used_cores", 0.0),
               budget = rank["cpu"].value("budget_cores", 0.0);
  const double idle = rank["cpu"].value("idle_cpus_during_stalls", -1.0);
  if (used >= 0.9 * budget || idle < 0 || idle >= 1) return;
  v.check(
      ev.find("other processes") != std::string::npos && ev.find("saturated") == std::string::npos,
      "cache_decoded evidence names other processes (rank used " + fmt(used) + " of " +
          fmt(budget) + " cores): " + ev);
}

int finish(const Tools& t, const Scenario& s, Verdict& v, double seconds) {
  v.out["pass"] = v.pass;
  v.out["runtime_s"] = seconds;
  int rc = v.pass ? 0 : 1;
  if (!s.expected_to_fail.empty()) {
    v.out["expected_to_fail"] = s.expected_to_fail;
    std::fprintf(stderr,
                 v.pass ? "XPASS scenario %d passed although expected to fail (%s): drop its "
                          "expected_to_fail in tests/scenarios/scenarios.cpp\n"
                        : "XFAIL scenario %d failed as expected: %s\n",
                 s.id, s.expected_to_fail.c_str());
    rc = 0;  // the suite passes either way; XPASS is printed and shown in docs/scenarios.md
  }
  if (!t.results.empty())
    std::ofstream(t.results + "/scenario-" + std::to_string(s.id) + ".json") << v.out.dump(1);
  return rc;
}

// The verdict was right but a number missed: where other processes keep
// the CPUs busy, the runs compared saw different machines, so the scenario
// skips, visibly; on a machine with its CPUs free it fails.
int skip_if_cpus_busy(const Tools& t, const Scenario& s, Verdict& v, double seconds) {
  const std::string busy = stallscope::test::cpus_busy(2);
  if (busy.empty()) return finish(t, s, v, seconds);
  v.out["skipped"] = "verdict right, a number missed: " + busy;
  finish(t, s, v, seconds);
  std::fprintf(stderr, "SKIP scenario %d: cause and remedies right, a number missed (above): %s\n",
               s.id, busy.c_str());
  return 77;
}

struct Mounts {
  std::vector<std::unique_ptr<scenarios::SlowMount>> list;
  std::string why;  // set when one could not be mounted
};

Mounts mount_all(Tools& t, const Scenario& s, const std::string& local) {
  Mounts m;
  for (size_t i = 0; i < s.mounts.size() && m.why.empty(); ++i) {
    const std::string name = "mnt" + std::to_string(i);
    m.list.push_back(
        std::make_unique<scenarios::SlowMount>(t.slowfs, local, t.work, s.mounts[i], name));
    if (!m.list.back()->ok()) m.why = m.list.back()->why();
    t.vars["{MNT" + std::to_string(i) + "}"] = m.list.back()->path();
  }
  return m;
}

int run_scenario(Tools& t, const Scenario& s) {
  const auto t0 = std::chrono::steady_clock::now();
  if (s.ranks > 1)
    if (const std::string why = scenarios::mpi_missing(t); !why.empty())
      return std::fprintf(stderr, "SKIP scenario %d: %s\n", s.id, why.c_str()), 77;
  const std::string local = t.work + "/dataset";
  std::string gen = scenarios::q(t.gen) + " --quiet --out " + scenarios::q(local);
  for (const auto& g : s.gen) gen += " " + g;
  if (!scenarios::sh(gen)) return 1;
  std::unique_ptr<scenarios::SlowMount> mnt;
  std::string data = local;
  if (s.fuse) {
    mnt = std::make_unique<scenarios::SlowMount>(t.slowfs, local, t.work, s.slowfs);
    if (!mnt->ok())
      return std::fprintf(stderr, "SKIP scenario %d: %s\n", s.id, mnt->why().c_str()), 77;
    data = mnt->path();
  }
  const Mounts mounts = mount_all(t, s, local);
  if (!mounts.why.empty())
    return std::fprintf(stderr, "SKIP scenario %d: %s\n", s.id, mounts.why.c_str()), 77;
  Verdict v;
  v.out = {{"id", s.id},
           {"name", s.name},
           {"expected_cause", s.cause_part},
           {"expected_remedy", s.remedy},
           {"ranks", s.ranks}};
  Run cal, inj;
  const auto flags = concat(s.common, s.inject);
  if (!run_once(t, s, data, s.common, "calibration", &cal) ||
      !run_once(t, s, data, flags, "injected", &inj))
    return std::fprintf(stderr, "FAIL scenario %d: a run failed\n", s.id), 1;
  const json* rr = inj.rank(s.remedy_rank);
  if (rr == nullptr)
    return std::fprintf(stderr, "FAIL scenario %d: rank %d missing\n", s.id, s.remedy_rank), 1;
  v.out["verdict"] = inj.report["cause"];
  v.out["top_remedies"] = json::array();
  for (const auto& m : (*rr)["remedies"]) v.out["top_remedies"].push_back(m["id"]);
  if (s.remedy_rank != 0) v.out["remedies_of_rank"] = s.remedy_rank;
  for (const auto& [tag, run] : {std::pair{"calibration", &cal}, std::pair{"injected", &inj}}) {
    v.out[std::string(tag) + "_mean_ms"] = run->mean_ms;
    for (const auto& [k, p] : run->report["parts"].items())  // ms per steady step, for diagnosis
      if (p["share"].get<double>() >= 0.01)
        v.out[std::string(tag) + "_parts_ms"][k] = part_ms(run->report, k);
  }
  check_cause(s, inj.report, v);
  check_cache_evidence(*rr, v);
  check_straggler(s, inj, v);
  const json* remedy = find_remedy(*rr, s.remedy, 2);
  const double idle = rr->at("cpu").value("idle_cpus_during_stalls", -1.0);
  const bool premise = !s.needs_idle_cpus || idle >= 0.5;
  if (remedy != nullptr || premise)
    v.check(remedy != nullptr,
            "remedy '" + s.remedy + "' among the top two of rank " + std::to_string(s.remedy_rank));
  if (!s.also_remedy.empty()) {
    std::string any;
    bool found = false;
    for (const auto& id : s.also_remedy)
      found = found || find_remedy(*rr, id, 2), any += (any.empty() ? "" : " or ") + id;
    v.check(found, "remedy '" + any + "' also among the top two (the other cause)");
  }
  check_share(s, cal, inj, v);
  if (remedy == nullptr && !premise && v.pass) {
    v.out["skipped"] = "no CPU idle during the stalls: '" + s.remedy + "' rightly not proposed";
    finish(t, s, v, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return std::fprintf(stderr,
                        "SKIP scenario %d: %.2f CPUs were idle during the stalls (other processes "
                        "keep this machine busy), so '%s' rightly does not apply; cause and share "
                        "checked and right\n",
                        s.id, idle, s.remedy.c_str()),
           77;
  }
  if (remedy && s.remedy != "healthy") check_gain(t, s, data, flags, inj, *remedy, v);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!v.pass && v.verdict_ok) return skip_if_cpus_busy(t, s, v, seconds);
  return finish(t, s, v, seconds);
}

}  // namespace

int main(int argc, char** argv) {
  Tools t;
  int id = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], val = argv[i + 1];
    if (a == "--scenario")
      id = std::atoi(val.c_str());
    else if (a == "--trainer")
      t.trainer = val;
    else if (a == "--gen")
      t.gen = val;
    else if (a == "--stallscope")
      t.stallscope = val;
    else if (a == "--slowfs")
      t.slowfs = val;
    else if (a == "--results")
      t.results = val;
    else if (a == "--steps")
      t.steps = std::atoi(val.c_str());
  }
  for (const auto& s : scenarios::all_scenarios()) {
    if (s.id != id) continue;
    char tmpl[] = "/tmp/stallscope-scenario-XXXXXX";
    if (!mkdtemp(tmpl)) return 1;
    t.work = tmpl;
    if (!t.results.empty()) fs::create_directories(t.results);
    const int rc = run_scenario(t, s);
    stallscope_tests::keep_traces(t.work, "scenario-" + std::to_string(s.id));
    if (rc == 0 || std::getenv("STALLSCOPE_KEEP_SCENARIO") == nullptr)
      fs::remove_all(t.work);
    else
      std::fprintf(stderr, "kept %s\n", t.work.c_str());
    return rc;
  }
  std::fprintf(
      stderr,
      "usage: scenario_runner --scenario N --trainer T --gen G --stallscope S [--slowfs F] "
      "[--results DIR] [--steps N]\n");
  return 2;
}
