"""A PyTorch CPU trainer whose DataLoader workers run an intra-op thread
pool, as a user's do who calls torch.set_num_threads in worker_init_fn
(or whose images are normalized with big tensor ops): each sample is a
zlib-compressed image (in 4 tiles) decoded on the CPU, normalized with
elementwise ops over the whole image and projected with a matmul. The trainer is input
bound (decode takes longer than its step), so more workers are considered.

Each worker writes down what /proc says of its threads, for
test_torch_threads.cpp to hold the hooks' `dataloader worker` marks
against: after each sample, the most threads it had (stallscope's own
left out, named stallscope-* in /proc or in threading), torch's thread
count, and the threads' names. One JSON file per worker under OUT_DIR.

usage: torch_threads.py DATA_DIR OUT_DIR [--pool N] [--decode-threads N]
                        [--lazy K] [--workers W] [--batches B] [--layers L]
       torch_threads.py --make-data DATA_DIR [--decode-kb KB]

--pool N: worker_init_fn calls torch.set_num_threads(N) (torch's own
worker loop has just set 1); --decode-threads N: a worker decodes a
sample's tiles on a ThreadPoolExecutor of N threads (zlib releases the
GIL: they run at once); --lazy K: a worker normalizes its samples with
tensor ops (which wake torch's pool) and starts its decode threads only
from its K-th batch on, before that with numpy and one thread, as a
transform switched on after a warm-up does.
"""

import argparse
import concurrent.futures
import json
import os
import threading
import time
import struct
import zlib

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

SIDE = 512  # a 512 x 512 image: 262144 elements, many grains of torch's parallel_for
FEATURES = 1024
TILES = 4


def _tasks():
    """This process's threads as /proc lists them, stallscope's left out."""
    names = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:
            pass
    ours = sum(1 for t in threading.enumerate() if t.name.startswith("stallscope"))
    kept = [n for n in names if not n.startswith("stallscope")]
    return len(kept) - ours, sorted(names)


class Truth:
    """A worker's own view of its threads, written when it grows."""

    def __init__(self, out):
        self.out, self.most, self.samples = out, 0, 0

    def note(self):
        self.samples += 1
        n, names = _tasks()
        if n <= self.most:
            return
        self.most = n
        path = os.path.join(self.out, f"worker-{os.getpid()}.json")
        with open(path + ".tmp", "w") as f:
            json.dump({"pid": os.getpid(), "most_threads": n, "at_sample": self.samples,
                       "torch_threads": torch.get_num_threads(), "names": names}, f)
        os.replace(path + ".tmp", path)


class CompressedImages(Dataset):
    def __init__(self, root, length, out, lazy_batches, batch_size, decode_threads):
        self.files = sorted(os.path.join(root, f) for f in os.listdir(root) if f.endswith(".z"))
        self.length, self.out = length, out
        self.lazy_samples = lazy_batches * batch_size
        self.decode_threads = decode_threads
        self.proj = torch.randn(SIDE, FEATURES // SIDE * 2) / SIDE
        self.truth = None
        self.pool = None

    def decode(self, blob, warm):
        sizes = struct.unpack_from(f"<{TILES}I", blob)
        at, tiles = 4 * TILES, []
        for n in sizes:
            tiles.append(blob[at:at + n])
            at += n
        if warm and self.decode_threads > 1:
            if self.pool is None:
                self.pool = concurrent.futures.ThreadPoolExecutor(self.decode_threads)
            return b"".join(self.pool.map(zlib.decompress, tiles))
        return b"".join(zlib.decompress(t) for t in tiles)

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        if self.truth is None:
            self.truth = Truth(self.out)
        warm = self.truth.samples >= self.lazy_samples
        with open(self.files[i % len(self.files)], "rb") as f:
            raw = self.decode(f.read(), warm)  # the CPU decode
        pixels = np.frombuffer(raw[:SIDE * SIDE], dtype=np.uint8).reshape(SIDE, SIDE)
        if not warm:
            img = pixels.astype(np.float32) / 255.0  # numpy: one thread
            img = torch.from_numpy((img - img.mean()) / (img.std() + 1e-6))
        else:
            img = torch.from_numpy(pixels.copy()).float().div_(255.0)  # torch: its pool
            img = (img - img.mean()) / (img.std() + 1e-6)
            img = torch.tanh(img)
        x = (img @ self.proj).flatten()[:FEATURES]  # the matmul (BLAS)
        self.truth.note()
        return x, i % 10


def pool_init(n):
    def init(worker_id):
        torch.set_num_threads(n)
    return init


def make_data(root, kb, files=8):
    os.makedirs(root, exist_ok=True)
    rng = np.random.default_rng(0)
    n = max(kb * 1024, SIDE * SIDE)
    for k in range(files):
        img = (np.add.outer(np.arange(n // SIDE), np.arange(SIDE)) % 256).astype(np.uint8).ravel()
        img = img + rng.integers(0, 8, n, dtype=np.uint8)
        raw = img.tobytes()
        tiles = [zlib.compress(raw[t * n // TILES:(t + 1) * n // TILES], 1) for t in range(TILES)]
        with open(os.path.join(root, f"{k:02d}.z"), "wb") as f:
            f.write(struct.pack(f"<{TILES}I", *(len(t) for t in tiles)) + b"".join(tiles))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("data")
    p.add_argument("out", nargs="?")
    p.add_argument("--make-data", action="store_true")
    p.add_argument("--decode-kb", type=int, default=512)
    p.add_argument("--pool", type=int, default=0)
    p.add_argument("--decode-threads", type=int, default=0)
    p.add_argument("--lazy", type=int, default=0)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--batches", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    a = p.parse_args()
    if a.make_data:
        make_data(a.data, a.decode_kb)
        return
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(1)  # one core for the model; the rest for the loader
    dataset = CompressedImages(a.data, a.batch_size * a.batches, a.out, a.lazy, a.batch_size,
                               a.decode_threads)
    loader = DataLoader(dataset, batch_size=a.batch_size, shuffle=True, num_workers=a.workers,
                        worker_init_fn=pool_init(a.pool) if a.pool else None)
    body = [nn.Linear(FEATURES, 256), nn.ReLU()]
    for _ in range(a.layers):
        body += [nn.Linear(256, 256), nn.ReLU()]
    model = nn.Sequential(*body, nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    last = time.perf_counter()
    for step, (x, y) in enumerate(loader):
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        now = time.perf_counter()
        print(f"step {step}: {(now - last) * 1e3:.2f} ms", flush=True)
        last = now


if __name__ == "__main__":
    main()
