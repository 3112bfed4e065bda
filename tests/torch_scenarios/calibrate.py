"""The scenarios' calibration run (tests/torch_scenarios/scenarios.py):
the CPU time of one sample's decode per KB of sample and of one training
step per hidden layer, with the trainer's own Dataset and model, measured
as thread CPU time so that a busy machine does not stretch them. Prints
one JSON line.

usage: calibrate.py DATA_DIR SAMPLE_KB BATCH_SIZE
"""

import json
import sys
import time

import torch
from torch import nn

import train


def cpu_ms(fn, n):
    fn()  # warm
    t = time.thread_time()
    for _ in range(n):
        fn()
    return (time.thread_time() - t) * 1e3 / n


def main():
    root, kb, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(1)
    ds = train.CompressedImages(root, 1000)
    decode = cpu_ms(lambda: ds[0], 20)
    x = torch.randn(batch, 3, 32, 32)
    y = torch.randint(0, 10, (batch,))
    per = {}
    for layers in (1, 5):
        model = train.make_model(layers)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)

        def step():
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        per[layers] = cpu_ms(step, 10)
    layer = (per[5] - per[1]) / 4
    print(json.dumps({"decode_ms_per_kb": decode / kb, "step_base_ms": per[1] - layer,
                      "step_ms_per_layer": layer}))


if __name__ == "__main__":
    main()
