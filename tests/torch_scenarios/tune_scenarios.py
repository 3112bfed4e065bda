"""`stallscope tune` and `stallscope run --headspace` end to end on the
PyTorch scenario trainer (train.py), as a user runs them (issue #26,
docs/attach.md "Tuning" and "Headspace").

  tune        data-bound (decode on the trainer thread, num_workers=0):
              `stallscope tune --trials 2` must apply more workers in trial
              1, measure it better and delivered, print the best command
              line and the DataLoader line to edit, leave tune.json, give
              every trial STALLSCOPE_TRIAL=1, and `stallscope diff` must
              read the tune directory.
  tune_crash  the same trainer, whose dataset breaks in worker processes
              (a Bus error there): trial 1 is "setting failed", not
              followed; the job as is stays best; tune exits 0.
  headspace   data-bound with off-CPU compute (the step sleeps as on a
              device): the headspace run's step (data for free) must be
              within 15 % of the ordinary run's step minus its data stall,
              and `report --headspace` must print that ceiling beside the
              input remedy.

The premise (calibration, idle CPUs) and its skips are those of
scenarios.py. usage: tune_scenarios.py STALLSCOPE_BIN NAME [--keep DIR]
Exit: 0 pass, 1 fail, 77 skip.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import scenarios as S

NAMES = ("tune", "tune_crash", "headspace")


class Check:
    def __init__(self):
        self.failures = []

    def __call__(self, ok, what):
        print(f"  {'ok  ' if ok else 'FAIL'} {what}", flush=True)
        if not ok:
            self.failures.append(what)
        return ok


def trial_wrapper():
    """A python3 -c that prints STALLSCOPE_TRIAL, then runs train.py as
    __main__ (its DataLoader line stays train.py's)."""
    return [S.PY, "-c",
            "import os, runpy, sys; print('STALLSCOPE_TRIAL=' + os.environ.get('STALLSCOPE_TRIAL', ''),"
            " flush=True); sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')",
            S.TRAIN]


def sizes(work, decode_ms, compute_ms, decode_over_compute=0.0):
    """Sample KB and layers for the decode and compute asked for; with
    `decode_over_compute`, the decode at least that many times the step's
    compute as calibrated (a slower machine's model takes longer)."""
    cal = S.calibrate(work)
    kb, layers, decode, compute = S.sizes({"decode_ms": decode_ms, "compute_ms": compute_ms}, cal)
    if decode_over_compute and decode < decode_over_compute * compute:
        kb, layers, decode, compute = S.sizes(
            {"decode_ms": decode_over_compute * compute, "compute_ms": compute_ms}, cal)
    print(f"  calibration: decode {decode:.1f} ms per batch ({kb} KB samples), step compute "
          f"{compute:.1f} ms ({layers} hidden layers), on {S.cores()} CPUs", flush=True)
    return kb, layers, decode, compute


def make_data(work, kb):
    data = os.path.join(work, "data")
    subprocess.run([S.PY, S.TRAIN, data, "--make-data", "--sample-kb", str(kb)], check=True)
    return data


def tune(stallscope, out, cmd, trials, extra=()):
    argv = [stallscope, "tune", "--out", out, "--trials", str(trials), "--steps", "20",
            *extra, "--"] + cmd
    with S.OthersCpu() as others:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    S.OTHERS.append(others.cores)
    print("\n".join("  | " + line for line in p.stdout.splitlines()), flush=True)
    return p


def scenario_tune(stallscope, work, check, crash):
    kb, layers, decode, compute = sizes(work, 30, 20, decode_over_compute=1.5)
    if not crash and decode / (decode + compute) < 0.5:
        return f"decode is only {100 * decode / (decode + compute):.0f} % of the CPU per step"
    data = make_data(work, kb)
    cmd = trial_wrapper() + [data, "--layers", str(layers), "--workers", "0"]
    if crash:
        cmd.append("--crash-in-workers")
    out = os.path.join(work, "tune")
    p = tune(stallscope, out, cmd, 2)
    if not check(p.returncode == 0, f"tune exited 0 (got {p.returncode}): {p.stderr[-1500:]}"):
        return ""
    with open(os.path.join(out, "tune.json")) as f:
        doc = json.load(f)
    trials = doc["trials"]
    site = f"train.py:{S.dataloader_line()}"
    check(len(trials) >= 2 and trials[0]["outcome"] == "baseline", "trial 0 is the job as is")
    if len(trials) < 2:
        return ""
    t1 = trials[1]
    added = t1["added"]
    check(len(added) == 1 and added[0].startswith(f"dataloader[{site}].num_workers="),
          f"trial 1 sets num_workers at {site}: {added}")
    for t in trials:
        for d in t["run_dirs"]:
            with open(d + ".log") as f:
                log = f.read()
            check("STALLSCOPE_TRIAL=1" in log, f"{os.path.basename(d)} ran with STALLSCOPE_TRIAL=1")
    if crash:
        check(t1["outcome"] == "setting failed", f"trial 1: setting failed (got {t1['outcome']})")
        check("exit status 1" in t1["failure"] and ("Bus error" in t1["failure"] or
                                                    "exited unexpectedly" in t1["failure"]),
              f"the failure says what happened: {t1['failure']}")
        check(doc["best"] == 0, f"the job as is stays best (best {doc['best']})")
        check(all(t["added"] != added for t in trials[2:]), "the failed setting is not tried again")
        check("stallscope run --" in p.stdout and "(no trial beat the job as is)" in p.stdout,
              "the best command line is the job as is")
        return ""
    b, a = trials[0]["step_p50_ms"], t1["step_p50_ms"]
    print(f"  tune: trial 0 {b:.2f} ms, trial 1 {a:.2f} ms (predicted "
          f"{t1['predicted_step_ms']:.2f} ms): {t1['outcome']}, {t1['delivered']}", flush=True)
    check(t1["outcome"] == "better", f"trial 1 better (got {t1['outcome']})")
    check(a < 0.8 * b, f"trial 1's step at least 20 % below the job's ({a:.2f} against {b:.2f} ms)")
    check(t1["delivered"].startswith(("delivered", "partly delivered")),
          f"the gain delivered: {t1['delivered']}")
    check(doc["best"] >= 1, f"best is a trial with the setting (best {doc['best']})")
    best = trials[doc["best"]]
    check(all(s in doc["best_command"] for s in best["settings"]),
          f"the best command line carries its settings: {doc['best_command']}")
    check(f"in the program: DataLoader(num_workers=" in p.stdout and site in p.stdout,
          "names the DataLoader line to edit")
    d = subprocess.run([stallscope, "diff", out], capture_output=True, text=True, timeout=120)
    check(d.returncode == 0 and "trial 1 (" in d.stdout and "data.preprocess" in d.stdout,
          f"stallscope diff reads the tune directory: {d.stdout[:300]}{d.stderr[-300:]}")
    return ""


def scenario_headspace(stallscope, work, check):
    kb, layers, decode, _ = sizes(work, 30, 0)
    sleep_ms = 30
    if decode / (decode + sleep_ms) < 0.4:
        return f"decode is only {100 * decode / (decode + sleep_ms):.0f} % of the step"
    data = make_data(work, kb)
    cmd = [S.PY, S.TRAIN, data, "--layers", "0", "--workers", "0", "--sleep-ms", str(sleep_ms)]
    base, _ = S.run(stallscope, os.path.join(work, "base"), cmd, 5, 30)
    hs_dir = os.path.join(work, "headspace")
    argv = [stallscope, "run", "--out", hs_dir, "--steps", "30", "--headspace", "--", *cmd]
    with S.OthersCpu() as others:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=240)
    S.OTHERS.append(others.cores)
    if not check(p.returncode == 0, f"run --headspace exited 0 (got {p.returncode}): "
                                    f"{p.stderr[-1500:]}"):
        return ""
    with open(os.path.join(hs_dir, "report.json")) as f:
        hs = json.load(f)["ranks"][0]
    h = hs["headspace"]
    check(h["replayed"] and h["batches"] == 8 and 8 <= h["steps_before_replay"] <= 9 and
          hs["steps"]["warmup"] >= h["steps_before_replay"] and hs["steps"]["steady"] >= 20,
          f"the headspace run replayed 8 batches, the steps before as warm-up: {h}, "
          f"{hs['steps']}")
    data_ms = sum(v["share"] for k, v in base["parts"].items() if k.startswith("data.")) * \
        base["steps"]["p50_ms"]
    expect = base["steps"]["p50_ms"] - data_ms
    ceiling = hs["steps"]["p50_ms"]
    print(f"  headspace: step {base['steps']['p50_ms']:.2f} ms, data stall {data_ms:.2f} ms; "
          f"with data for free {ceiling:.2f} ms (step - data stall {expect:.2f} ms)", flush=True)
    check(abs(ceiling - expect) <= 0.15 * expect,
          f"the ceiling within 15 % of step - data stall ({ceiling:.2f} against {expect:.2f} ms)")
    r = subprocess.run([stallscope, "report", os.path.join(work, "base"), "--headspace", hs_dir],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0 and f"ceiling: {ceiling:.2f} ms measured with data for free" in r.stdout,
          f"report --headspace prints the ceiling beside the input remedy: "
          f"{[x for x in r.stdout.splitlines() if 'ceiling' in x or 'headspace' in x]}")
    return ""


def main():
    if len(sys.argv) < 3 or sys.argv[2] not in NAMES:
        print(__doc__, file=sys.stderr)
        return 2
    stallscope, name = sys.argv[1], sys.argv[2]
    S.prioritize()
    if subprocess.run([S.PY, "-c", "import torch"], capture_output=True).returncode != 0:
        print(f"SKIP: {S.PY} has no torch", flush=True)
        return S.SKIP
    ignore = os.environ.get("STALLSCOPE_SCENARIO_IGNORE_PREMISE")
    need = 0 if name == "tune_crash" else 1.5 if name == "tune" else 1.0
    print(f"scenario {name}", flush=True)
    if S.cores() < 2:
        print(f"SKIP: {name}: the trainer may use {S.cores()} CPU(s); 2 or more needed")
        return S.SKIP
    if need and not ignore:
        busy = S.cpus_not_idle(need)
        if busy:
            print(f"SKIP: premise of {name} does not hold: {busy}", flush=True)
            return S.SKIP
    keep = sys.argv[sys.argv.index("--keep") + 1] if "--keep" in sys.argv else None
    work = tempfile.mkdtemp(prefix=f"stallscope-torch-{name}-")
    check = Check()
    try:
        if name == "headspace":
            why = scenario_headspace(stallscope, work, check)
        else:
            why = scenario_tune(stallscope, work, check, name == "tune_crash")
        if why:
            print(f"SKIP: premise of {name} does not hold: {why}", flush=True)
            return S.SKIP
        if check.failures:
            busy = S.cpus_not_idle(need) if need and not ignore else ""
            if not busy and need and max(S.OTHERS, default=0) > 0.25:
                busy = f"other processes used up to {max(S.OTHERS):.2f} cores during the runs"
            if busy:
                print(f"SKIP: {name}: {len(check.failures)} check(s) failed while the premise "
                      f"stopped holding: {busy}", flush=True)
                return S.SKIP
            print(f"FAIL {name}: " + "; ".join(check.failures), flush=True)
            return 1
        print(f"PASS {name}", flush=True)
        return 0
    finally:
        if keep:
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(work, keep, ignore=shutil.ignore_patterns("data", "calib"))
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
