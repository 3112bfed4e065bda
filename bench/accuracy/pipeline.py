"""One generated PyTorch training pipeline of the ground-truth harness
(bench/accuracy.py, docs/accuracy.md). Written the way users write one: a
Dataset whose __getitem__ reads a file, decodes it and may wait on a remote
service, a DataLoader, and a loop with a model, a loss and optimizer.step().
Nothing here knows stallscope.

Every cost is a parameter, so the pipeline knows its own bottleneck by
construction: --decode-ms is CPU time per sample (thread CPU time, spent in
Python as a pure-Python decoder would), --rpc-ms an off-CPU wait per sample
(an RPC's sleep), the storage latency is the mount the data lies on (the
harness puts it on slowfs), --compute-ms the trainer's CPU time per step.

It prints its own truth, one line per step:
    step N: X ms wait Y ms start Z ms
X the wall time since the previous step ended, Y how long the step waited
for data (every DataLoader's __next__ in the step, the validation loader's
too), Z the part of Y spent on an epoch's first batch (its workers
starting).

usage: pipeline.py DATA_DIR [--steps S] [--batch B] [--workers W] [--prefetch P]
                   [--persistent] [--start fork|spawn|forkserver] [--decode-ms D]
                   [--rpc-ms R] [--compute-ms C] [--loaders 1|2] [--epoch-batches E]
       pipeline.py --make-data DATA_DIR [--sample-kb KB] [--files N]
"""

import argparse
import os
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

FEATURES = 256


def spin_cpu(ms):
    """Spends `ms` of this thread's CPU time."""
    end = time.thread_time() + ms / 1000.0
    x = 0
    while time.thread_time() < end:
        for i in range(200):
            x = (x * 31 + i) & 0xFFFFFFFF
    return x


class Samples(Dataset):
    def __init__(self, root, length, decode_ms, rpc_ms):
        self.files = sorted(os.path.join(root, f) for f in os.listdir(root) if f.endswith(".bin"))
        if not self.files:
            raise SystemExit(f"pipeline.py: no .bin files in {root}")
        self.length, self.decode_ms, self.rpc_ms = length, decode_ms, rpc_ms

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        with open(self.files[i % len(self.files)], "rb") as f:
            raw = f.read()
        seed = spin_cpu(self.decode_ms) if self.decode_ms > 0 else 0
        if self.rpc_ms > 0:
            time.sleep(self.rpc_ms / 1000.0)  # a lookup in a remote service
        g = torch.Generator().manual_seed((seed + i + raw[0]) & 0xFFFF)
        return torch.rand(FEATURES, generator=g), i % 10


def make_data(root, sample_kb, files):
    os.makedirs(root, exist_ok=True)
    for k in range(files):
        with open(os.path.join(root, f"{k:04d}.bin"), "wb") as f:
            f.write(os.urandom(sample_kb * 1024))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("data")
    p.add_argument("--make-data", action="store_true")
    p.add_argument("--sample-kb", type=int, default=64)
    p.add_argument("--files", type=int, default=32)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--prefetch", type=int, default=0, help="prefetch_factor (0: torch's default)")
    p.add_argument("--persistent", action="store_true")
    p.add_argument("--start", choices=("fork", "spawn", "forkserver"), default="fork")
    p.add_argument("--decode-ms", type=float, default=0)
    p.add_argument("--rpc-ms", type=float, default=0)
    p.add_argument("--compute-ms", type=float, default=10)
    p.add_argument("--loaders", type=int, choices=(1, 2), default=1,
                   help="2: a validation DataLoader too (no workers), two batches every 10 steps")
    p.add_argument("--epoch-batches", type=int, default=0,
                   help="batches per epoch (0: one epoch for the whole run)")
    a = p.parse_args()
    if a.make_data:
        make_data(a.data, a.sample_kb, a.files)
        return

    torch.set_num_threads(1)
    per_epoch = a.epoch_batches or a.steps
    train = Samples(a.data, per_epoch * a.batch, a.decode_ms, a.rpc_ms)
    opts = {}
    if a.workers > 0:
        opts = dict(multiprocessing_context=a.start, persistent_workers=a.persistent)
        if a.prefetch > 0:
            opts["prefetch_factor"] = a.prefetch
    loader = DataLoader(train, batch_size=a.batch, shuffle=True, num_workers=a.workers, **opts)
    val_loader = None
    if a.loaders == 2:
        val = Samples(a.data, 2 * a.batch, a.decode_ms, a.rpc_ms)
        val_loader = DataLoader(val, batch_size=a.batch)
    model = nn.Sequential(nn.Linear(FEATURES, 256), nn.ReLU(), nn.Linear(256, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()

    step, wait, start = 0, 0.0, 0.0
    last = time.perf_counter()
    while step < a.steps:
        it = iter(loader)
        first = True
        while step < a.steps:
            t = time.perf_counter()
            try:
                x, y = next(it)
            except StopIteration:
                wait += time.perf_counter() - t
                break
            wait += time.perf_counter() - t
            if first:  # an epoch's first batch: its workers starting
                start += time.perf_counter() - t
                first = False
            loss = loss_fn(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            spin_cpu(a.compute_ms)  # the rest of the model's work
            if val_loader is not None and step % 10 == 9:
                t = time.perf_counter()
                batches = list(val_loader)
                wait += time.perf_counter() - t
                with torch.no_grad():
                    for vx, _ in batches:
                        model(vx)
            now = time.perf_counter()
            print(f"step {step}: {(now - last) * 1e3:.3f} ms wait {wait * 1e3:.3f} ms "
                  f"start {start * 1e3:.3f} ms", flush=True)
            last, wait, start = now, 0.0, 0.0
            step += 1
    print(f"done {step} steps", flush=True)


if __name__ == "__main__":
    sys.exit(main())
