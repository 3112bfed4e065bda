"""A small PyTorch CPU trainer written the way users write one, for the
scenario family of tests/torch_scenarios (docs/scenarios.md, "PyTorch
scenarios"): a Dataset whose __getitem__ reads one file and decodes it
(zlib-compressed bytes, or decoded numpy bytes once they are cached), a
DataLoader, and a loop with a model, a loss and optimizer.step().

It logs each step's time as users do ("step N: X ms"), which is what the
scenarios compare before and after a remedy. Nothing here knows stallscope.

usage: train.py DATA_DIR [--workers N] [--persistent] [--init-ms MS]
                [--epochs E] [--batches B] [--batch-size S] [--layers L]
                [--slow-files K,... --slow-ms MS] [--aux K] [--sleep-ms MS]
                [--crash-in-workers]
       train.py --make-data DATA_DIR --sample-kb KB [--files N]
"""

import argparse
import os
import signal
import time
import zlib

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

FEATURES = 3 * 32 * 32


class CompressedImages(Dataset):
    """Samples on disk, zlib-compressed (`.z`) or decoded (`.npy`, a cache)."""

    def __init__(self, root, length, slow_files=(), slow_ms=0, aux=0, crash_in_workers=False):
        self.files = sorted(os.path.join(root, f) for f in os.listdir(root)
                            if f.endswith((".z", ".npy")))
        self.length = length
        # files that take slow_ms longer to fetch (a cold object, a retried read)
        self.slow = {self.files[k] for k in slow_files if k < len(self.files)}
        self.slow_ms = slow_ms
        self.aux = aux  # per-sample side tensors (boxes, masks, token ids, …)
        # a resource that does not survive in a worker process (a Bus error
        # there, as a mapping of a file truncated under it gives)
        self.crash_in_workers = crash_in_workers

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        if self.crash_in_workers and torch.utils.data.get_worker_info() is not None:
            os.kill(os.getpid(), signal.SIGBUS)
        path = self.files[i % len(self.files)]
        with open(path, "rb") as f:
            raw = f.read()
            if path in self.slow:
                time.sleep(self.slow_ms / 1000.0)
        if path.endswith(".z"):
            pixels = np.frombuffer(zlib.decompress(raw), dtype=np.uint8)
            img = torch.from_numpy(pixels.copy()).float().div_(255.0)
            img = (img - img.mean()) / (img.std() + 1e-6)
        else:  # decoded and normalized already
            img = torch.from_numpy(np.frombuffer(raw, dtype=np.float32, offset=128).copy())
        if self.aux:
            side = {f"aux{k}": torch.full((1024,), float(k)) for k in range(self.aux)}
            return img[:FEATURES].view(3, 32, 32), i % 10, side
        return img[:FEATURES].view(3, 32, 32), i % 10


def slow_init(ms):
    def init(worker_id):
        time.sleep(ms / 1000.0)  # e.g. opening a connection, loading a vocabulary
    return init


def make_model(layers):
    body = [nn.Flatten(), nn.Linear(FEATURES, 512), nn.ReLU()]
    for _ in range(layers):
        body += [nn.Linear(512, 512), nn.ReLU()]
    return nn.Sequential(*body, nn.Linear(512, 10))


def make_data(root, sample_kb, files):
    os.makedirs(root, exist_ok=True)
    rng = np.random.default_rng(0)
    n = sample_kb * 1024
    for k in range(files):
        # a smooth picture with noise: compresses a little, as photos do
        img = (np.add.outer(np.arange(n // 512), np.arange(512)) % 256).astype(np.uint8).ravel()
        img = img + rng.integers(0, 8, n, dtype=np.uint8)
        with open(os.path.join(root, f"{k:04d}.z"), "wb") as f:
            f.write(zlib.compress(img.tobytes(), 1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("data")
    p.add_argument("--make-data", action="store_true")
    p.add_argument("--sample-kb", type=int, default=256)
    p.add_argument("--files", type=int, default=16)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--persistent", action="store_true")
    p.add_argument("--init-ms", type=float, default=0)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batches", type=int, default=1000)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--slow-files", default="", help="comma-separated file numbers that are slow")
    p.add_argument("--slow-ms", type=float, default=0)
    p.add_argument("--aux", type=int, default=0, help="side tensors per sample")
    p.add_argument("--crash-in-workers", action="store_true")
    p.add_argument("--sleep-ms", type=float, default=0,
                   help="off-CPU time per step (waiting on a device, a remote service)")
    a = p.parse_args()
    if a.make_data:
        make_data(a.data, a.sample_kb, a.files)
        return

    torch.set_num_threads(1)  # one core for the model; the rest for the loader
    slow = [int(k) for k in a.slow_files.split(",") if k]
    dataset = CompressedImages(a.data, a.batch_size * a.batches, slow, a.slow_ms, a.aux,
                               a.crash_in_workers)
    loader = DataLoader(dataset, batch_size=a.batch_size, shuffle=True, num_workers=a.workers, persistent_workers=a.persistent, worker_init_fn=slow_init(a.init_ms) if a.init_ms else None)
    model = make_model(a.layers)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()

    step = 0
    last = time.perf_counter()
    for epoch in range(a.epochs):
        for images, labels, *side in loader:
            loss = loss_fn(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if a.sleep_ms:
                time.sleep(a.sleep_ms / 1000.0)
            now = time.perf_counter()
            print(f"step {step}: {(now - last) * 1e3:.2f} ms", flush=True)
            last = now
            step += 1


if __name__ == "__main__":
    main()
