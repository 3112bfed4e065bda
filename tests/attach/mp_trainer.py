"""A pure-Python trainer without torch: multiprocessing (fork) workers read
and decode files, the main process waits for each batch and "trains". It
marks steps and data waits with the stallscope module (on PYTHONPATH under
`stallscope run`).

    python3 mp_trainer.py DATA_DIR STEPS
"""

import multiprocessing
import os
import sys
import zlib

import stallscope


def load(path):
    with open(path, "rb") as f:
        raw = zlib.decompress(f.read())
    x = 0
    with stallscope.range("decode"):  # also starts this worker's recorder
        for i in range(120000):  # the slow part: a CPU-heavy decode
            x = (x * 31 + raw[i % len(raw)]) & 0xFFFFFFFF
    return x


def main():
    data_dir, steps = sys.argv[1], int(sys.argv[2])
    files = sorted(os.path.join(data_dir, f) for f in os.listdir(data_dir))
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        it = pool.imap(load, (files[i % len(files)] for i in range(steps)))
        for i in range(steps):
            stallscope.step(i)
            with stallscope.data_wait(i):
                value = next(it)
            with stallscope.range("train"):
                sum(range(20000 + value % 7))
        stallscope.step_end()
    print("done %d steps" % steps)


if __name__ == "__main__":
    main()
