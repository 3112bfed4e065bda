"""A PyTorch CPU training loop whose DataLoader workers start by the method
given (fork, spawn or forkserver), run under `stallscope run`. Before it
trains it checks that the hooks are installed and transparent: each wrapper
carries the name, qualified name, module, docstring and signature of what it
wraps, and the worker target pickles by reference to itself. Exits 3 with a
message when a check fails.

    python3 torch_contexts.py fork|spawn|forkserver STEPS
"""

import inspect
import pickle
import sys

import torch
from torch.utils.data import DataLoader, Dataset
from torch.utils.data import dataloader as dl_module
from torch.utils.data._utils import fetch as fetch_module
from torch.utils.data._utils import pin_memory as pin_module
from torch.utils.data._utils import worker as worker_module
from torch.cuda.amp import grad_scaler as scaler_module
from torch.optim import optimizer as optim_module

BATCH = 4


class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.full((8,), float(i)), torch.tensor(float(i * i))


def fail(what):
    sys.stderr.write("torch_contexts: %s\n" % what)
    sys.exit(3)


def check_transparent(name, fn):
    if not getattr(fn, "_stallscope_hook", False):
        fail("%s is not hooked" % name)
    original = fn.__wrapped__
    for attr in ("__name__", "__qualname__", "__module__", "__doc__"):
        if getattr(fn, attr) != getattr(original, attr):
            fail("%s: %s %r differs from the original's %r"
                 % (name, attr, getattr(fn, attr), getattr(original, attr)))
    if inspect.signature(fn) != inspect.signature(original):
        fail("%s: signature %s differs from %s"
             % (name, inspect.signature(fn), inspect.signature(original)))


def check_hooks(model):
    check_transparent("_worker_loop", worker_module._worker_loop)
    if pickle.loads(pickle.dumps(worker_module._worker_loop)) is not worker_module._worker_loop:
        fail("_worker_loop does not pickle by reference to itself")
    check_transparent("_BaseDataLoaderIter.__next__", dl_module._BaseDataLoaderIter.__next__)
    check_transparent("DataLoader.__init__", DataLoader.__init__)
    check_transparent("DataLoader.__iter__", DataLoader.__iter__)
    multi = dl_module._MultiProcessingDataLoaderIter
    for name in ("_try_put_index", "_get_data", "_next_data"):
        check_transparent("_MultiProcessingDataLoaderIter." + name, multi.__dict__[name])
    check_transparent("_MapDatasetFetcher.fetch", fetch_module._MapDatasetFetcher.fetch)
    check_transparent("_IterableDatasetFetcher.fetch",
                      fetch_module._IterableDatasetFetcher.fetch)
    check_transparent("pin_memory", pin_module.pin_memory)
    scaler = scaler_module.GradScaler
    while "step" not in scaler.__dict__:  # torch >= 2.3: defined by torch.amp's GradScaler
        scaler = scaler.__mro__[1]
    check_transparent("GradScaler.step", scaler.__dict__["step"])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    if not hasattr(optim_module, "register_optimizer_step_post_hook"):  # torch < 2.0
        check_transparent("Optimizer.__init__", optim_module.Optimizer.__init__)
        step = torch.optim.SGD.__dict__["step"]
        while not getattr(step, "_stallscope_hook", False) and hasattr(step, "__wrapped__"):
            step = step.__wrapped__  # torch's own profiling wrapper sits above ours
        check_transparent("SGD.step", step)
    pickle.dumps(opt.state_dict())
    return opt


def main():
    method, steps = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(1)
    model = torch.nn.Linear(8, 1)
    opt = check_hooks(model)
    loader = DataLoader(Squares(steps * BATCH), batch_size=BATCH, num_workers=2,
                        multiprocessing_context=method)
    seen = 0.0
    n = 0
    for x, y in loader:
        seen += float(x[:, 0].sum())
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
        loss.backward()
        opt.step()
        n += 1
    expected = float(sum(range(steps * BATCH)))
    if seen != expected:
        fail("batches summed to %s, expected %s" % (seen, expected))
    print("trained %d steps with %s workers" % (n, method))


if __name__ == "__main__":
    main()
