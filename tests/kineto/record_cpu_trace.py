#!/usr/bin/python3
"""Records the two small PyTorch profiler traces the kineto tests read.

Run with Debian's python3-torch (CPU only):

    /usr/bin/python3 tests/kineto/record_cpu_trace.py tests/kineto/data

writes
  cpu_loader_bound.json.gz   a DataLoader whose 2 workers sleep 30 ms per
                             batch while the model needs ~3 ms: the trainer
                             waits in `enumerate(DataLoader)#...__next__`
  cpu_compute_bound.json.gz  an in-memory DataLoader feeding ~10-100 ms (machine-dependent) of
                             matrix products per step: no data wait to speak of

Both run torch.profiler.profile with a schedule over 8 steps. Debian's
torch 1.13 is built without Kineto, so it writes the autograd profiler's
Chrome trace: a top-level array of "X" events without "cat", on pid
"CPU functions" -- one of the variants the importer reads. The files are
committed: the tests never run this script.
"""
import gzip
import os
import shutil
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile, schedule
from torch.utils.data import DataLoader, Dataset

BATCH_SLEEP_S = 0.030  # per batch, in a worker (loader-bound trace)
STEPS = 8


class SlowDataset(Dataset):
    """Each item costs `sleep_s`: a stand-in for storage + decoding."""

    def __init__(self, n, sleep_s, dim):
        self.n, self.sleep_s, self.dim = n, sleep_s, dim

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return torch.full((self.dim,), float(i))


def train(loader, model, matmuls, out_json):
    sched = schedule(wait=1, warmup=1, active=STEPS - 2)
    with profile(activities=[ProfilerActivity.CPU], schedule=sched) as prof:
        for i, x in enumerate(loader):
            y = model(x)
            for _ in range(matmuls):
                y = model(y)
            y.sum().item()
            prof.step()
            if i + 1 >= STEPS:
                break
    prof.export_chrome_trace(out_json)


def gzip_file(src, dst):
    with open(src, "rb") as f, gzip.open(dst, "wb", compresslevel=9) as g:
        shutil.copyfileobj(f, g)
    os.remove(src)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(1)

    # Loader-bound: batch of 1 item sleeping 30 ms, 2 workers -> ~15 ms per
    # batch on average while the model is ~2-3 ms.
    model = torch.nn.Linear(64, 64)
    ds = SlowDataset(64, BATCH_SLEEP_S, 64)
    loader = DataLoader(ds, batch_size=1, num_workers=2, prefetch_factor=2)
    path = os.path.join(out, "cpu_loader_bound.json")
    train(loader, model, 2, path)
    gzip_file(path, path + ".gz")

    # Compute-bound: items in memory, many large matrix products per step.
    big = torch.nn.Linear(512, 512)
    ds = SlowDataset(64 * (STEPS + 1), 0.0, 512)
    loader = DataLoader(ds, batch_size=64, num_workers=0)
    path = os.path.join(out, "cpu_compute_bound.json")
    train(loader, big, 10, path)
    gzip_file(path, path + ".gz")


if __name__ == "__main__":
    main()
