"""A PyTorch training loop that knows nothing of stallscope, for the install
checks (tests/install/packages.sh): a DataLoader with one worker over a
Dataset whose __getitem__ spends ~8 ms of CPU per item (a decode), feeding
a model whose step takes well under a millisecond. Every step waits for
data, so `stallscope run` must report it input-bound. It prints the
interpreter's prefix: the checks hold it against the environment's.

    python dataloader_trainer.py STEPS
"""

import sys

import torch
from torch.utils.data import DataLoader, Dataset

BATCH = 4


class DecodeDataset(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        x = 0
        for k in range(80000):  # ~8 ms of pure-Python CPU work
            x = (x * 31 + k) & 0xFFFFFFFF
        g = torch.Generator().manual_seed(x + i)
        return torch.rand(64, generator=g), torch.tensor(float(i % 2))


def main():
    steps = int(sys.argv[1])
    print("trainer: python %s" % sys.prefix, flush=True)
    torch.set_num_threads(1)
    loader = DataLoader(DecodeDataset(steps * BATCH), batch_size=BATCH, num_workers=1)
    model = torch.nn.Linear(64, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    done = 0
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        done += 1
    print("trained %d steps" % done)


if __name__ == "__main__":
    main()
