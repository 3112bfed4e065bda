"""Smoke scenarios of the PyTorch family (issue #25, docs/scenarios.md
"PyTorch smoke scenarios"): pipelines users write that must not crash
the trainer or mislead the report. Each runs smoke_train.py KIND on
Debian's torch under `stallscope run --exit-after-window` with a short
window and checks structure, not timing (they run on busy 2-core CI
machines):

- the run exits 0 and stallscope's output has no Python traceback;
- a trainer's own exit status comes back through `stallscope run`
  (a run that ends before its window, exiting 3);
- the report has steady steps, at least the window's count, and a
  verdict (no "no steps");
- every remedy that names a DataLoader names a line of smoke_train.py
  that constructs one;
- iterable: the DataLoader is recorded as an iterable dataset;
- spawn: the workers (spawn context) are recorded, the hooks pickled;
- a lane of the worker's in the step timelines names its pid and kind;
- trainval: two DataLoaders, the train one fed the optimizer, remedies
  name the train loader's line only; the validation loader's waits are
  not in the train steps;
- ddp: two gloo ranks (env:// on localhost, a DistributedSampler), each a
  `stallscope run --out DIR` as a launcher starts them, in one report,
  each with its steps and half the node's CPUs as its budget; a
  more_workers value times the node's ranks fits the usable CPUs.

usage: smoke.py STALLSCOPE_BIN KIND [--keep DIR]
Exit: 0 pass, 1 fail, 77 skip (no torch).
"""

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"
TRAIN = os.path.join(HERE, "smoke_train.py")
SKIP = 77
KINDS = ("iterable", "spawn", "trainval", "ddp")
START, STEPS = 3, 12


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loader_lines():
    """The lines of smoke_train.py that construct a DataLoader, by kind
    (their `# smoke: KIND` comment; the validation loader's is `val`)."""
    lines = {}
    with open(TRAIN) as f:
        for n, line in enumerate(f, 1):
            m = re.search(r"= DataLoader\(.*# smoke: (\w+)$", line)
            if m:
                lines[m.group(1)] = n
    return lines


class Smoke:
    def __init__(self, kind, stallscope, work):
        self.kind, self.stallscope, self.work = kind, stallscope, work
        self.failures = []

    def check(self, ok, what):
        print(f"  {'ok  ' if ok else 'FAIL'} {what}", flush=True)
        if not ok:
            self.failures.append(what)
        return ok

    def trainer(self, extra=()):
        return [PY, TRAIN, self.kind, "--workers", "1"] + list(extra)

    def run(self, out, cmd, window=True):
        argv = [self.stallscope, "run", "--out", out]
        if window:
            argv += ["--start-step", str(START), "--steps", str(STEPS), "--exit-after-window"]
        argv += ["--"] + cmd
        t0 = time.perf_counter()
        if self.kind != "ddp":
            p = subprocess.run(argv, capture_output=True, text=True, timeout=180)
            rc, log = p.returncode, p.stdout + p.stderr
        else:
            rc, log = self.ranks(argv)
        print(f"  ran {shlex.join(argv[1:4])} ... in {time.perf_counter() - t0:.1f} s: "
              f"exit {rc}", flush=True)
        return rc, log

    def ranks(self, argv):
        """Two ranks on this node, each a `stallscope run` with the rank's
        environment as a launcher sets it, into one run directory (rank 0
        reports both). Debian's torch 1.13 torchrun fails on this Python
        (elastic's to_map: 'NoneType' object has no attribute 'get'), so the
        driver is the launcher."""
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                   WORLD_SIZE="2", LOCAL_WORLD_SIZE="2")
        ps = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env=dict(env, RANK=str(r), LOCAL_RANK=str(r)))
              for r in range(2)]
        outs, rcs = [], []
        for p in ps:
            try:
                out, _ = p.communicate(timeout=180)
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate()
            outs.append(out)
            rcs.append(p.returncode)
        log = "".join(f"--- rank {r}\n{o}" for r, o in enumerate(outs))
        return next((c for c in rcs if c != 0), 0), log

    def all(self):
        print(f"smoke {self.kind}", flush=True)
        t0 = time.perf_counter()
        self.windowed()
        if self.kind in ("iterable", "spawn"):  # the workers' exit path, two contexts
            self.exit_status()
        print(f"  {self.kind}: {time.perf_counter() - t0:.1f} s in all", flush=True)
        if self.failures:
            print(f"FAIL {self.kind}: " + "; ".join(self.failures), flush=True)
            return 1
        print(f"PASS {self.kind}", flush=True)
        return 0

    def exit_status(self):
        # A trainer that ends before its window: its own exit status, 3.
        rc, log = self.run(os.path.join(self.work, "exit"),
                           self.trainer(["--batches", "4", "--exit-code", "3"]), window=False)
        self.check(rc == 3, f"the trainer's exit status 3 comes back (got {rc})")
        self.check("Traceback" not in log, "no Python traceback")

    def windowed(self):
        out = os.path.join(self.work, "run")
        rc, log = self.run(out, self.trainer(["--batches", "200"]))
        if not self.check(rc == 0, f"stallscope run exits 0 (got {rc})"):
            print(log[-3000:])
            return
        self.check("Traceback" not in log, "no Python traceback in the run's output")
        try:
            with open(os.path.join(out, "report.json")) as f:
                report = json.load(f)
        except (OSError, ValueError) as e:
            self.check(False, f"report.json readable: {e}")
            return
        ranks = report.get("ranks", [])
        want = 2 if self.kind == "ddp" else 1
        if not self.check(len(ranks) == want, f"{want} rank(s) in the report (got {len(ranks)})"):
            return
        self.check(sorted(r.get("rank") for r in ranks) == list(range(want)),
                   f"ranks {list(range(want))}: {[r.get('rank') for r in ranks]}")
        lines = loader_lines()
        for rank in ranks:
            self.rank(rank, lines, report)

    def rank(self, rank, lines, report):
        r = rank.get("rank")
        steps = rank.get("steps", {})
        cause = rank.get("cause", "")
        print(f"  rank {r}: {rank.get('summary', '')}")
        for x in rank.get("remedies", [])[:3]:
            print(f"  rank {r} remedy {x['id']}: {x.get('pytorch_knob', '')}")
        self.check(steps.get("steady", 0) >= STEPS,
                   f"rank {r}: >= {STEPS} steady steps (got {steps.get('steady')} of "
                   f"{steps.get('total')})")
        self.check(rank.get("step_source", {}).get("kind") == "step_events",
                   f"rank {r}: steps from the optimizer's step events "
                   f"({rank.get('step_source')})")
        self.check(bool(cause) and "no steps" not in cause and "no step" not in
                   rank.get("summary", ""), f"rank {r}: a verdict ({cause})")
        if self.kind == "ddp":
            cpu = rank.get("cpu", {})
            usable = len(os.sched_getaffinity(0))
            self.check(cpu.get("ranks_on_node") == 2 and
                       abs(cpu.get("budget_cores", 0) - usable / 2) < 1e-6,
                       f"rank {r}: 2 ranks on the node share its {usable} CPUs "
                       f"(ranks_on_node {cpu.get('ranks_on_node')}, budget {cpu.get('budget_cores')})")
        dls = rank.get("dataloaders", [])
        train_line = lines[self.kind]
        fed = [d for d in dls if d.get("fed_optimizer")]
        self.check(len(fed) == 1 and fed[0].get("site", "").endswith(f"smoke_train.py:{train_line}"),
                   f"rank {r}: the DataLoader of smoke_train.py:{train_line} fed the optimizer "
                   f"({[d.get('site') for d in fed]})")
        if self.kind == "trainval":
            val = lines["val"]
            sites = sorted(d.get("site", "").rsplit(":", 1)[-1] for d in dls)
            self.check(sites == sorted([str(train_line), str(val)]),
                       f"two DataLoaders, lines {train_line} and {val} (got {sites})")
            v = [d for d in dls if d.get("site", "").endswith(f"smoke_train.py:{val}")]
            self.check(len(v) == 1 and not v[0].get("fed_optimizer") and v[0].get("batches", 0) > 0
                       and v[0].get("waits_in_steps", -1) == 0,
                       "the validation loader recorded, its waits outside the train steps "
                       f"({[(d.get('batches'), d.get('waits'), d.get('waits_in_steps')) for d in v]})")
            t = fed[0] if fed else {}
            self.check(t.get("batches", 0) >= STEPS and t.get("waits_in_steps", 0) >= STEPS,
                       f"the train loader's batches are the steps' ({t.get('batches')} batches, "
                       f"{t.get('waits_in_steps')} waits in steps)")
        if self.kind == "iterable" and fed:
            self.check(fed[0].get("config", {}).get("dataset_kind") == "iterable",
                       f"dataset kind iterable ({fed[0].get('config', {}).get('dataset_kind')})")
        if fed:
            cfg = fed[0].get("config", {})
            ctx = "spawn" if self.kind == "spawn" else "fork"
            self.check(cfg.get("mp_context") == ctx and cfg.get("num_workers") == 1,
                       f"rank {r}: num_workers 1, context {ctx} ({cfg.get('num_workers')}, "
                       f"{cfg.get('mp_context')})")
            self.check(len(fed[0].get("workers", [])) == 1 and fed[0]["workers"][0].get("batches", 0) > 0,
                       f"rank {r}: its worker recorded ({fed[0].get('workers')})")
            # The step timelines: the worker's lanes carry its pid and kind. Whether
            # its fetches overlap the drawn steps depends on timing (a busy machine
            # can leave the longest step all data wait), so only their form is checked.
            pid = (fed[0].get("workers") or [{}])[0].get("pid")
            lanes = [(l.get("name", ""), l.get("kind")) for t in rank.get("timelines", [])
                     for l in t.get("lanes", []) if l.get("spans_ns")]
            mine = [(n, k) for n, k in lanes if f"pid {pid}" in n]
            print(f"  rank {r} timeline lanes: {lanes}")
            self.check(all(k in ("preprocess", "reads") and n.endswith(f"pid {pid}: {k}")
                           for n, k in mine),
                       f"rank {r}: the worker's lanes are named by its pid and kind ({mine})")
        all_lines = set(lines.values())
        for x in rank.get("remedies", []):
            knob = x.get("pytorch_knob", "") + " " + x.get("try", "")
            for m in re.finditer(r"smoke_train\.py:(\d+)", knob):
                self.check(int(m.group(1)) == train_line,
                           f"rank {r}: {x['id']} names the train DataLoader's line "
                           f"{train_line}: {m.group(0)}")
                self.check(int(m.group(1)) in all_lines, f"line {m.group(1)} is a DataLoader")
            if x["id"] == "more_workers" and self.kind == "ddp":
                m = re.search(r"num_workers=(\d+)", x.get("pytorch_knob", ""))
                budget = rank.get("cpu", {}).get("budget_cores")
                usable = len(os.sched_getaffinity(0))
                self.check(m is not None and int(m.group(1)) * 2 <= usable,
                           f"rank {r}: num_workers x 2 ranks <= {usable} usable CPUs "
                           f"({x.get('pytorch_knob')}; budget {budget})")


def main():
    if len(sys.argv) < 3 or sys.argv[2] not in KINDS:
        print(__doc__, file=sys.stderr)
        return 2
    if subprocess.run([PY, "-c", "import torch"], capture_output=True).returncode != 0:
        print(f"SKIP: {PY} has no torch", flush=True)
        return SKIP
    keep = sys.argv[sys.argv.index("--keep") + 1] if "--keep" in sys.argv else None
    work = tempfile.mkdtemp(prefix=f"stallscope-smoke-{sys.argv[2]}-")
    try:
        return Smoke(sys.argv[2], sys.argv[1], work).all()
    finally:
        if keep:
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(work, keep)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
