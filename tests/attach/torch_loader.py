"""A torchvision-style trainer, unmodified for stallscope: a train loader
with workers, a validation loader without (under torch.no_grad), a few
epochs. It writes what it did to EXPECTED (JSON) for check_loader_trace.py
to hold the trace against.

usage: torch_loader.py START_METHOD EXPECTED [--iterable] [--persistent]
       [--getitems] [--zip] [--sanity] [--scaler-skips] [--epochs N]
       [--workers N] [--prefetch N] [--print-config]

--getitems: the train dataset has __getitems__; --zip: training zips the
train loader with a second one (two loaders feed each step); --sanity: a
sanity-check loader, built first, runs two batches under no_grad before
training (as Lightning does); --scaler-skips: a GradScaler steps the
optimizer and every third iteration skips it (as on inf gradients).
"""

import json
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset


class Slow(Dataset):
    """Map-style: each item sleeps a little (I/O-like) and is a tensor."""

    def __init__(self, n, sleep_s):
        self.n, self.sleep_s = n, sleep_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.sleep_s)
        return torch.full((4,), float(i)), i % 2


class Batched(Slow):
    """Map-style with __getitems__: a batch at once."""

    def __getitems__(self, indices):
        time.sleep(self.sleep_s * len(indices))
        return [(torch.full((4,), float(i)), i % 2) for i in indices]


class _Skipped:
    """An optimizer whose step does nothing: what GradScaler.step does on
    inf gradients."""

    def step(self, *args, **kwargs):
        pass


class Stream(IterableDataset):
    """Iterable: each worker yields its share of range(n)."""

    def __init__(self, n, sleep_s):
        super().__init__()
        self.n, self.sleep_s = n, sleep_s

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        start, step = (info.id, info.num_workers) if info is not None else (0, 1)
        for i in range(start, self.n, step):
            time.sleep(self.sleep_s)
            yield torch.full((4,), float(i)), i % 2


def guard_facts(first_bytes):
    """What the hooks' guard-rail marks should say (the same process's view)."""
    import resource  # pylint: disable=import-outside-toplevel
    st = os.statvfs("/dev/shm")
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return {"shm_total": st.f_blocks * st.f_frsize,
            "nofile": soft if soft != resource.RLIM_INFINITY else None,
            "sharing": torch.multiprocessing.get_sharing_strategy(),
            "batch_bytes": first_bytes, "batch_tensors": 2}


def main():
    method, expected_path = sys.argv[1], sys.argv[2]
    flags = sys.argv[3:]
    iterable = "--iterable" in flags
    persistent = "--persistent" in flags
    epochs = int(flags[flags.index("--epochs") + 1]) if "--epochs" in flags else 2
    workers = int(flags[flags.index("--workers") + 1]) if "--workers" in flags else 2
    batch, train_n, val_n = 4, 32, 8
    zipped, sanity, skips = "--zip" in flags, "--sanity" in flags, "--scaler-skips" in flags
    getitems = "--getitems" in flags
    sanity_line = 0
    if sanity:
        sanity_line = sys._getframe().f_lineno + 1  # pylint: disable=protected-access
        check = DataLoader(Slow(8, 0.01), batch_size=4)
        with torch.no_grad():
            for _ in check:
                pass
    if iterable:
        train_set = Stream(train_n, 0.008)
    else:
        train_set = (Batched if getitems else Slow)(train_n, 0.008)

    kwargs = {"persistent_workers": persistent} if workers else {}
    if workers:
        kwargs["multiprocessing_context"] = method
    if "--prefetch" in flags:
        kwargs["prefetch_factor"] = int(flags[flags.index("--prefetch") + 1])
    train_line = sys._getframe().f_lineno + 1  # pylint: disable=protected-access
    train = DataLoader(train_set, batch_size=batch, shuffle=not iterable, num_workers=workers,
                       **kwargs)
    val_line = sys._getframe().f_lineno + 1  # pylint: disable=protected-access
    val = DataLoader(Slow(val_n, 0.01), batch_size=batch, num_workers=0)
    second_line = sys._getframe().f_lineno + 1  # pylint: disable=protected-access
    second = DataLoader(Slow(train_n, 0.002), batch_size=batch) if zipped else None
    scaler = torch.cuda.amp.GradScaler(enabled=False) if skips else None

    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    if "--print-config" in flags:
        print("config num_workers=%d prefetch_factor=%s persistent_workers=%s pin_memory=%s" % (
            train.num_workers, train.prefetch_factor, train.persistent_workers, train.pin_memory))
    steps = 0
    startups, waits = [], 0.0  # the train loader's: iter() to its first batch, and next() times
    asks = []  # when each training batch was asked for
    first_bytes = None  # the first training batch's tensor bytes
    for _ in range(epochs):
        model.train()
        t_iter = time.perf_counter()
        it = iter(train)
        other = iter(second) if zipped else None
        while True:
            t = time.perf_counter()
            asks.append(t)
            try:
                x, y = next(it)
            except StopIteration:
                break
            got = time.perf_counter()
            waits += got - t
            if first_bytes is None:
                first_bytes = sum(v.element_size() * v.nelement() for v in (x, y))
            if len(startups) <= _:
                startups.append(got - t_iter)
            if other is not None:
                next(other)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            if scaler is not None:
                scaler.step(_Skipped() if steps % 3 == 2 else opt)
                scaler.update()
            else:
                opt.step()
            steps += 1
            time.sleep(0.002)
        model.eval()
        with torch.no_grad():
            for x, _ in val:
                model(x)
    here = os.path.abspath(__file__)
    # The iterations: from the first ask for a batch of an epoch to the ask
    # that ended it, summed over the epochs.
    per_epoch = len(asks) // epochs
    iterations = sum(asks[(e + 1) * per_epoch - 1] - asks[e * per_epoch] for e in range(epochs))
    with open(expected_path, "w", encoding="utf-8") as f:
        json.dump({
            "pid": os.getpid(),
            "epochs": epochs,
            "steps": steps,
            "train": {"site": "%s:%d" % (here, train_line), "batches": train_n // batch,
                      "batch_size": batch, "num_workers": train.num_workers,
                      "persistent": train.persistent_workers,
                      "prefetch_factor": train.prefetch_factor,
                      "dataset": type(train_set).__name__,
                      "kind": "iterable" if iterable else "map",
                      "len": 0 if iterable else train_n, "mp_context": method},
            "val": {"site": "%s:%d" % (here, val_line), "batches": val_n // batch,
                    "batch_size": batch, "num_workers": 0, "dataset": "Slow",
                    "kind": "map", "len": val_n},
            "second": {"site": "%s:%d" % (here, second_line), "batches": train_n // batch}
                      if zipped else None,
            "sanity": {"site": "%s:%d" % (here, sanity_line), "batches": 2} if sanity else None,
            "getitems": getitems,
            "startups_s": startups,
            "waits_s": waits,
            "iterations_s": iterations,
            "guards": guard_facts(first_bytes),
        }, f)
    print("trained %d steps with %s" % (steps, method))


if __name__ == "__main__":
    main()
