#!/usr/bin/env bash
# Runs the GPU checks on the lent GPU machine, within 4 minutes, using only
# what scripts/gpu-bundle.sh built (gpu-bundle/) and the machine's own CUDA,
# NCCL and PyTorch. stallscope itself is the wheel of gpu-bundle/wheel/,
# installed into a venv of the machine's python3 (--system-site-packages:
# its PyTorch; no network needed, the wheel carries its libraries), as a
# user installs it: `stallscope` is that venv's command and `python3` its
# interpreter. Writes logs, traces and PyTorch-profiler traces to $OUT
# (the device tool brings that folder back). Exits 0 when every check
# passed, 1 when one failed, 2 when there is no GPU here (nothing run).
#
#   checks: CUPTI kinds and launch->kernel order (test_gpu_cupti); the
#   sample workload compute-bound and pageable-H2D-bound with the analyzer's
#   verdicts; the sample trainer (--device cuda) over the real loader,
#   compute-bound and pageable-H2D-bound, with the same verdicts; a CUDA-graph replay with capture toggled off/on twice; a
#   1-rank NCCL communicator loading our profiler plugin (init called,
#   version printed, the all_reduce recorded with its bytes); `stallscope
#   run -- python3` on a GPU DataLoader loop; torch.profiler under
#   `stallscope run` (its kernels present, GPU rows inside the CPU span,
#   the hand-over marked in our trace), keeping two profiler traces; those
#   traces analyzed (steps inferred without ProfilerStep#N) and two more
#   captured with a .item() per step and with many tiny kernels (their
#   sync and launch host gaps), the reports kept as fixtures.
#   The Python hooks on the machine's PyTorch (2.x): tests/attach/torch_contexts.py with
#   spawn and forkserver DataLoader workers; tests/attach/torch_loader.py's
#   DataLoaders recorded from inside (check_loader_trace.py) and a
#   STALLSCOPE_SET setting applied; KeyboardInterrupt under the shim.
set -uo pipefail
cd "$(dirname "$0")/.."
B=$PWD/gpu-bundle
OUT=${OUT:-/tmp/stallscope-gpu-check}
mkdir -p "$OUT"
export STALLSCOPE_QUIET=0
PASS=0
FAIL=0
START=$(date +%s)

ok() { echo "PASS $1"; PASS=$((PASS + 1)); }
bad() { echo "FAIL $1: $2"; FAIL=$((FAIL + 1)); }
step() { echo "== $1 ($(( $(date +%s) - START )) s)"; }

if ! { command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; } ||
   ! ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1'; then
  echo "gpu-check: no GPU or no CUDA driver here: nothing run (this script needs the GPU machine)"
  exit 2
fi
ls "$B"/wheel/stallscope-*.whl >/dev/null 2>&1 ||
  { echo "gpu-check: $B/wheel missing: run scripts/gpu-bundle.sh first and carry gpu-bundle"; exit 1; }
nvidia-smi -L | head -4

step "install the wheel into a venv"
VENV=$OUT/venv
rm -rf "$VENV"
# A python3 without ensurepip makes the venv without pip; the machine's pip
# then installs into it.
if python3 -m venv --system-site-packages "$VENV" >"$OUT/venv.log" 2>&1 && [ -x "$VENV/bin/pip" ]; then
  pip_in_venv=("$VENV/bin/pip")
else
  rm -rf "$VENV"
  python3 -m venv --without-pip --system-site-packages "$VENV" >>"$OUT/venv.log" 2>&1
  pip_in_venv=(python3 -m pip --python "$VENV/bin/python")
fi
"${pip_in_venv[@]}" install --no-index --no-deps "$B"/wheel/stallscope-*.whl >>"$OUT/venv.log" 2>&1
S=$VENV/bin/stallscope
if [ -x "$S" ] && "$S" --version >"$OUT/version.txt" 2>&1; then
  ok "wheel installed: stallscope $(cat "$OUT/version.txt")"
else
  echo "gpu-check: the wheel did not install (see $OUT/venv.log):"; tail -5 "$OUT/venv.log"; exit 1
fi
export PATH=$VENV/bin:$PATH   # python3 is the venv's from here on
CUDA_LIB=$(python3 -c 'import os, stallscope; print(os.path.join(os.path.dirname(stallscope.__file__), "_core", "lib", "libstallscope_cuda.so"))')

step "CUPTI kinds, monotonic clock, launch before kernel, hand-over"
if timeout 60 "$B/bin/test_gpu_cupti" --log_level=test_suite >"$OUT/test_gpu_cupti.log" 2>&1; then
  ok "test_gpu_cupti"
else bad "test_gpu_cupti" "$(tail -5 "$OUT/test_gpu_cupti.log" | tr '\n' ' ')"; fi

# Runs the workload in mode $1 into run dir $2 and checks the report's cause.
workload() {
  local mode=$1 dir=$OUT/$2 want=$3
  rm -rf "$dir"
  STALLSCOPE_OUT=$dir timeout 60 "$B/bin/gpu_workload" "$mode" --steps 30 --attach "$CUDA_LIB" \
    >"$OUT/$2.log" 2>&1 || { bad "workload $mode" "exit $? ($(tail -2 "$OUT/$2.log" | tr '\n' ' '))"; return; }
  "$S" report "$dir" >"$OUT/$2.report.txt" 2>&1
  "$S" report --json "$dir" >"$OUT/$2.report.json" 2>/dev/null
  local cause
  cause=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print([x.get("cause","") for x in r.get("ranks",[r])][0])' \
    "$OUT/$2.report.json" 2>/dev/null)
  if [[ "$cause" == *"$want"* ]]; then ok "workload $mode: $cause"
  else bad "workload $mode" "cause '$cause', wanted '$want' (see $2.report.txt)"; fi
}
step "sample workload: compute-bound"
workload compute run-compute "compute-bound"
step "sample workload: pageable H2D"
workload h2d-pageable run-h2d "H2D copy"

# The sample trainer on the GPU (--device cuda): the loader's pipeline with
# spin kernels of the modelled time and the real batch copied to the device.
trainer_run() {
  local name=$1 want=$2 dir=$OUT/$1
  shift 2
  rm -rf "$dir"
  STALLSCOPE_OUT=$dir timeout 60 "$B/bin/trainer" --data "$OUT/trainer-ds" --device cuda "$@" \
    >"$OUT/$name.log" 2>&1 || { bad "trainer $name" "exit $? ($(tail -2 "$OUT/$name.log" | tr '\n' ' '))"; return; }
  grep -q "trainer: CUDA device" "$OUT/$name.log" || { bad "trainer $name" "not on the CUDA device"; return; }
  "$S" report "$dir" >"$OUT/$name.report.txt" 2>&1
  "$S" report --json "$dir" >"$OUT/$name.report.json" 2>/dev/null
  local cause
  cause=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print([x.get("cause","") for x in r.get("ranks",[r])][0])' \
    "$OUT/$name.report.json" 2>/dev/null)
  if [[ "$cause" == *"$want"* ]]; then ok "trainer $name: $cause"
  else bad "trainer $name" "cause '$cause', wanted '$want' (see $name.report.txt)"; fi
}
step "sample trainer --device cuda: compute-bound"
rm -rf "$OUT/trainer-ds"
timeout 60 "$B/bin/gen_dataset" --out "$OUT/trainer-ds" --samples 400 --size-kb 16 >"$OUT/gen_dataset.log" 2>&1 ||
  bad "gen_dataset" "$(tail -2 "$OUT/gen_dataset.log" | tr '\n' ' ')"
trainer_run trainer-compute "compute-bound" --steps 30 --compute-ms 20
step "sample trainer --device cuda: pageable H2D in the step"
trainer_run trainer-h2d "H2D copy" --steps 20 --compute-ms 2 --copy-in-step --loader-pinned=off \
  --loader-batch-size=32 --sample-bytes 4000000

step "CUDA graph replay with capture toggled off and on twice"
if STALLSCOPE_OUT=$OUT/run-graph timeout 30 "$B/bin/gpu_workload" graph-toggle --attach "$CUDA_LIB" \
     >"$OUT/run-graph.log" 2>&1 && grep -q "toggled off/on twice: ok" "$OUT/run-graph.log"; then
  ok "graph replay with capture toggles"
else bad "graph replay" "$(tail -3 "$OUT/run-graph.log" | tr '\n' ' ')"; fi

step "NCCL: one rank, our profiler plugin"
cat >"$OUT/nccl_one_rank.py" <<'PY'
import os, torch, torch.distributed as dist
os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("MASTER_PORT", "29533")
dist.init_process_group("nccl", rank=0, world_size=1)
x = torch.ones(1 << 20, device="cuda")          # 4 MiB of float32
for _ in range(3): dist.all_reduce(x)
torch.cuda.synchronize()
print("nccl version", torch.cuda.nccl.version())
dist.destroy_process_group()
PY
rm -rf "$OUT/run-nccl"
STALLSCOPE_OUT=$OUT/run-nccl NCCL_PROFILER_PLUGIN=$CUDA_LIB NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV \
  timeout 90 python3 "$OUT/nccl_one_rank.py" >"$OUT/nccl.log" 2>&1
grep -E "nccl version|PROFILER|profiler|stallscope" "$OUT/nccl.log" | head -8
if grep -q "NCCL profiler plugin v[0-9] loaded" "$OUT/nccl.log"; then
  ok "NCCL loaded the plugin ($(grep -o 'profiler plugin v[0-9]' "$OUT/nccl.log" | head -1))"
else bad "NCCL plugin" "no 'NCCL profiler plugin vN loaded' line (NCCL older than 2.26 knows only v1-v3)"; fi
"$S" export --chrome "$OUT/nccl.chrome.json" "$OUT/run-nccl" >/dev/null 2>&1
if python3 - "$OUT/nccl.chrome.json" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))
ev = ev["traceEvents"] if isinstance(ev, dict) else ev
hits = [e for e in ev if "AllReduce" in e.get("name", "")]
print("collective events:", len(hits), (hits[0].get("args") if hits else ""))
sys.exit(0 if hits and any("4194304" in json.dumps(e.get("args", {})) for e in hits) else 1)
PY
then ok "all_reduce recorded with 4194304 bytes"; else bad "NCCL bytes" "no AllReduce event with 4194304 bytes"; fi

step "stallscope run -- python3: GPU DataLoader loop, torch.profiler hand-over"
cat >"$OUT/loop.py" <<'PY'
import os, sys, torch
from torch.utils.data import DataLoader, TensorDataset
out = sys.argv[1]
data = TensorDataset(torch.randn(4096, 1024), torch.randint(0, 10, (4096,)))
loader = DataLoader(data, batch_size=64, num_workers=2, pin_memory=True)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
def epoch(n):
    for i, (x, y) in enumerate(loader):
        if i == n: break
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
    torch.cuda.synchronize()
epoch(30)                                   # stallscope records these steps
for k in range(2):                          # then the PyTorch profiler takes CUPTI
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as p:
        epoch(8)
    p.export_chrome_trace(os.path.join(out, f"kineto_loop_{k}.json"))
print("loop done")
PY
rm -rf "$OUT/run-python"
timeout 120 "$S" run --out "$OUT/run-python" --start-step 2 --steps 20 -- \
  python3 "$OUT/loop.py" "$OUT" >"$OUT/python.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "loop done" "$OUT/python.log"; then ok "stallscope run -- python3 (exit 0)"
else bad "stallscope run -- python3" "exit $rc ($(tail -3 "$OUT/python.log" | tr '\n' ' '))"; fi
# The CUPTI the CUDA library used: PyTorch's (loaded by the program), never one of the wheel's.
if grep -q "stallscope: CUPTI .* (already loaded by the program)" "$OUT/python.log"; then
  ok "$(grep -o 'CUPTI .* (already loaded by the program)' "$OUT/python.log" | head -1)"
else bad "CUPTI source" "$(grep 'stallscope: CUPTI' "$OUT/python.log" | head -1)"; fi
if python3 - "$OUT" <<'PY'
import json, sys, os
bad = []
for k in range(2):
    path = os.path.join(sys.argv[1], f"kineto_loop_{k}.json")
    ev = json.load(open(path))["traceEvents"]
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    cpu = [e for e in ev if e.get("cat") in ("cpu_op", "python_function") and "dur" in e]
    if not kernels: bad.append(f"{path}: no kernels"); continue
    lo, hi = min(e["ts"] for e in cpu), max(e["ts"] + e["dur"] for e in cpu)
    inside = sum(lo <= e["ts"] <= hi + 1e5 for e in kernels) / len(kernels)
    print(f"{os.path.basename(path)}: {len(kernels)} kernels, {inside:.0%} inside the CPU span")
    if inside < 0.95: bad.append(f"{path}: GPU rows not aligned with CPU rows")
print("\n".join(bad)); sys.exit(1 if bad else 0)
PY
then ok "torch.profiler traces complete and aligned under stallscope"; else bad "torch.profiler" "see above"; fi
"$S" export --chrome "$OUT/python.chrome.json" "$OUT/run-python" >/dev/null 2>&1
if grep -q "GPU activity handed to" "$OUT/python.chrome.json" "$OUT/python.log" 2>/dev/null; then
  ok "hand-over to the PyTorch profiler marked"
else bad "hand-over mark" "no 'GPU activity handed to' in the trace or log"; fi
if grep -q '"cat":"kernel"' "$OUT/python.chrome.json" 2>/dev/null; then ok "kernels recorded before the hand-over"
else bad "kernels" "no kernel events in the stallscope trace of the python run"; fi

step "real profiler traces: steps inferred without marks, host gaps classed"
# The two captures above have no ProfilerStep#N: the importer infers the
# steps (docs/kineto-import.md). Two more loops are captured with marked
# steps: a .item() every step (sync gaps) and many tiny kernels (launch
# gaps). The reports are kept in $OUT as fixtures.
cat >"$OUT/gaps.py" <<'PY'
import os, sys, torch
out, kind = sys.argv[1], sys.argv[2]
x = torch.randn(256, 256, device="cuda")
w = torch.randn(256, 256, device="cuda", requires_grad=True)
opt = torch.optim.SGD([w], lr=1e-3)
def step():
    if kind == "sync":
        y = (x @ w).relu().sum()
        y.backward(); opt.step(); opt.zero_grad()
        return y.item()                      # a device-to-host sync every step
    t = x
    for _ in range(200):                     # 200 tiny kernels per step
        t = t * 1.0001 + 0.0001
    return t
for _ in range(5): step()
torch.cuda.synchronize()
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                        torch.profiler.ProfilerActivity.CUDA]) as p:
    for _ in range(12):
        step(); p.step()
p.export_chrome_trace(os.path.join(out, f"kineto_gaps_{kind}.json"))
print("gaps done")
PY
for kind in sync launch; do
  timeout 90 python3 "$OUT/gaps.py" "$OUT" "$kind" >"$OUT/gaps-$kind.log" 2>&1 ||
    bad "profiler capture ($kind)" "$(tail -3 "$OUT/gaps-$kind.log" | tr '\n' ' ')"
done
for t in kineto_loop_0 kineto_loop_1 kineto_gaps_sync kineto_gaps_launch; do
  [ -f "$OUT/$t.json" ] || continue
  "$S" report --json "$OUT/$t.json" >"$OUT/$t.report.json" 2>"$OUT/$t.report.err"
  "$S" report "$OUT/$t.json" >"$OUT/$t.report.txt" 2>&1
done
if python3 - "$OUT" <<'PY'
import json, os, sys
out, bad = sys.argv[1], []
def rank(name):
    p = os.path.join(out, name + ".report.json")
    return json.load(open(p))["ranks"][0] if os.path.exists(p) and os.path.getsize(p) else None
for t in ("kineto_loop_0", "kineto_loop_1"):
    r = rank(t)
    if r is None: bad.append(f"{t}: no report"); continue
    print(t, r["step_source"], r["steps"]["total"], r["cause"])
    if r["steps"]["total"] < 1 or r["step_source"]["kind"] not in ("inferred", "whole_trace"):
        bad.append(f"{t}: steps {r['steps']['total']} from {r['step_source']['kind']}")
for t, cls in (("kineto_gaps_sync", "sync"), ("kineto_gaps_launch", "launch")):
    r = rank(t)
    if r is None: bad.append(f"{t}: no report"); continue
    g = r["host_gaps"]
    shares = {k: v["share"] for k, v in g["classes"].items()}
    top = [m["id"] for m in r["remedies"][:3]]
    print(t, r["cause"], "classes", shares, "sync call", g["sync_call"], "remedies", top)
    if not g["analyzed"] or shares.get(cls, 0) <= 0:
        bad.append(f"{t}: no {cls} gaps ({shares})")
print("\n".join(bad)); sys.exit(1 if bad else 0)
PY
then ok "real profiler traces: inferred steps, sync and launch gaps"
else bad "real profiler traces" "see above (reports in \$OUT/kineto_*.report.*)"; fi

step "Python hooks on this PyTorch: spawn and forkserver DataLoader workers, signal handlers"
for method in spawn forkserver; do
  rm -rf "$OUT/run-$method"
  timeout 120 "$S" run --out "$OUT/run-$method" -- \
    python3 tests/attach/torch_contexts.py "$method" 12 >"$OUT/hooks-$method.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ] && grep -q "trained 12 steps with $method" "$OUT/hooks-$method.log"; then
    ok "hooks transparent, $method workers trained 12 steps"
  else bad "hooks under $method" "exit $rc ($(tail -3 "$OUT/hooks-$method.log" | tr '\n' ' '))"; fi
done
# The DataLoader from inside on this torch (2.x: prefetch_factor=None,
# in_order, __getitems__, the optimizer post hook, torch.amp's GradScaler),
# held against what the trainer did (tests/attach/check_loader_trace.py),
# and a setting through --set applied.
for flags in "fork" "spawn --persistent --zip --sanity --scaler-skips" "forkserver --iterable" \
             "fork --getitems --workers 0 --epochs 1"; do
  set -- $flags
  method=$1; shift
  tag=$(echo "$flags" | tr -c 'a-z0-9' '-')
  rm -rf "$OUT/run-loader-$tag"
  timeout 120 "$S" run --out "$OUT/run-loader-$tag" -- \
    python3 tests/attach/torch_loader.py "$method" "$OUT/loader-$tag.json" "$@" \
    >"$OUT/loader-$tag.log" 2>&1
  rc=$?
  "$S" export --chrome "$OUT/loader-$tag.chrome.json" "$OUT/run-loader-$tag" \
    >/dev/null 2>&1
  if [ $rc -eq 0 ] && python3 tests/attach/check_loader_trace.py "$OUT/loader-$tag.chrome.json" \
       "$OUT/loader-$tag.json" >"$OUT/loader-$tag.check" 2>&1; then
    ok "DataLoader recorded from inside ($flags)"
  else bad "DataLoader from inside ($flags)" "exit $rc; $(tail -4 "$OUT/loader-$tag.check" "$OUT/loader-$tag.log" 2>/dev/null | tr '\n' ' ')"; fi
done
rm -rf "$OUT/run-loader-set"
STALLSCOPE_SET="dataloader[0].num_workers=1;dataloader[0].pin_memory=true" \
  timeout 120 "$S" run --out "$OUT/run-loader-set" -- \
  python3 tests/attach/torch_loader.py fork "$OUT/loader-set.json" --print-config --epochs 1 \
  >"$OUT/loader-set.log" 2>&1
if grep -q "config num_workers=1 prefetch_factor=2 persistent_workers=False pin_memory=True" \
     "$OUT/loader-set.log" && grep -q "set applied dataloader\[0\].num_workers=1" "$OUT/loader-set.log"
then ok "a setting applied through STALLSCOPE_SET"
else bad "STALLSCOPE_SET" "$(grep -E 'config|set ' "$OUT/loader-set.log" | tr '\n' ' ')"; fi
# With CUDA the pin-memory thread runs: its copies are ranges on its own track.
"$S" export --chrome "$OUT/loader-set.chrome.json" "$OUT/run-loader-set" >/dev/null 2>&1
if python3 - "$OUT/loader-set.chrome.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); ev = d["traceEvents"] if isinstance(d, dict) else d
pins = [e for e in ev if e.get("name") == "DataLoader pin_memory" and e.get("cat") == "range"]
configs = [e["args"]["pin_memory"] for e in ev if e.get("cat") == "loader_config"
           and e["args"]["num_workers"] == 1]
print("pin ranges", len(pins), "configs", configs)
sys.exit(0 if pins and configs == ["on"] else 1)
PY
then ok "pin-memory thread's copies recorded, pin_memory on"
else bad "pin_memory" "no pin-memory ranges, or pin_memory not 'on' in the recorded configuration"; fi

timeout 60 "$S" run --out "$OUT/run-signals" -- python3 -c '
import os, signal, sys, time
if signal.getsignal(signal.SIGINT) is not signal.default_int_handler: sys.exit(5)
try:
    os.kill(os.getpid(), signal.SIGINT); time.sleep(10)
except KeyboardInterrupt:
    sys.exit(0)
sys.exit(7)' >"$OUT/signals.log" 2>&1
rc=$?
if [ $rc -eq 0 ]; then ok "KeyboardInterrupt as without stallscope"
else bad "Python signal handlers" "exit $rc (5: SIGINT handler not Python's; 7: no KeyboardInterrupt)"; fi

echo "gpu-check: $PASS passed, $FAIL failed in $(( $(date +%s) - START )) s; outputs in $OUT"
[ $FAIL -eq 0 ]
