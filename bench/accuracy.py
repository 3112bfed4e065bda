"""The ground-truth harness (docs/accuracy.md): generated pipelines, each
run under `stallscope run`, its top remedies applied and measured, and the
figures that say how often stallscope is right.

Each case is drawn from a seeded generator: a PyTorch pipeline
(bench/accuracy/pipeline.py) or a native one (accuracy_native_pipeline),
with a dominant cost (CPU decode, storage latency through slowfs, an
off-CPU wait in each sample, or the step's own compute) and every other
axis drawn around it. The pipeline prints its own step times and data
waits, so its truth is its own: input-bound when it waited >= 25 % of its
steps for data (its bottleneck then the dominant data cost it was given,
or its workers' start-up where an epoch's first batches took most of the
waits), compute-bound below 10 %, in between not scored.

Per case, the report's top three remedies that can be applied are: those
with a `--set` (rerun with it), and cache_decoded (decode cost 0) or a
local copy of the data (storage latency 0), which the generator expresses.
Each is rerun ABBA-interleaved with the baseline (B V1 V2 V3 V3 V2 V1 B, and
that sequence once more where an arm's spread exceeds a quarter of its gain),
every run under `stallscope run` with the same window, and the delivered
gain read off the pipeline's own step times.

Figures (RESULT lines, targets of this round; each name ends with the
torch the pipelines ran on, e.g. accuracy_verdict_torch1):
  accuracy_verdict          top cause matches the truth (share of scored cases)   >= 0.9
  accuracy_first_remedy     first remedy delivered the largest gain, within spread >= 0.8
  accuracy_bias_median      median predicted / delivered gain                      0.8 .. 1.25
  accuracy_within_band      share of applied remedies with that ratio in 0.67..1.5 >= 0.8
  accuracy_interval_coverage  delivered gains inside a prediction's interval       >= 0.8
  accuracy_healthy_errors   called healthy while waiting > 25 % for data           0

usage: accuracy.py --stallscope BIN [--slowfs BIN] [--native BIN] [--python PY]
                   [--seed N] [--count N] [--out DIR] [--json FILE] [--no-whatif]
                   [--kinds python,native]
"""

import argparse
import atexit
import json
import math
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "torch_scenarios"))
import scenarios as S  # noqa: E402  pylint: disable=wrong-import-position

PIPELINE = os.path.join(HERE, "accuracy", "pipeline.py")
START, STEPS = 6, 24
INPUT_BOUND, COMPUTE_BOUND = 0.25, 0.10
SUFFIX = [""]  # each figure's name ends with the torch it ran on: _torch1, _torch2
# The verdict each dominant cost should get: the cause line's words. An
# off-CPU wait inside the producers is no storage and no hand-off; the
# report may call it preprocessing (a DataLoader's fetch outside its reads)
# or data it could not split.
CATEGORY = {"decode": ("preprocessing",), "rpc": ("preprocessing", "data (unsplit)"),
            "storage": ("storage",), "compute": ("compute",)}
# Remedies with no --set that the generator can express as a what-if (and,
# for a native pipeline, more producer threads: its --loaders).
WHAT_IF = {"cache_decoded": {"decode_ms": 0}, "local_copy": {"latency_us": 0},
           "pack_shards": {"latency_us": 0}}


class Unavailable(RuntimeError):
    """What a case needs is missing here (FUSE, slowfs)."""


# ---- the generator ----------------------------------------------------------

def draw(rng, kinds, index):
    """One case's parameters: a dominant cost, the other axes around it."""
    kind = "native" if "native" in kinds and (kinds == ["native"] or rng.random() < 0.2) else "python"
    dominant = rng.choice(["decode", "decode", "storage", "rpc", "compute"])
    c = dict(index=index, kind=kind, dominant=dominant, batch=rng.choice([2, 4, 8]),
             compute_ms=round(rng.uniform(6, 20), 1))
    per_sample = {"decode": 0.0, "rpc": 0.0, "latency_us": 0}
    if rng.random() < 0.5:
        per_sample["decode"] = round(rng.uniform(0, 0.5), 2)
    if rng.random() < 0.3:
        per_sample["rpc"] = round(rng.uniform(0, 0.5), 2)
    if dominant == "decode":
        per_sample["decode"] = round(rng.uniform(3, 10), 1)
    elif dominant == "rpc":
        per_sample["rpc"] = round(rng.uniform(4, 12), 1)
    elif dominant == "storage":
        per_sample["latency_us"] = rng.choice([4000, 6000, 9000, 12000])
    else:  # compute: the data costs small beside it
        c["compute_ms"] = round(rng.uniform(25, 40), 1)
    c["decode_ms"], c["rpc_ms"], c["latency_us"] = (per_sample["decode"], per_sample["rpc"],
                                                    per_sample["latency_us"])
    c["sample_kb"] = rng.choice([16, 64, 256])
    if kind == "python":
        c["workers"] = rng.choice([0, 1, 1, 2, 2, 3, 4, 6, 8])
        c["prefetch"] = rng.choice([0, 1, 2, 4]) if c["workers"] else 0
        c["persistent"] = bool(c["workers"]) and rng.random() < 0.5
        c["start"] = rng.choice(["fork", "fork", "spawn", "forkserver"]) if c["workers"] else "fork"
        c["loaders"] = rng.choice([1, 1, 1, 2])
        c["epoch_batches"] = rng.choice([0, 0, 8, 16])
        c["pin_memory"] = "n/a on a CPU-only machine"
    else:
        c["loaders"] = rng.choice([1, 1, 2, 3, 4])
        c["queue"] = rng.choice([1, 2, 4, 8])
        c["handoff"] = rng.choice(["pipe", "condvar"])
        c["read"] = rng.choice(["read", "pread", "mmap"])
    return c


def command(c, data, py, native, over=None):
    """The pipeline's command line, with what-if overrides."""
    p = dict(c, **(over or {}))
    steps = START + STEPS + 4
    if p["kind"] == "native":
        return [native, "--data", data, "--files", "32", "--steps", str(steps), "--batch",
                str(p["batch"]), "--loaders", str(p["loaders"]), "--queue", str(p["queue"]),
                "--handoff", p["handoff"], "--read", p["read"],
                "--decode-us", str(int(p["decode_ms"] * 1000)),
                "--rpc-us", str(int(p["rpc_ms"] * 1000)),
                "--compute-us", str(int(p["compute_ms"] * 1000))]
    cmd = [py, PIPELINE, data, "--steps", str(steps), "--batch", str(p["batch"]), "--workers",
           str(p["workers"]), "--start", p["start"], "--decode-ms", str(p["decode_ms"]),
           "--rpc-ms", str(p["rpc_ms"]), "--compute-ms", str(p["compute_ms"]), "--loaders",
           str(p["loaders"]), "--epoch-batches", str(p["epoch_batches"])]
    if p["prefetch"]:
        cmd += ["--prefetch", str(p["prefetch"])]
    if p["persistent"]:
        cmd.append("--persistent")
    return cmd


# ---- runs --------------------------------------------------------------------

def own_steps(log):
    """The pipeline's step and wait ms over the window, by its own lines
    (waits as (all, on an epoch's first batch); the native pipeline has one
    epoch and prints no start figure)."""
    steps, waits = [], []
    for line in log.splitlines():
        parts = line.split()
        if len(parts) in (7, 10) and parts[0] == "step" and parts[4] == "wait":
            n = int(parts[1].rstrip(":"))
            if START <= n < START + STEPS:
                steps.append(float(parts[2]))
                waits.append((float(parts[5]), float(parts[8]) if len(parts) == 10 else 0.0))
    return steps, waits


def run(stallscope, out, cmd, sets=(), env=None):
    """One `stallscope run` of the case with this window: (own steps, own
    waits, report rank or None, others' cores)."""
    argv = [stallscope, "run", "--out", out, "--start-step", str(START), "--steps", str(STEPS),
            "--exit-after-window"]
    for s in sets:
        argv += ["--set", s]
    with S.OthersCpu() as others:
        p = subprocess.run(argv + ["--"] + cmd, capture_output=True, text=True, timeout=300,
                           env=env)
    steps, waits = own_steps(p.stdout)
    rank = None
    try:
        with open(os.path.join(out, "report.json")) as f:
            rank = json.load(f)["ranks"][0]
    except (OSError, ValueError, KeyError, IndexError):
        pass
    if len(steps) < STEPS // 2:
        raise RuntimeError(f"{shlex.join(argv)}: exit {p.returncode}, {len(steps)} window steps:\n"
                           f"{(p.stdout + p.stderr)[-1500:]}")
    return steps, waits, rank, others.cores


def applicable(c, rank):
    """The report's top three remedies the harness can apply: (remedy, sets, what-if)."""
    out = []
    for m in rank.get("remedies", []):
        producers = m.get("inputs", {}).get("suggested_producers", {}).get("value")
        if m["id"] == "healthy":
            continue
        if m.get("set"):
            out.append((m, m["set"], None))
        elif m["id"] in WHAT_IF:
            out.append((m, [], WHAT_IF[m["id"]]))
        elif m["id"] == "more_workers" and c["kind"] == "native" and producers:
            out.append((m, [], {"loaders": min(16, int(producers))}))  # producer threads
        if len(out) == 3:
            break
    return out


def truth(c, steps, waits):
    step = statistics.mean(steps)
    wait = statistics.mean(w for w, _ in waits)
    start = statistics.mean(s for _, s in waits)
    share = wait / step if step > 0 else 0
    # An epoch's first batch waits for its workers to start and then for
    # one whole fetch: what the batch's samples cost, by construction.
    fetch = c["batch"] * (c["decode_ms"] + c["rpc_ms"] +
                          c["latency_us"] / 1000 * math.ceil(c["sample_kb"] / 128))
    per_step_fetch = fetch * sum(1 for _, s in waits if s > 0) / len(waits)
    if share >= INPUT_BOUND and start - per_step_fetch > 0.5 * wait:
        # Workers starting each epoch, whatever the samples cost: the report
        # counts waiting for a worker as preprocessing.
        label = ("preprocessing",)
    elif share >= INPUT_BOUND and start > 0.5 * wait:
        # Start-ups and the dominant cost of the first fetches: either.
        label = tuple(dict.fromkeys(CATEGORY[c["dominant"]] + ("preprocessing",))) \
            if c["dominant"] != "compute" else ("preprocessing",)
    elif share >= INPUT_BOUND:
        label = CATEGORY[c["dominant"]] if c["dominant"] != "compute" else "unclear"
    elif share < COMPUTE_BOUND:
        label = CATEGORY["compute"]
    else:
        label = "mixed"
    return dict(step_ms=step, wait_ms=wait, start_wait_ms=start, wait_share=share,
                bottleneck=label)


def verdict_ok(t, cause):
    if t["bottleneck"] in ("mixed", "unclear"):
        return None
    if t["bottleneck"] == ("compute",):
        return not cause.startswith("input-bound")
    return any(cause.startswith("input-bound: " + w) for w in t["bottleneck"])


def one_case(c, a, work):
    d = os.path.join(work, f"case{c['index']:03d}")
    os.makedirs(d, exist_ok=True)
    src = os.path.join(d, "src")
    subprocess.run([a.python, PIPELINE, src, "--make-data", "--sample-kb", str(c["sample_kb"]),
                    "--files", "32"], check=True, capture_output=True)
    if c["kind"] == "native":  # the native pipeline reads f0 .. f31
        for k, name in enumerate(sorted(os.listdir(src))):
            os.rename(os.path.join(src, name), os.path.join(src, f"f{k}"))
    mounts = {}

    def data_for(latency_us):
        if latency_us <= 0:
            return src
        if latency_us not in mounts:
            m = S.SlowMount(a.slowfs, src, os.path.join(d, f"mnt{latency_us}"), latency_us)
            if not m.mounted:
                raise Unavailable(m.why)
            mounts[latency_us] = m
        return mounts[latency_us].mnt

    def cmd(over=None):
        p = dict(c, **(over or {}))
        return command(c, data_for(p["latency_us"]), a.python, a.native, over)

    try:
        steps, waits, rank, others = run(a.stallscope, os.path.join(d, "base"), cmd())
        if rank is None:
            raise RuntimeError("no report.json")
        t = truth(c, steps, waits)
        res = dict(params=c, truth=t, others_cores=others, cause=rank["cause"],
                   remedies=[dict(id=m["id"], predicted_step_ms=m.get("predicted_step_ms"),
                                  step_ms=m.get("step_ms"), bound=m.get("bound"),
                                  set=m.get("set", [])) for m in rank.get("remedies", [])])
        res["verdict_ok"] = verdict_ok(t, rank["cause"])
        arms = [] if a.no_whatif else applicable(c, rank)
        res["applied"] = []
        if arms:
            res["applied"] = measure(c, a, d, cmd, arms, steps)
        return res
    finally:
        for m in mounts.values():
            m.close()


def measure(c, a, d, cmd, arms, first_steps):
    """ABBA rounds of the baseline and each arm (a second round where an
    arm is noisy): the delivered gains."""
    base_runs, arm_runs = [statistics.mean(first_steps)], [[] for _ in arms]
    order = list(range(len(arms)))
    for rnd in range(2):
        seq = order + order[::-1]
        for k, i in enumerate(seq):
            m, sets, over = arms[i]
            st, _, _, _ = run(a.stallscope, os.path.join(d, f"r{rnd}-{k}-{m['id']}"),
                              cmd(over), sets)
            arm_runs[i].append(statistics.mean(st))
        st, _, _, _ = run(a.stallscope, os.path.join(d, f"r{rnd}-base"), cmd())
        base_runs.append(statistics.mean(st))
        base = statistics.mean(base_runs)
        noisy = False
        for i in order:
            gain = base - statistics.mean(arm_runs[i])
            spread = (max(arm_runs[i]) - min(arm_runs[i])) + (max(base_runs) - min(base_runs)) / 2
            noisy = noisy or spread > 0.25 * max(abs(gain), 0.05 * base)
        if not noisy:
            break
    base = statistics.mean(base_runs)
    base_spread = max(base_runs) - min(base_runs)
    out = []
    for i, (m, sets, over) in enumerate(arms):
        v = statistics.mean(arm_runs[i])
        pred = (m["step_ms"] - m["predicted_step_ms"]) / m["step_ms"] if m.get("step_ms") else 0
        delivered = (base - v) / base
        spread = ((max(arm_runs[i]) - min(arm_runs[i])) + base_spread) / 2 / base
        out.append(dict(id=m["id"], set=sets, what_if=over, base_ms=base, runs_ms=arm_runs[i],
                        predicted_gain=pred, delivered_gain=delivered, spread=spread,
                        bound=m.get("bound", False)))
    return out


# ---- the figures -------------------------------------------------------------

def result(name, value, unit, op, target, ok, fmt="%.2f"):
    print(f"RESULT {name}{SUFFIX[0]} {fmt % value} {unit} target {op} {target} {'PASS' if ok else 'MISS'}",
          flush=True)


def figures(cases):
    scored = [r for r in cases if r.get("verdict_ok") is not None]
    verdict = sum(r["verdict_ok"] for r in scored) / len(scored) if scored else 0
    firsts = []
    ratios = []
    for r in cases:
        ap = r.get("applied", [])
        for x in ap:
            if x["delivered_gain"] > 0.02:
                ratios.append(x["predicted_gain"] / x["delivered_gain"])
            elif x["predicted_gain"] > 0.05:
                ratios.append(math.inf)  # predicted a gain, delivered none
        if ap and r["remedies"] and ap[0]["id"] == r["remedies"][0]["id"]:
            best = max(x["delivered_gain"] for x in ap)
            firsts.append(ap[0]["delivered_gain"] >= best - ap[0]["spread"])
    healthy_errors = sum(1 for r in cases if "truth" in r and r["truth"]["wait_share"] > INPUT_BOUND
                         and not r["cause"].startswith("input-bound"))
    by_remedy = {}
    for r in cases:
        for x in r.get("applied", []):
            by_remedy.setdefault(x["id"], []).append(x)
    for rid, xs in sorted(by_remedy.items()):
        rs = [x["predicted_gain"] / x["delivered_gain"] if x["delivered_gain"] > 0.02 else
              (math.inf if x["predicted_gain"] > 0.05 else None) for x in xs]
        rs = [x for x in rs if x is not None]
        print(f"# {rid}: applied {len(xs)}, predicted "
              + ", ".join(f"{100 * x['predicted_gain']:.0f}" for x in xs) + " % delivered "
              + ", ".join(f"{100 * x['delivered_gain']:.0f}" for x in xs) + " %"
              + (f"; median predicted / delivered {statistics.median(rs):.2f}, "
                 f"{sum(1 for x in rs if 0.67 <= x <= 1.5)} of {len(rs)} within 0.67-1.5"
                 if rs else ""), flush=True)
    print(f"# cases {len(cases)}: verdict scored {len(scored)}, first remedy scored "
          f"{len(firsts)}, remedies applied {len(ratios)}, failed "
          f"{sum(1 for r in cases if 'error' in r)}", flush=True)
    result("accuracy_verdict", verdict, "share", ">=", 0.9, bool(scored) and verdict >= 0.9)
    first = sum(firsts) / len(firsts) if firsts else 0
    result("accuracy_first_remedy", first, "share", ">=", 0.8, bool(firsts) and first >= 0.8)
    med = statistics.median(ratios) if ratios else 0
    result("accuracy_bias_median", min(med, 99), "ratio", "within", "0.8..1.25",
           bool(ratios) and 0.8 <= med <= 1.25)
    band = sum(1 for x in ratios if 0.67 <= x <= 1.5) / len(ratios) if ratios else 0
    result("accuracy_within_band", band, "share", ">=", 0.8, bool(ratios) and band >= 0.8)
    print("# no remedy carries an interval: coverage has nothing to count", flush=True)
    result("accuracy_interval_coverage", 0, "share", ">=", 0.8, False)
    result("accuracy_healthy_errors", healthy_errors, "cases", "<=", 0, healthy_errors == 0, "%d")


def positive(text):
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive count of cases")
    return n


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stallscope", required=True)
    p.add_argument("--slowfs", default="")
    p.add_argument("--native", default="")
    p.add_argument("--python", default="/usr/bin/python3")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--count", type=positive, default=24)
    p.add_argument("--out", default="", help="keep every case's runs here (default: a "
                   "temporary directory, removed at the end)")
    p.add_argument("--json", default="", help="the cases as JSON (default: "
                   "stallscope-accuracy-seed<N>-torch<V>.json here)")
    p.add_argument("--no-whatif", action="store_true", help="verdicts only: no reruns")
    p.add_argument("--kinds", default="python,native")
    p.add_argument("--check", action="store_true",
                   help="exit 1 when a scored verdict is wrong or a case fails (77: the "
                        "machine was too busy to judge), as the CI subset does")
    a = p.parse_args()
    kinds = a.kinds.split(",")
    if not set(kinds) <= {"python", "native"}:
        p.error(f"--kinds '{a.kinds}': a comma-separated list of python and native")
    if not os.access(a.stallscope, os.X_OK):
        p.error(f"--stallscope '{a.stallscope}' is not an executable")
    if "python" in kinds and not os.access(a.python, os.X_OK):
        p.error(f"--python '{a.python}' is not an executable")
    if a.out and os.path.isdir(a.out) and os.listdir(a.out):
        p.error(f"--out '{a.out}' is not empty: its runs would mix with an earlier harness's")
    if "native" in kinds and not (a.native and os.access(a.native, os.X_OK)):
        print(f"accuracy: no native pipeline at '{a.native}': python cases only", flush=True)
        kinds = [k for k in kinds if k != "native"]
    if not kinds:
        sys.exit("accuracy: no kind of pipeline to run")
    if "python" in kinds and \
            subprocess.run([a.python, "-c", "import torch"], capture_output=True).returncode != 0:
        print(f"accuracy: {a.python} has no torch", file=sys.stderr)
        return 77 if a.check else 2
    torch_version = subprocess.run([a.python, "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True).stdout.strip()
    SUFFIX[0] = f"_torch{torch_version.split('.')[0]}" if torch_version else "_native"
    rng = random.Random(a.seed)
    work = a.out or tempfile.mkdtemp(prefix="stallscope-accuracy-")
    os.makedirs(work, exist_ok=True)
    if not a.out:
        atexit.register(shutil.rmtree, work, True)
    busy = S.cpus_busy(2)
    print(f"# accuracy: seed {a.seed}, {a.count} cases, torch {torch_version}, work {work}"
          + (f"; WARNING: {busy}" if busy else ""), flush=True)
    cases = []
    t0 = time.time()
    for i in range(a.count):
        c = draw(rng, kinds, i)
        try:
            r = one_case(c, a, work)
        except Unavailable as e:
            r = dict(params=c, error=str(e), unavailable=True)
        except (RuntimeError, subprocess.SubprocessError, OSError) as e:
            r = dict(params=c, error=str(e)[-2000:])
        cases.append(r)
        if "error" in r:
            print(f"case {i} {c['kind']} {c['dominant']}: ERROR {r['error'].splitlines()[0]}",
                  flush=True)
        else:
            t = r["truth"]
            ap = ", ".join(f"{x['id']} predicted {100 * x['predicted_gain']:.0f} % delivered "
                           f"{100 * x['delivered_gain']:.0f} %" for x in r["applied"])
            print(f"case {i} {c['kind']} {c['dominant']} workers={c.get('workers', c.get('loaders'))}"
                  f": truth {'/'.join(t['bottleneck']) if isinstance(t['bottleneck'], tuple) else t['bottleneck']} (wait {100 * t['wait_share']:.0f} % of "
                  f"{t['step_ms']:.1f} ms); report '{r['cause'][:70]}' "
                  f"[{ {True: 'ok', False: 'WRONG', None: 'not scored'}[r['verdict_ok']]}]"
                  + (f"; {ap}" if ap else "") + f" ({time.time() - t0:.0f} s)", flush=True)
    out = a.json or (os.path.join(work, "accuracy.json") if a.out or a.check else
                     f"stallscope-accuracy-seed{a.seed}-torch{torch_version}.json")
    with open(out, "w") as f:
        json.dump(dict(seed=a.seed, count=a.count, torch=torch_version, cases=cases), f, indent=1)
    if a.out or not a.check:
        print(f"# cases as JSON: {os.path.abspath(out)}", flush=True)
    figures(cases)
    return check(cases, busy) if a.check else 0


def check(cases, busy):
    """The CI subset's verdict: 0 all scored verdicts right, 1 wrong, 77 skip."""
    others = max([r.get("others_cores", 0) for r in cases] + [0])
    if cases and all(r.get("unavailable") for r in cases if "error" in r) and \
            any(r.get("unavailable") for r in cases):
        why = next(r["error"] for r in cases if r.get("unavailable"))
        print(f"SKIP: {why}")
        return 77
    wrong = [r for r in cases if r.get("verdict_ok") is False or "error" in r]
    scored = sum(1 for r in cases if r.get("verdict_ok") is not None)
    noisy = busy or (f"other processes took {others:.2f} cores during a run" if others > 0.25 else "")
    if wrong and noisy:
        print(f"SKIP: {len(wrong)} case(s) wrong or failed, but the premise does not hold: {noisy}")
        return 77
    if wrong:
        for r in wrong:
            print(f"FAIL case {r['params']['index']}: {r.get('error') or r['cause']} "
                  f"(truth {r['truth']['bottleneck']})" if "truth" in r else
                  f"FAIL case {r['params']['index']}: {r.get('error', '')[:300]}")
        return 1
    if scored < max(1, len(cases) // 2):
        print(f"SKIP: only {scored} of {len(cases)} cases had a clear truth to score")
        return 77
    print(f"ok: {scored} scored verdict(s) right")
    return 0


if __name__ == "__main__":
    sys.exit(main())
