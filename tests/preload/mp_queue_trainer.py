"""A Python trainer fed by two forked workers through a multiprocessing.Queue
(no stallscope in it). Each worker puts ITEMS items, alternating large
(200 KB) and small payloads; the trainer get()s them all, "training"
TRAIN_MS after each. With WORKER_MS larger than TRAIN_MS the trainer
waits; with WORKER_MS 0 the queue is always full. WORKERS (default 2)
workers.
  mp_queue_trainer.py ITEMS WORKER_MS TRAIN_MS [WORKERS]
Prints GETS, WORKER_PIDS and STEP_MEAN_MS (the mean time from one get to
the next, as the program itself measures it)."""
import multiprocessing as mp
import sys
import time


def work(q, items, worker_ms, seed):
    for i in range(items):
        if worker_ms:
            time.sleep(worker_ms / 1000.0)
        q.put(bytes([seed]) * (200000 if i % 2 == 0 else 100))


def spin(ms):
    end = time.thread_time() + ms / 1000.0
    x = 0
    while time.thread_time() < end:
        x += 1


def main():
    items, worker_ms, train_ms = (int(a) for a in sys.argv[1:4])
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 2
    ctx = mp.get_context("fork")
    q = ctx.Queue(maxsize=4)
    workers = [ctx.Process(target=work, args=(q, items, worker_ms, k)) for k in range(n)]
    for w in workers:
        w.start()
    gets = 0
    marks = []
    for _ in range(n * items):
        q.get()
        marks.append(time.monotonic())
        gets += 1
        spin(train_ms)
    for w in workers:
        w.join()
    print("GETS", gets)
    mean = (marks[-1] - marks[0]) / (len(marks) - 1) if len(marks) > 1 else 0
    print("STEP_MEAN_MS", round(1000 * mean, 3))
    print("WORKER_PIDS", " ".join(str(w.pid) for w in workers))


if __name__ == "__main__":
    main()
