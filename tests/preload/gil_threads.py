"""Three Python threads doing CPU work under the GIL, sharing a
threading.Lock: no pipeline, so nothing here is a hand-off.
  gil_threads.py SECONDS
Prints ROUNDS."""
import sys
import threading
import time

lock = threading.Lock()
rounds = [0]


def burn(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        x = 0
        for i in range(2000):
            x += i * i
        with lock:
            rounds[0] += 1


def main():
    seconds = float(sys.argv[1])
    threads = [threading.Thread(target=burn, args=(seconds,)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("ROUNDS", rounds[0])


if __name__ == "__main__":
    main()
