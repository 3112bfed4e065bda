"""Smoke trainers for tests/torch_scenarios/smoke.py: the pipelines users
write that the scenario family's train.py does not (an IterableDataset,
the spawn context, a train and a validation loader, a 2-rank gloo DDP run
with a DistributedSampler). Nothing here knows stallscope.

usage: smoke_train.py KIND [--batches B] [--workers N] [--exit-code C]
  KIND: iterable | spawn | trainval | ddp
"""

import argparse
import os
import sys
import time
import zlib

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info

FEATURES = 3 * 16 * 16
RAW = zlib.compress((np.arange(FEATURES * 8) % 251).astype(np.uint8).tobytes(), 1)


def decode(i):
    pixels = np.frombuffer(zlib.decompress(RAW), dtype=np.uint8)[:FEATURES]
    img = torch.from_numpy(pixels.copy()).float().div_(255.0)
    return img.view(3, 16, 16), i % 10


class Samples(Dataset):
    def __init__(self, length):
        self.length = length

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        return decode(i)


class Stream(IterableDataset):
    """Each worker yields its own shard of range(length)."""

    def __init__(self, length):
        self.length = length

    def __iter__(self):
        info = get_worker_info()
        lo, step = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(lo, self.length, step):
            yield decode(i)


def model():
    return nn.Sequential(nn.Flatten(), nn.Linear(FEATURES, 256), nn.ReLU(),
                         nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))


def train_step(net, opt, loss_fn, images, labels):
    loss = loss_fn(net(images), labels)
    opt.zero_grad()
    loss.backward()
    opt.step()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=["iterable", "spawn", "trainval", "ddp"])
    p.add_argument("--batches", type=int, default=60)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--exit-code", type=int, default=0)
    a = p.parse_args()
    torch.set_num_threads(1)
    n = a.batch_size * a.batches
    net = model()
    sampler = None
    if a.kind == "ddp":
        import torch.distributed as dist
        from torch.utils.data.distributed import DistributedSampler
        dist.init_process_group("gloo")
        net = nn.parallel.DistributedDataParallel(net)
        dataset = Samples(n * dist.get_world_size())
        sampler = DistributedSampler(dataset)
        loader = DataLoader(dataset, batch_size=a.batch_size, sampler=sampler, num_workers=a.workers)  # smoke: ddp
    elif a.kind == "iterable":
        loader = DataLoader(Stream(n), batch_size=a.batch_size, num_workers=a.workers)  # smoke: iterable
    elif a.kind == "spawn":
        loader = DataLoader(Samples(n), batch_size=a.batch_size, shuffle=True, num_workers=a.workers, multiprocessing_context="spawn")  # smoke: spawn
    else:
        loader = DataLoader(Samples(n), batch_size=a.batch_size, shuffle=True, num_workers=a.workers)  # smoke: trainval
        val_loader = DataLoader(Samples(4 * a.batch_size), batch_size=a.batch_size, num_workers=a.workers)  # smoke: val
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    if sampler is not None:
        sampler.set_epoch(0)
    step = 0
    for images, labels in loader:
        train_step(net, opt, loss_fn, images, labels)
        print(f"step {step}", flush=True)
        step += 1
        if a.kind == "trainval" and step % 5 == 0:
            with torch.no_grad():
                for vi, vl in val_loader:
                    loss_fn(net(vi), vl)
    if a.kind == "ddp":
        import torch.distributed as dist
        dist.destroy_process_group()
    sys.exit(a.exit_code)


if __name__ == "__main__":
    main()
