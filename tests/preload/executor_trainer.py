"""A Python trainer iterating concurrent.futures.ProcessPoolExecutor.map
(or .submit and as_completed) over slow workers (no stallscope in it):
the executor's manager thread
reads each result from the workers' result queue and sets its future,
waking the main thread through a threading.Condition (a semaphore per
wait). The trainer "trains" TRAIN_MS of CPU per item.
  executor_trainer.py ITEMS WORKER_MS TRAIN_MS [map|as_completed]
Prints ITEMS, RESULT_HANDLER_TID and WORKER_PIDS."""
import concurrent.futures as cf
import multiprocessing as mp
import sys
import time


def slow(i, ms):
    time.sleep(ms / 1000.0)
    return bytes(1000) + bytes([i % 256])


def spin(ms):
    end = time.thread_time() + ms / 1000.0
    x = 0
    while time.thread_time() < end:
        x += 1


def main():
    items, worker_ms, train_ms = (int(a) for a in sys.argv[1:4])
    how = sys.argv[4] if len(sys.argv) > 4 else "map"
    with cf.ProcessPoolExecutor(2, mp_context=mp.get_context("fork")) as ex:
        if how == "map":
            results = ex.map(slow, range(items), [worker_ms] * items)
        else:
            futures = [ex.submit(slow, i, worker_ms) for i in range(items)]
            results = (f.result() for f in cf.as_completed(futures))
        got = 0
        for _ in results:
            got += 1
            spin(train_ms)
        print("ITEMS", got)
        print("RESULT_HANDLER_TID", ex._executor_manager_thread.native_id)
        print("WORKER_PIDS", " ".join(str(p) for p in ex._processes))


if __name__ == "__main__":
    main()
