"""A torchvision-style CPU trainer for bench/dataloader_remedy.sh: a
DataLoader whose samples are "decoded" on the CPU (DECODE_MS each), with
the workers the user picked, feeding a model step of STEP_MS of CPU. Writes
nothing but its own step times (JSON on its last line).

usage: remedy_trainer.py WORKERS DECODE_MS STEP_MS STEPS
"""

import json
import statistics
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


def spin(seconds):
    end = time.thread_time() + seconds  # CPU time: a busy machine stretches it, as decoding
    x = 0
    while time.thread_time() < end:
        x += 1
    return x


class Decoded(Dataset):
    def __init__(self, n, decode_ms):
        self.n, self.decode_s = n, decode_ms * 1e-3

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        spin(self.decode_s)
        return torch.full((32,), float(i)), i % 10


def main():
    workers, decode_ms, step_ms, steps = (int(sys.argv[1]), float(sys.argv[2]),
                                          float(sys.argv[3]), int(sys.argv[4]))
    torch.set_num_threads(1)
    batch = 8
    loader = DataLoader(Decoded(batch * (steps + 10), decode_ms), batch_size=batch,
                        num_workers=workers, shuffle=True)
    model = torch.nn.Linear(32, 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    times = []
    t = time.perf_counter()
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        spin(step_ms * 1e-3)  # the rest of the model's step
        now = time.perf_counter()
        times.append(now - t)
        t = now
    steady = times[10:]
    print(json.dumps({"p50_ms": statistics.median(steady) * 1e3,
                      "mean_ms": statistics.mean(steady) * 1e3}))


if __name__ == "__main__":
    main()
