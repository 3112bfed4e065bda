"""Calls each format 1.1 wrapper of the stallscope module with known values
(test_python_module reads the trace back). Usage: module_kinds.py MODE

  record  the library is there: every call returns 0, bad arguments
          -EINVAL without raising; prints "key value" facts to compare
  absent  no library: every call returns -ENODEV without raising
"""
import errno
import os
import sys
import threading

import stallscope

RECORDERS = ("record_sample", "record_loader_config", "record_batch_handoff",
             "record_channel_handoff", "record_stack_sample")


def say(key, value):
    print(key, value, flush=True)


def expect(what, got, want):
    if got != want:
        say("FAIL", f"{what} returned {got}, expected {want}")
        sys.exit(1)


def record():
    t0 = stallscope.now()
    expect("sample", stallscope.record_sample(t0, t0 + 1500, 0xA11CE, 3, 17, 4242, worker=2), 0)
    expect("collate", stallscope.record_sample(t0, t0 + 900, 0xA11CE, 3, 17, 0, worker=2,
                                               part=stallscope.SAMPLE_COLLATE, count=32), 0)
    expect("loader_config", stallscope.record_loader_config(
        0xA11CE, 3, num_workers=4, prefetch_factor=2, batch_size=32,
        pin_memory=stallscope.PIN_INACTIVE, persistent_workers=True, drop_last=True,
        in_order=False, mp_context="forkserver", timeout_ms=1500, dataset_len=50000,
        dataset_kind="map", dataset="MapDataset", collate_fn="default_collate",
        sampler="RandomSampler", batch_sampler="BatchSampler", site="train.py:42",
        flags=stallscope.LOADER_GETITEMS, ts=t0 + 10), 0)
    # None where torch gives None (prefetch_factor with num_workers=0, batch_size=None)
    expect("loader_config_none", stallscope.record_loader_config(
        0xB0B, 0, prefetch_factor=None, batch_size=None, mp_context=None), 0)
    expect("batch_handoff", stallscope.record_batch_handoff(
        t0, t0 + 8000, 0xA11CE, 3, 17, worker=1, worker_pid=31337, requested=t0 + 2000), 0)
    expect("channel_handoff", stallscope.record_channel_handoff(
        t0, t0 + 700, 0xC4A77E1, stallscope.CHANNEL_MP_QUEUE, producer_pid=101,
        producer_tid=102, consumer_pid=201, consumer_tid=202, object_id=555, nbytes=65540,
        parts=3, requested=t0 + 300), 0)
    leaf = stallscope.intern("leaf")
    expect("intern again", stallscope.intern("leaf"), leaf)
    expect("stack", stallscope.record_stack_sample(
        t0 + 100, [leaf, "middle", "root"], interval_ns=20000000, cost_ns=1500,
        on_cpu=stallscope.CPU_RUNNING, flags=stallscope.STACK_LATE), 0)
    # A sampler thread sampling the main thread by its native id.
    main_tid = threading.get_native_id()
    rc = []
    sampler = threading.Thread(target=lambda: rc.append(stallscope.record_stack_sample(
        stallscope.now(), ["leaf"], tid=main_tid, interval_ns=50000000, cost_ns=900,
        on_cpu=stallscope.CPU_BLOCKED)))
    sampler.start()
    sampler.join()
    expect("stack from a sampler thread", rc, [0])
    # Bad arguments: refused, never raised.
    expect("sample of a str", stallscope.record_sample("x", t0, 1, 0, 0, 0), -errno.EINVAL)
    expect("sample ending early", stallscope.record_sample(t0 + 5, t0, 1, 0, 0, 0), -errno.EINVAL)
    expect("config without id", stallscope.record_loader_config(None), -errno.EINVAL)
    expect("frames not a list", stallscope.record_stack_sample(t0, None), -errno.EINVAL)
    expect("channel type", stallscope.record_channel_handoff(t0, t0, 1, 99), -errno.EINVAL)
    say("pid", os.getpid())
    say("main_tid", main_tid)


def absent():
    t = stallscope.now()
    expect("now", t, 0)
    expect("intern", stallscope.intern("leaf"), 0)
    expect("sample", stallscope.record_sample(t, t, 1, 0, 0, 0), -errno.ENODEV)
    expect("loader_config", stallscope.record_loader_config(1), -errno.ENODEV)
    expect("batch_handoff", stallscope.record_batch_handoff(t, t, 1, 0, 0), -errno.ENODEV)
    expect("channel_handoff", stallscope.record_channel_handoff(t, t, 1), -errno.ENODEV)
    expect("stack", stallscope.record_stack_sample(t, ["leaf"]), -errno.ENODEV)


if __name__ == "__main__":
    for name in RECORDERS + ("intern",):
        if name not in stallscope.__all__:
            say("FAIL", f"{name} not exported")
            sys.exit(1)
    if sys.argv[1] == "record":
        record()
    else:
        absent()
    say("done", 1)
