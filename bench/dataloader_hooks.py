"""One arm of bench/dataloader_hooks.sh: a CPU training loop over a
torch DataLoader whose samples cost SAMPLE_US of CPU each, timing its own
steady steps. Prints one JSON line: {"mean_ms": …, "p50_ms": …}.

usage: dataloader_hooks.py WORKERS SAMPLE_US STEPS
"""

import json
import statistics
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Cpu(Dataset):
    def __init__(self, n, sample_us):
        self.n, self.sample_s = n, sample_us * 1e-6

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        end = time.perf_counter() + self.sample_s
        while time.perf_counter() < end:
            pass
        return torch.full((16,), float(i)), i % 4


def main():
    workers, sample_us, steps = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(1)
    batch = 32
    loader = DataLoader(Cpu(batch * (steps + 5), sample_us), batch_size=batch,
                        num_workers=workers)
    model = torch.nn.Sequential(torch.nn.Linear(16, 256), torch.nn.ReLU(), torch.nn.Linear(256, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    times = []
    t = time.perf_counter()
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x.repeat(4, 1)), y.repeat(4))
        opt.zero_grad()
        loss.backward()
        opt.step()
        now = time.perf_counter()
        times.append(now - t)
        t = now
    steady = times[5:]
    print(json.dumps({"mean_ms": statistics.mean(steady) * 1e3,
                      "p50_ms": statistics.median(steady) * 1e3}))


if __name__ == "__main__":
    main()
