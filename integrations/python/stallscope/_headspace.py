"""``stallscope run --headspace=K``: the step with data for free.

The trainer's ``DataLoader.__next__`` (torch_hooks) asks ``replay`` first.
Each loader's first K batches come from the loader as usual and are kept;
after them the kept batches are handed out again in turn, and the loader is
not asked any more: its workers go idle once their prefetch queue is full,
so the steps that follow show what the trainer does when the input costs
nothing — the ceiling no input remedy can beat.

* A batch handed out again is a shallow copy of its containers (dicts,
  lists, tuples, named tuples): a trainer that does ``batch.pop("labels")``
  finds the key there next time. Tensors are the same objects.
* ``StopIteration`` comes where the loader would have ended (its length,
  when it has one), so epochs keep their length.
* The kept batches are capped in bytes (STALLSCOPE_HEADSPACE_BYTES, default
  2 GiB): past the cap the batches kept so far are replayed.
* When replay begins, a mark ``headspace replay loader=ID batches=N
  bytes=B`` tells the analyzer which steps are the ceiling.

``stallscope run`` ends the job after the capture window
(--exit-after-window): it never trains on replayed batches for long.
Off unless STALLSCOPE_HEADSPACE is a positive batch count.
"""

import copy
import os

import stallscope

_MAX_BYTES_DEFAULT = 2 << 30
_MAX_DEPTH = 8

_conf = {"k": None, "max_bytes": _MAX_BYTES_DEFAULT}
_caches = {}                              # loader id -> _Cache


class _Cache:
    __slots__ = ("batches", "bytes", "replaying", "next", "full")

    def __init__(self):
        self.batches, self.bytes, self.replaying, self.next, self.full = [], 0, False, 0, False


def _positive_int(text, default):
    try:
        v = int(str(text).strip())
        return v if v > 0 else default
    except (TypeError, ValueError):
        return default


def batches():
    """K, or 0 when headspace is off (read once)."""
    if _conf["k"] is None:
        _conf["k"] = _positive_int(os.environ.get("STALLSCOPE_HEADSPACE", ""), 0)
        _conf["max_bytes"] = _positive_int(os.environ.get("STALLSCOPE_HEADSPACE_BYTES", ""),
                                           _MAX_BYTES_DEFAULT)
    return _conf["k"]


def _copy(x, depth=0):
    """The containers copied, everything else shared."""
    if depth > _MAX_DEPTH:
        return x
    if isinstance(x, dict):
        try:
            y = copy.copy(x)
            if y is x:
                y = dict(x)
        except Exception:  # pylint: disable=broad-except
            y = dict(x)
        try:
            for key, value in x.items():
                y[key] = _copy(value, depth + 1)
        except Exception:  # pylint: disable=broad-except
            pass
        return y
    if isinstance(x, list):
        items = [_copy(v, depth + 1) for v in x]
        if type(x) is list:  # pylint: disable=unidiomatic-typecheck
            return items
        try:
            y = copy.copy(x)
            y[:] = items
            return y
        except Exception:  # pylint: disable=broad-except
            return items
    if isinstance(x, tuple):
        items = [_copy(v, depth + 1) for v in x]
        if hasattr(x, "_fields"):
            try:
                return type(x)(*items)
            except Exception:  # pylint: disable=broad-except
                return x
        if type(x) is tuple:  # pylint: disable=unidiomatic-typecheck
            return tuple(items)
        return x
    return x


def _loader_key(it):
    from stallscope import _dataloader  # pylint: disable=import-outside-toplevel
    info = _dataloader._iterators.get(it)  # pylint: disable=protected-access
    return info.loader_id if info is not None else id(getattr(it, "_dataset", it))


def _length(it):
    try:
        return len(it)
    except Exception:  # pylint: disable=broad-except
        return None


def replay(it):
    """Before the loader is asked: (True, batch) to hand out instead, or
    (False, None) to load as usual. Raises StopIteration where the loader
    would have ended."""
    if not batches():
        return False, None
    try:
        cache = _caches.get(_loader_key(it))
    except Exception:  # pylint: disable=broad-except
        return False, None
    if cache is None or not cache.replaying or not cache.batches:
        return False, None
    n = _length(it)
    yielded = getattr(it, "_num_yielded", 0)
    if n is not None and yielded >= n:
        raise StopIteration
    batch = cache.batches[cache.next % len(cache.batches)]
    cache.next += 1
    try:
        it._num_yielded = yielded + 1  # pylint: disable=protected-access  (as torch counts)
    except Exception:  # pylint: disable=broad-except
        pass
    return True, _copy(batch)


def keep(it, batch):
    """A batch the loader gave: kept while fewer than K are, then replay
    begins."""
    if not batches():
        return
    try:
        key = _loader_key(it)
        cache = _caches.get(key)
        if cache is None:
            if len(_caches) >= 64:
                return
            cache = _caches[key] = _Cache()
        if cache.replaying:
            return
        from stallscope import _dataloader  # pylint: disable=import-outside-toplevel
        nbytes, _ = _dataloader._tensor_bytes(batch)  # pylint: disable=protected-access
        if cache.batches and cache.bytes + nbytes > _conf["max_bytes"]:
            cache.full = True
        else:
            cache.batches.append(_copy(batch))
            cache.bytes += nbytes
        if cache.full or len(cache.batches) >= batches():
            cache.replaying = True
            stallscope.mark("headspace replay loader=%d batches=%d bytes=%d%s" % (
                key, len(cache.batches), cache.bytes, " capped=1" if cache.full else ""))
    except Exception:  # pylint: disable=broad-except
        pass
