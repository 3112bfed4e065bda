"""stallscope for Python trainers: step, range and data-wait marks.

Pure Python over the recorder's C API (ctypes, no build step). The library
is the one already loaded in the process (``stallscope run`` preloads it),
else ``STALLSCOPE_LIB``, else the installed ``libstallscope_trace.so``. When
none is found every function is a no-op and one warning is printed.

Quickstart::

    import stallscope
    for batch_id, (x, y) in enumerate(loader_iter):
        stallscope.step()                  # ends the previous step, begins the next
        with stallscope.data_wait(batch_id):
            batch = next(it)
        with stallscope.range("forward"):
            loss = model(batch)

Every function is thread-safe and cheap (one ctypes call); none raises.
"""

import contextlib
import ctypes
import ctypes.util
import os
import sys
import threading

__all__ = ["step", "step_end", "range", "data_wait", "mark", "thread_name", "enabled", "library"]

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


def _candidates():
    env = os.environ.get("STALLSCOPE_LIB")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
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
    return lib


def _load():
    """The C API: the copy already in the process first, so that a preloaded
    recorder and this module never write two traces for one process."""
    global _lib, _loaded, _warned
    with _lock:
        if _loaded:
            return _lib
        _loaded = True
        try:
            here = ctypes.CDLL(None)
            if hasattr(here, "stallscope_init"):
                _lib = _bind(here)
                return _lib
        except (OSError, AttributeError):
            pass
        for path in _candidates():
            try:
                _lib = _bind(ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL))
                return _lib
            except (OSError, AttributeError):
                continue
        if not _warned:
            _warned = True
            sys.stderr.write("stallscope: libstallscope_trace not found (set STALLSCOPE_LIB or run "
                             "under 'stallscope run'); stallscope marks are no-ops\n")
        return None


def library():
    """The ctypes library in use, or None when marks are no-ops."""
    return _load()


def enabled():
    """True when marks are recorded somewhere."""
    return _load() is not None


def step(index=None):
    """Marks a step boundary: ends the open step, if any, and begins the next
    (``index`` or the previous index + 1)."""
    global _step_index, _step_open
    lib = _load()
    if lib is None:
        return
    with _lock:
        if _step_open:
            lib.stallscope_step_end(_step_index)
        _step_index = _step_index + 1 if index is None else int(index)
        _step_open = True
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
