#!/usr/bin/env python3
"""Holistic Trace Analysis (HTA) on the same PyTorch profiler trace as
bench/kineto_import: its load time and its temporal breakdown, to print next
to stallscope's.

    python3 bench/kineto_import_hta.py TRACE.json

Needs `pip install holistictraceanalysis` (in a virtual environment; HTA
0.5.0 needs pandas < 2.3 and numpy < 2). Prints `HTA unavailable: <why>`
and exits 0 when it cannot run. CPU time is getrusage of this process and
its children (HTA may parse in worker processes), like the C++ bench's.
"""
import os
import resource
import sys
import tempfile
import time


def cpu_s():
    t = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        u = resource.getrusage(who)
        t += u.ru_utime + u.ru_stime
    return t


def main():
    if len(sys.argv) != 2:
        print("usage: kineto_import_hta.py TRACE.json", file=sys.stderr)
        return 2
    trace = os.path.abspath(sys.argv[1])
    try:
        from hta.trace_analysis import TraceAnalysis
    except Exception as e:  # not installed, or its dependencies are not
        print(f"HTA unavailable: {e}")
        return 0
    with tempfile.TemporaryDirectory() as d:
        # HTA reads a directory of per-rank traces.
        os.symlink(trace, os.path.join(d, "rank0.json"))
        c0, w0 = cpu_s(), time.perf_counter()
        try:
            ta = TraceAnalysis(trace_dir=d)
        except Exception as e:
            print(f"HTA unavailable: could not load the trace: {e}")
            return 0
        c1, w1 = cpu_s(), time.perf_counter()
        df = ta.get_temporal_breakdown(visualize=False)
        c2, w2 = cpu_s(), time.perf_counter()
    mb = os.path.getsize(trace) / 1e6
    print(f"HTA load: {c1 - c0:.2f} s CPU, {w1 - w0:.2f} s wall; "
          f"temporal breakdown: {c2 - c1:.2f} s CPU, {w2 - w1:.2f} s wall")
    print("HTA temporal breakdown:")
    print(df.to_string(index=False))
    print(f"RESULT hta_load_breakdown_mbps {mb / max(c2 - c0, 1e-9):.0f} MB/s target >= 0 PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
