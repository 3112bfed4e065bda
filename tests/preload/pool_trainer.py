"""A Python trainer iterating multiprocessing.Pool.imap over slow workers
(no stallscope in it): the pool's result-handler thread receives each
result from a worker process and wakes the main thread through a
threading.Condition (a semaphore per wait).
  pool_trainer.py ITEMS WORKER_MS
Prints ITEMS, RESULT_HANDLER_TID and WORKER_PIDS."""
import multiprocessing as mp
import sys
import time


def slow(i, ms):
    time.sleep(ms / 1000.0)
    return bytes(1000) + bytes([i % 256])


def main():
    items, worker_ms = int(sys.argv[1]), int(sys.argv[2])
    ctx = mp.get_context("fork")
    with ctx.Pool(2) as pool:
        got = 0
        args = ((i, worker_ms) for i in range(items))
        for _ in pool.imap(_star, args):
            got += 1
        print("ITEMS", got)
        print("RESULT_HANDLER_TID", pool._result_handler.native_id)
        print("WORKER_PIDS", " ".join(str(p.pid) for p in pool._pool))


def _star(a):
    return slow(*a)


if __name__ == "__main__":
    main()
