"""`stallscope tune` against an exhaustive sweep (issue #26; run by
bench/tune_sweep.sh, minutes, not CI).

Two pipelines of the PyTorch scenario trainer (tests/torch_scenarios/train.py):

  storage  the dataset on a slowfs mount answering each read request after
           10 ms (a network filesystem): the workers wait off-CPU, and the
           best num_workers is far above the core count;
  cpu      CPU decode on the trainer's cores: the best num_workers is about
           the core count.

For each, every num_workers in {0, 1, 2, 4, 8, 12, 16} x prefetch_factor in
{2, 4} runs under `stallscope run --set … --exit-after-window` (the step p50
of its report), then `stallscope tune --trials 4` starts from the job as
written (num_workers=2 for storage, 0 for cpu). RESULT lines, per pipeline:
  tune_<p>_vs_sweep_best   tune's best step / the sweep's best step, target <= 1.10
  tune_<p>_trials          the runs tune made after the first, target <= 4
usage: tune_sweep.py STALLSCOPE_BIN SLOWFS_BIN [storage] [cpu]
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "torch_scenarios"))
import scenarios as S  # noqa: E402  pylint: disable=wrong-import-position

WORKERS = (0, 1, 2, 4, 8, 12, 16)
PREFETCH = (2, 4)
STEPS, START = 20, 5


def site():
    return f"train.py:{S.dataloader_line()}"


def p50(stallscope, out, cmd, sets):
    argv = [stallscope, "run", "--out", out, "--steps", str(STEPS), "--start-step", str(START),
            "--exit-after-window"]
    for s in sets:
        argv += ["--set", s]
    p = subprocess.run(argv + ["--"] + cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        return None
    with open(os.path.join(out, "report.json")) as f:
        return json.load(f)["ranks"][0]["steps"]["p50_ms"]


def sweep(stallscope, work, name, cmd):
    results = {}
    for w in WORKERS:
        for pf in PREFETCH if w else (None,):
            sets = [f"dataloader[{site()}].num_workers={w}"]
            if pf:
                sets.append(f"dataloader[{site()}].prefetch_factor={pf}")
            ms = p50(stallscope, os.path.join(work, f"sweep-{name}-{w}-{pf}"), cmd, sets)
            results[(w, pf)] = ms
            print(f"  sweep {name}: num_workers={w} prefetch_factor={pf or '-'}: "
                  f"{'failed' if ms is None else f'{ms:.2f} ms'}", flush=True)
    return results


def tune(stallscope, work, name, cmd):
    out = os.path.join(work, f"tune-{name}")
    p = subprocess.run([stallscope, "tune", "--out", out, "--trials", "4", "--steps", str(STEPS),
                        "--start-step", str(START), "--"] + cmd,
                       capture_output=True, text=True, timeout=3600)
    print("\n".join("  | " + x for x in p.stdout.splitlines()), flush=True)
    if p.returncode != 0:
        print(p.stderr[-2000:])
        return None
    with open(os.path.join(out, "tune.json")) as f:
        return json.load(f)


def pipeline(stallscope, slowfs, work, name):
    cal = S.calibrate(work)
    if name == "storage":
        kb, layers, _, _ = S.sizes({"decode_ms": 2, "compute_ms": 10}, cal)
        src = os.path.join(work, "data-storage")
        subprocess.run([S.PY, S.TRAIN, src, "--make-data", "--sample-kb", str(kb)], check=True)
        mount = S.SlowMount(slowfs, src, os.path.join(work, "mnt"), 10000)
        if not mount.mounted:
            print(f"SKIP storage: {mount.why}")
            return None
        data, workers = mount.mnt, 2
    else:
        mount = None
        kb, layers, _, _ = S.sizes({"decode_ms": 40, "compute_ms": 15}, cal)
        data = os.path.join(work, "data-cpu")
        subprocess.run([S.PY, S.TRAIN, data, "--make-data", "--sample-kb", str(kb)], check=True)
        workers = 0
    cmd = [S.PY, S.TRAIN, data, "--layers", str(layers), "--workers", str(workers)]
    try:
        print(f"pipeline {name}: {' '.join(cmd)}", flush=True)
        results = sweep(stallscope, work, name, cmd)
        done = {k: v for k, v in results.items() if v is not None}
        if not done:
            print(f"  {name}: every sweep run failed")
            return None
        best_cfg = min(done, key=done.get)
        doc = tune(stallscope, work, name, cmd)
    finally:
        if mount is not None:
            mount.close()
    if doc is None or doc["best"] < 0:
        print(f"  {name}: tune failed")
        return None
    best = doc["trials"][doc["best"]]
    ratio = best["step_p50_ms"] / done[best_cfg]
    print(f"  {name}: sweep best num_workers={best_cfg[0]} prefetch_factor={best_cfg[1] or '-'} "
          f"{done[best_cfg]:.2f} ms; tune best {best['step_p50_ms']:.2f} ms with "
          f"{best['settings'] or '(as is)'} after {doc['runs']} run(s)", flush=True)
    for t in doc["trials"]:
        print(f"  {name}: trial {t['index']}: {t['added'] or '(as is)'}: predicted "
              f"{t['predicted_step_ms']:.2f} ms, measured {t['step_p50_ms']:.2f} ms, "
              f"{t['outcome']} {t['delivered']}", flush=True)
    print(f"RESULT tune_{name}_vs_sweep_best {ratio:.3f} ratio target <= 1.10 "
          f"{'PASS' if ratio <= 1.10 else 'MISS'}")
    print(f"RESULT tune_{name}_trials {doc['runs']} trials target <= 4 "
          f"{'PASS' if doc['runs'] <= 4 else 'MISS'}")
    return ratio


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    stallscope, slowfs = sys.argv[1], sys.argv[2]
    names = sys.argv[3:] or ["storage", "cpu"]
    S.prioritize()
    work = tempfile.mkdtemp(prefix="stallscope-tune-sweep-")
    try:
        for n in names:
            pipeline(stallscope, slowfs, work, n)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
