"""The --headspace replay (stallscope._headspace) driven as the DataLoader
hook drives it, on a fake iterator (no torch, no recorder): prints
"key value" lines for test_python_module.

usage: STALLSCOPE_HEADSPACE=3 python3 headspace_unit.py
"""

import collections

from stallscope import _headspace

Pair = collections.namedtuple("Pair", "x y")


class FakeTensor:
    def __init__(self, n):
        self.n = n

    def element_size(self):
        return 4

    def nelement(self):
        return self.n


class FakeIter:
    """What torch's _BaseDataLoaderIter has that the replay reads."""

    def __init__(self, length):
        self.length, self._num_yielded, self._dataset, self.loaded = length, 0, object(), 0

    def __len__(self):
        return self.length

    def load(self):
        if self._num_yielded >= self.length:
            raise StopIteration
        self._num_yielded += 1
        self.loaded += 1
        return {"image": FakeTensor(10), "labels": [self.loaded], "pair": Pair(FakeTensor(1), 2)}


def next_batch(it):
    replayed, batch = _headspace.replay(it)
    if not replayed:
        batch = it.load()
        _headspace.keep(it, batch)
    return batch


def epoch(it):
    out = []
    try:
        while True:
            out.append(next_batch(it))
    except StopIteration:
        return out


it = FakeIter(10)
first = epoch(it)
print("batches", len(first))
print("loaded", it.loaded)
# The trainer pops a key: the kept batch still has it next time.
got = [b.pop("labels")[0] for b in first]
print("labels", ",".join(str(x) for x in got))
print("replayed_is_copy", int(first[3] is not first[0] and first[3]["pair"] is not first[0]["pair"]))
print("tensor_shared", int(first[3]["image"] is first[0]["image"]))
print("namedtuple_kept", int(type(first[4]["pair"]).__name__ == "Pair"))
# A second epoch: the same length, nothing loaded.
it._num_yielded = 0
second = epoch(it)
print("second_batches", len(second))
print("second_loaded", it.loaded)
print("second_has_labels", int(all("labels" in b for b in second)))
