"""stallscope for Python trainers: step, range and data-wait marks, and the
input pipeline seen from inside.

Pure Python over the recorder's C API (ctypes, no build step). The library
is the one already loaded in the process (``stallscope run`` preloads it),
else ``STALLSCOPE_LIB``, else the installed ``libstallscope_trace.so`` (a pip
install's, in this package's ``_core/lib``, or ``<prefix>/lib``'s). When
none is found every function is a no-op and one warning is printed.

Quickstart::

    import stallscope
    for batch_id, (x, y) in enumerate(loader_iter):
        stallscope.step()                  # ends the previous step, begins the next
        with stallscope.data_wait(batch_id):
            batch = next(it)
        with stallscope.range("forward"):
            loss = model(batch)

The records of trace format 1.1 (docs/trace-format.md), for the DataLoader
hooks, channel hand-offs and a stack sampler; times are ``now()`` ticks::

    t0 = stallscope.now()
    item = dataset[i]
    stallscope.record_sample(t0, stallscope.now(), loader_id=id(loader),
                             generation=0, batch_index=b, sample_index=i, worker=w)
    stallscope.record_loader_config(id(loader), 0, num_workers=4, batch_size=32,
                                    dataset="MyDataset", site="train.py:42")
    stallscope.record_batch_handoff(put, stallscope.now(), id(loader), 0, b, worker=w,
                                    worker_pid=pid, requested=asked)
    stallscope.record_channel_handoff(put, got, channel_id, stallscope.CHANNEL_MP_QUEUE,
                                      producer_pid=ppid, consumer_pid=os.getpid())
    stallscope.record_stack_sample(stallscope.now(), ["leaf", "caller", "main"],
                                   tid=native_id, interval_ns=20_000_000)

Each returns 0, or a negative errno: -EINVAL for a bad argument, -ENOBUFS
when the event was dropped, -ENODEV when nothing is recorded (capture off,
no library, or a library older than these records).

Every function is thread-safe and cheap (one ctypes call); none raises.
"""

import contextlib
import ctypes
import ctypes.util
import errno
import os
import sys
import threading

__all__ = ["step", "step_end", "range", "data_wait", "mark", "thread_name", "enabled", "library",
           "intern", "record_sample", "record_loader_config", "record_batch_handoff",
           "record_channel_handoff", "record_stack_sample"]

_lock = threading.Lock()
_lib = None
_loaded = False
_warned = False
_step_index = -1
_step_open = False



def _after_fork_in_child():
    # A fork while another thread held the lock must not leave it held.
    global _lock  # pylint: disable=global-statement
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

_SIGNATURES = {
    "stallscope_init": (ctypes.c_int, []),
    "stallscope_clock_now": (ctypes.c_uint64, []),
    "stallscope_step_begin": (None, [ctypes.c_uint64]),
    "stallscope_step_end": (None, [ctypes.c_uint64]),
    "stallscope_range_push": (None, [ctypes.c_char_p]),
    "stallscope_range_pop": (None, []),
    "stallscope_data_wait_record": (None, [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64]),
    "stallscope_mark": (None, [ctypes.c_char_p]),
    "stallscope_thread_name_set": (None, [ctypes.c_char_p]),
}


_U8, _U32, _I32, _U64 = ctypes.c_uint8, ctypes.c_uint32, ctypes.c_int32, ctypes.c_uint64


class _LoaderConfig(ctypes.Structure):  # struct stallscope_loader_config
    _fields_ = [("size", _U32), ("generation", _U32), ("ts", _U64), ("loader_id", _U64),
                ("dataset_len", _U64), ("num_workers", _U32), ("prefetch_factor", _U32),
                ("batch_size", _U32), ("timeout_ms", _U32), ("dataset_name", _U32),
                ("collate_name", _U32), ("sampler_name", _U32), ("batch_sampler_name", _U32),
                ("site_name", _U32), ("pin_memory", _U8), ("persistent_workers", _U8),
                ("drop_last", _U8), ("in_order", _U8), ("mp_context", _U8),
                ("dataset_kind", _U8), ("flags", _U8), ("reserved", _U8), ("reserved2", _U32)]


# Bound where the library has them (an older recorder lacks the format 1.1
# records: their wrappers then return -ENODEV).
_OPTIONAL_SIGNATURES = {
    "stallscope_step_begin_at": (None, [ctypes.c_uint64, ctypes.c_uint64]),
    "stallscope_name_intern": (_U32, [ctypes.c_char_p]),
    "stallscope_sample_record": (ctypes.c_int, [_U64, _U64, _U64, _U32, _U64, _U64, _I32, _U32,
                                                _U32]),
    "stallscope_loader_config_record": (ctypes.c_int, [ctypes.POINTER(_LoaderConfig)]),
    "stallscope_batch_handoff_record": (ctypes.c_int, [_U64, _U64, _U64, _U64, _U32, _U64, _I32,
                                                       _U32]),
    "stallscope_channel_handoff_record": (ctypes.c_int, [_U64, _U64, _U64, _U64, _U32, _U32,
                                                         _U32, _U32, _U32, _U64, _U64, _U32]),
    "stallscope_stack_sample_record": (ctypes.c_int, [_U64, _U32, _U64, _U32, _U32, _U32,
                                                      ctypes.c_void_p, _U32]),
}
_optional = {}

_ENODEV, _EINVAL = -errno.ENODEV, -errno.EINVAL

# The values of trace.h's enums (format.hpp).
SAMPLE_GETITEM, SAMPLE_NEXT, SAMPLE_GETITEMS, SAMPLE_FETCH, SAMPLE_COLLATE = 0, 1, 2, 3, 4
MP_UNKNOWN, MP_FORK, MP_SPAWN, MP_FORKSERVER = 0, 1, 2, 3
DATASET_UNKNOWN, DATASET_MAP, DATASET_ITERABLE = 0, 1, 2
PIN_OFF, PIN_ON, PIN_INACTIVE = 0, 1, 2
LOADER_GETITEMS, LOADER_OVERRIDDEN = 1, 2
(CHANNEL_UNKNOWN, CHANNEL_PIPE, CHANNEL_MP_QUEUE, CHANNEL_SOCKET, CHANNEL_USER, CHANNEL_EVENTFD,
 CHANNEL_CONDVAR, CHANNEL_SEMAPHORE) = (0, 1, 2, 3, 4, 5, 6, 7)
CPU_UNKNOWN, CPU_RUNNING, CPU_BLOCKED = 0, 1, 2
STACK_LATE, STACK_TRUNCATED, STACK_NATIVE = 1, 2, 4

_MP_NAMES = {"fork": MP_FORK, "spawn": MP_SPAWN, "forkserver": MP_FORKSERVER}
_DATASET_NAMES = {"map": DATASET_MAP, "iterable": DATASET_ITERABLE}


def _candidates():
    env = os.environ.get("STALLSCOPE_LIB")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    # A pip install: site-packages/stallscope/_core/lib
    yield os.path.join(here, "_core", "lib", "libstallscope_trace.so.1")
    # <prefix>/share/stallscope/python/stallscope -> <prefix>/lib
    for rel in ("../../../../lib", "../../../../lib64"):
        yield os.path.normpath(os.path.join(here, rel, "libstallscope_trace.so.1"))
    found = ctypes.util.find_library("stallscope_trace")
    if found:
        yield found


def _bind(lib):
    for name, (res, args) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args
    for name, (res, args) in _OPTIONAL_SIGNATURES.items():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = res
            fn.argtypes = args
            _optional[name] = fn
    return lib


def _load():
    """The C API: the copy already in the process first, so that a preloaded
    recorder and this module never write two traces for one process."""
    if _loaded:  # the fast path: no lock once the library is known
        return _lib
    with _lock:
        if not _loaded:
            _find()
        return _lib


def _find():
    global _lib, _loaded, _warned
    try:
        here = ctypes.CDLL(None)
        if hasattr(here, "stallscope_init"):
            _lib = _bind(here)
            _loaded = True
            return
    except (OSError, AttributeError):
        pass
    for path in _candidates():
        try:
            _lib = _bind(ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL))
            _loaded = True
            return
        except (OSError, AttributeError):
            continue
    _loaded = True
    if not _warned:
        _warned = True
        sys.stderr.write("stallscope: libstallscope_trace not found (set STALLSCOPE_LIB or run "
                         "under 'stallscope run'); stallscope marks are no-ops\n")


def library():
    """The ctypes library in use, or None when marks are no-ops."""
    return _load()


def enabled():
    """True when marks are recorded somewhere."""
    return _load() is not None


def step(index=None, at=None):
    """Marks a step boundary: ends the open step, if any, and begins the next
    (``index`` or the previous index + 1), now or, with ``at`` (now() ticks,
    not in the future), from then."""
    global _step_index, _step_open
    lib = _load()
    if lib is None:
        return
    begin_at = _optional.get("stallscope_step_begin_at") if at else None
    with _lock:
        if _step_open:
            lib.stallscope_step_end(_step_index)
        _step_index = _step_index + 1 if index is None else int(index)
        _step_open = True
        if begin_at is not None:
            begin_at(_step_index, int(at))
        else:
            lib.stallscope_step_begin(_step_index)


def step_end():
    """Ends the open step without beginning another (the end of training)."""
    global _step_open
    lib = _load()
    if lib is None:
        return
    with _lock:
        if _step_open:
            lib.stallscope_step_end(_step_index)
            _step_open = False


def step_open():
    """True while a step begun by step() has not ended."""
    return _step_open


def now():
    """The recorder's clock in ticks (0 when marks are no-ops)."""
    lib = _load()
    return lib.stallscope_clock_now() if lib is not None else 0


def record_data_wait(start, end, batch_id=0):
    """The trainer waited for a batch from ``start`` to ``end`` (now() ticks)."""
    lib = _load()
    if lib is not None:
        lib.stallscope_data_wait_record(start, end, batch_id)


@contextlib.contextmanager
def range(name):  # pylint: disable=redefined-builtin
    """A named range around the ``with`` body, on the calling thread."""
    lib = _load()
    if lib is None:
        yield
        return
    lib.stallscope_range_push(str(name).encode("utf-8", "replace"))
    try:
        yield
    finally:
        lib.stallscope_range_pop()


@contextlib.contextmanager
def data_wait(batch_id=0):
    """The ``with`` body is the trainer waiting for its next batch."""
    lib = _load()
    if lib is None:
        yield
        return
    start = lib.stallscope_clock_now()
    try:
        yield
    finally:
        lib.stallscope_data_wait_record(start, lib.stallscope_clock_now(), int(batch_id))


def mark(text):
    """An instant note in the trace (e.g. "checkpoint")."""
    lib = _load()
    if lib is not None:
        lib.stallscope_mark(str(text).encode("utf-8", "replace"))


def thread_name(name):
    """Names the calling thread's track."""
    lib = _load()
    if lib is not None:
        lib.stallscope_thread_name_set(str(name).encode("utf-8", "replace"))


# ---- Trace format 1.1: the input pipeline from inside, stack samples.

def _fn(name):
    """A format 1.1 entry point, or None (no library, or an older one)."""
    if not _loaded:
        _load()
    return _optional.get(name)


_held = {}


def _fn_holding_gil(name):
    """``name`` (an entry point of _SIGNATURES or _OPTIONAL_SIGNATURES) bound
    so that a call keeps the GIL (ctypes.PyDLL): cheaper for the recorder's
    short calls, and no hand-over of the GIL to another thread mid-work.
    None when the library lacks it."""
    got = _held.get(name)
    if got is not None or _load() is None:
        return got
    try:
        lib = ctypes.PyDLL(_lib._name, handle=_lib._handle)  # pylint: disable=protected-access
        fn = getattr(lib, name)
    except (OSError, AttributeError):
        return None
    res, args = _SIGNATURES.get(name) or _OPTIONAL_SIGNATURES[name]
    fn.restype, fn.argtypes = res, args
    _held[name] = fn
    return fn


_names = {}  # interned ids by name: the C call takes a lock


def intern(name):
    """The recorder's id of ``name`` (str), interned once; 0 when marks are
    no-ops or ``name`` is None or empty."""
    if not name:
        return 0
    got = _names.get(name)
    if got is not None:
        return got
    fn = _fn("stallscope_name_intern")
    if fn is None:
        return 0
    try:
        got = fn(str(name).encode("utf-8", "replace"))
    except Exception:  # pylint: disable=broad-except
        return 0
    if got and len(_names) < 65536:
        _names[name] = got
    return got


def _name_id(name):
    return name if isinstance(name, int) else intern(name)


def _enum(value, names=None):
    """An enum field from an int, a bool, a name in ``names`` or None (0)."""
    if isinstance(value, str):
        return names.get(value, 0) if names else 0
    return int(value or 0)


def record_sample(start, end, loader_id, generation, batch_index, sample_index, worker=-1,
                  part=SAMPLE_GETITEM, count=1):
    """One dataset item's load from ``start`` to ``end`` (now() ticks) on the
    calling thread: ``dataset[sample_index]`` for batch ``batch_index`` of
    iterator ``generation`` of the loader ``loader_id``, in ``worker`` (-1:
    the trainer's process). ``part`` (SAMPLE_*) says when the span is a
    whole fetch, a ``__getitems__`` or the collate of ``count`` samples."""
    fn = _fn("stallscope_sample_record")
    if fn is None:
        return _ENODEV
    try:
        return fn(start, end, loader_id, generation, batch_index, sample_index, worker, part,
                  count)
    except Exception:  # pylint: disable=broad-except
        return _EINVAL


def record_loader_config(loader_id, generation=0, num_workers=0, prefetch_factor=0,
                         batch_size=0, pin_memory=PIN_OFF, persistent_workers=False,
                         drop_last=False, in_order=True, mp_context=MP_UNKNOWN, timeout_ms=0,
                         dataset_len=0, dataset_kind=DATASET_UNKNOWN, dataset=None,
                         collate_fn=None, sampler=None, batch_sampler=None, site=None, flags=0,
                         ts=0):
    """A loader's configuration at iterator creation (``ts`` ticks, 0 = now).
    None for a number means unknown (0). Names (``dataset``, ``collate_fn``,
    ``sampler``, ``batch_sampler`` class names; ``site``, "train.py:42") are
    str; ``mp_context`` may be "fork", "spawn" or "forkserver" and
    ``dataset_kind`` "map" or "iterable"; ``pin_memory`` a bool or PIN_*."""
    fn = _fn("stallscope_loader_config_record")
    if fn is None:
        return _ENODEV
    try:
        c = _LoaderConfig()
        c.size = ctypes.sizeof(_LoaderConfig)
        c.generation, c.ts, c.loader_id = generation or 0, ts or 0, loader_id
        c.dataset_len, c.num_workers = dataset_len or 0, num_workers or 0
        c.prefetch_factor, c.batch_size = prefetch_factor or 0, batch_size or 0
        c.timeout_ms = int(timeout_ms or 0)
        c.dataset_name, c.collate_name = _name_id(dataset), _name_id(collate_fn)
        c.sampler_name, c.batch_sampler_name = _name_id(sampler), _name_id(batch_sampler)
        c.site_name = _name_id(site)
        c.pin_memory = _enum(pin_memory)
        c.persistent_workers, c.drop_last = bool(persistent_workers), bool(drop_last)
        c.in_order = bool(in_order)
        c.mp_context = _enum(mp_context, _MP_NAMES)
        c.dataset_kind = _enum(dataset_kind, _DATASET_NAMES)
        c.flags = _enum(flags)
        return fn(ctypes.byref(c))
    except Exception:  # pylint: disable=broad-except
        return _EINVAL


def record_batch_handoff(put, received, loader_id, generation, batch_index, worker=0,
                         worker_pid=0, requested=0):
    """Batch ``batch_index`` from its worker's put (``put``, ticks the worker
    took) to the trainer's receive (``received``); ``requested``: when the
    trainer asked for it (0 = unknown). Call it on the trainer's thread."""
    fn = _fn("stallscope_batch_handoff_record")
    if fn is None:
        return _ENODEV
    try:
        return fn(put, received, requested, loader_id, generation, batch_index, worker,
                  worker_pid)
    except Exception:  # pylint: disable=broad-except
        return _EINVAL


def record_channel_handoff(put, got, channel_id, channel_type=CHANNEL_UNKNOWN, producer_pid=0,
                           producer_tid=0, consumer_pid=0, consumer_tid=0, object_id=0,
                           nbytes=0, parts=0, requested=0):
    """One object through a channel stallscope did not build, from its put
    to its get (ticks), on the consumer's thread; ``requested``: when the get
    began. Unknown values are 0."""
    fn = _fn("stallscope_channel_handoff_record")
    if fn is None:
        return _ENODEV
    try:
        return fn(put, got, requested, channel_id, channel_type, producer_pid, producer_tid,
                  consumer_pid, consumer_tid, object_id, nbytes, parts)
    except Exception:  # pylint: disable=broad-except
        return _EINVAL


def record_stack_sample(ts, frames, tid=0, interval_ns=0, cost_ns=0, on_cpu=CPU_UNKNOWN,
                        flags=0):
    """One stack sample of thread ``tid`` (OS thread id, 0 = the calling one)
    at ``ts`` ticks: ``frames`` innermost first, each a str or an id from
    intern(); ``interval_ns`` the interval it stands for, ``cost_ns`` what
    taking it cost, ``flags`` STACK_*."""
    fn = _fn("stallscope_stack_sample_record")
    if fn is None:
        return _ENODEV
    try:
        ids = [_name_id(f) for f in frames]
        arr = (ctypes.c_uint32 * len(ids))(*ids) if ids else None
        return fn(ts, tid, interval_ns, cost_ns, on_cpu, flags, arr, len(ids))
    except Exception:  # pylint: disable=broad-except
        return _EINVAL
