"""A small PyTorch CPU training loop that knows nothing of stallscope:
DataLoader(num_workers=2) over a Dataset whose __getitem__ is deliberately
slow, either in CPU work (decode) or in a slow read from DATA_DIR (a slowfs
mount in the tests). Run under `stallscope run`, whose Python hooks mark
data waits (DataLoader __next__) and steps (optimizer steps).

    python3 torch_trainer.py cpu|storage DATA_DIR STEPS
"""

import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

ITEM_FLOATS = 256
BATCH = 4


class SlowDataset(Dataset):
    def __init__(self, mode, data_dir, n):
        self.mode, self.data_dir, self.n = mode, data_dir, n

    def __len__(self):
        return self.n

    def _decode(self):
        # ~15 ms of pure-Python CPU work per item, as a JPEG decode would be.
        x = 0
        for i in range(150000):
            x = (x * 31 + i) & 0xFFFFFFFF
        return x

    def __getitem__(self, i):
        if self.mode == "cpu":
            seed = self._decode()
        else:
            path = os.path.join(self.data_dir, "item%03d.bin" % (i % 16))
            with open(path, "rb", buffering=0) as f:
                seed = sum(f.read(4096)[:8])
        g = torch.Generator().manual_seed(seed + i)
        return torch.rand(ITEM_FLOATS, generator=g), torch.tensor(float(i % 2))


def main():
    mode, data_dir, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    torch.set_num_threads(1)
    ds = SlowDataset(mode, data_dir, steps * BATCH)
    loader = DataLoader(ds, batch_size=BATCH, num_workers=2)
    model = torch.nn.Linear(ITEM_FLOATS, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    t0 = time.time()
    n = 0
    for x, y in loader:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x).squeeze(1), y)
        loss.backward()
        opt.step()
        n += 1
    print("trained %d steps in %.2f s" % (n, time.time() - t0))


if __name__ == "__main__":
    main()
