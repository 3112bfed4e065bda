"""The Python stack sampler under `stallscope run`: the main thread spins in
busy_in_here() for BUSY seconds, once called through a frame whose file
looks like torch.compile's machinery (torch/_dynamo/…: folded away), then a
forked child spins in child_spins(). Writes what it did to OUT (JSON).

usage: stack_sampler.py OUT BUSY
"""

import json
import os
import sys
import threading
import time

import torch  # noqa: F401  (the hooks, and with them the sampler, come with torch)


def busy_in_here(seconds):
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1
    return x


def child_spins(seconds):
    return busy_in_here(seconds)


# A caller whose file is "torch/_dynamo/…", as torch.compile's frames are.
_dynamo = {}
exec(compile("def dynamo_call(fn, *a):\n    return fn(*a)\n",  # pylint: disable=exec-used
             os.path.join(os.sep, "fake", "torch", "_dynamo", "eval_frame.py"), "exec"), _dynamo)


def main():
    out, busy = sys.argv[1], float(sys.argv[2])
    t0 = time.perf_counter()
    _dynamo["dynamo_call"](busy_in_here, busy)
    spent = time.perf_counter() - t0
    pid = os.fork()
    if pid == 0:
        child_spins(busy / 2)
        os._exit(0)
    os.waitpid(pid, 0)
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"tid": threading.get_native_id(), "pid": os.getpid(), "child": pid,
                   "busy_s": spent}, f)


if __name__ == "__main__":
    main()
