"""A Python stack sampler: what each thread of the process was running,
recorded as ``stack_sample`` records (trace format 1.1) on the sampled
thread's track.

Started by the torch hooks once the program imported torch (and again in a
forked child, e.g. a DataLoader worker), or by ``start()``. A daemon thread
wakes at ``STALLSCOPE_PY_STACKS_HZ`` (default 25 Hz; 0 turns it off, at most
250) and takes every other thread's Python stack with
``sys._current_frames()``. It needs the GIL, so:

* each sample carries the real time since the previous one as its weight
  (``interval_ns``); one that came more than 1.5 intervals late, because a
  long call held the GIL, is flagged ``STACK_LATE``;
* it measures its own cost and backs off: when a round of samples costs
  more than 0.5 % of the interval the interval doubles (up to 1 s), and it
  comes back toward the target when the cost falls under 0.1 %;
* frames of torch.compile's machinery (``torch/_dynamo``,
  ``torch/_inductor``, ``torch/fx``) are folded into the user's frame that
  called them; at most 64 frames are kept (``STACK_TRUNCATED``).

A frame is named ``function (file:first line)``, interned once. Every error
is swallowed: the sampler stops and the program goes on.
"""

import os
import sys
import threading
import time

import stallscope

_DEFAULT_HZ = 25.0
_MAX_HZ = 250.0
_MAX_FRAMES = 64
_BACK_OFF, _COME_BACK = 0.005, 0.001  # cost / interval
_FOLD = tuple(os.sep.join(("torch", p)) + os.sep for p in ("_dynamo", "_inductor", "fx"))

_state = {"thread": None, "pid": None, "stop": None}
_names = {}  # code object -> interned frame name


def _rate():
    raw = os.environ.get("STALLSCOPE_PY_STACKS_HZ", "")
    if not raw:
        return _DEFAULT_HZ
    try:
        hz = float(raw)
    except ValueError:
        hz = -1.0
    if not 0 <= hz <= _MAX_HZ or hz != hz:
        sys.stderr.write("stallscope: STALLSCOPE_PY_STACKS_HZ=%r is not a rate in [0, %g]; using "
                         "%g\n" % (raw, _MAX_HZ, _DEFAULT_HZ))
        return _DEFAULT_HZ
    return hz


def folded(filename):
    """True for a frame of torch.compile's own machinery."""
    return any(p in filename for p in _FOLD)


def _frame_name(code):
    got = _names.get(code)
    if got is None:
        got = stallscope.intern("%s (%s:%d)" % (code.co_name, code.co_filename,
                                                 code.co_firstlineno))
        if len(_names) < 65536:
            _names[code] = got
    return got


def stack_of(frame):
    """(frame name ids innermost first, truncated) for ``frame``."""
    ids = []
    truncated = False
    while frame is not None:
        code = frame.f_code
        if not folded(code.co_filename):
            if len(ids) == _MAX_FRAMES:
                truncated = True
                break
            ids.append(_frame_name(code))
        frame = frame.f_back
    return ids, truncated


def _native_ids():
    out = {}
    for t in threading.enumerate():
        nid = getattr(t, "native_id", None)
        if t.ident is not None and nid:
            out[t.ident] = nid
    return out


def _loop(hz, stop):
    # Calls that keep the GIL: one sample round never hands it over midway.
    held = stallscope._fn_holding_gil  # pylint: disable=protected-access
    record, now = held("stallscope_stack_sample_record"), held("stallscope_clock_now")
    if record is None or now is None:
        return
    import ctypes  # pylint: disable=import-outside-toplevel
    me = threading.get_ident()
    target = 1.0 / hz
    interval = target
    last = time.perf_counter()
    cost_ns = 0
    arrays = {}  # frame count -> ctypes array type
    natives, unknown = {}, set()  # thread ident -> native id; idents without one
    while not stop.wait(interval):
        t0 = time.perf_counter()  # from here the round holds the GIL: its cost to the program
        real = t0 - last
        last = t0
        flags_late = stallscope.STACK_LATE if real > 1.5 * interval else 0
        frames = sys._current_frames()  # pylint: disable=protected-access
        if any(ident not in natives and ident not in unknown for ident in frames):
            natives = _native_ids()
            unknown = {ident for ident in frames if ident not in natives}
        ts = now()
        for ident, frame in frames.items():
            if ident == me:
                continue
            tid = natives.get(ident)
            if not tid:
                continue
            ids, truncated = stack_of(frame)
            n = len(ids)
            if n:
                kind = arrays.get(n)
                if kind is None:
                    kind = arrays[n] = ctypes.c_uint32 * n
                arr = kind(*ids)
            else:
                arr = None
            record(ts, tid, int(real * 1e9), cost_ns, stallscope.CPU_UNKNOWN,
                   flags_late | (stallscope.STACK_TRUNCATED if truncated else 0), arr, len(ids))
        del frames
        cost = time.perf_counter() - t0
        cost_ns = min(int(cost * 1e9), 0xFFFFFFFF)  # recorded with the next round
        if cost > _BACK_OFF * interval and interval < 1.0:
            interval = min(interval * 2, 1.0)
        elif cost < _COME_BACK * interval and interval > target:
            interval = max(interval / 2, target)


def _run(hz, stop):
    try:
        _loop(hz, stop)
    except Exception:  # pylint: disable=broad-except
        pass  # the sampler stops; the program goes on


def start():
    """Starts the sampler in this process unless it runs or is off."""
    try:
        if _state["thread"] is not None and _state["pid"] == os.getpid():
            return
        hz = _rate()
        if hz <= 0 or stallscope.library() is None:
            return
        stop = threading.Event()
        t = threading.Thread(target=_run, args=(hz, stop), name="stallscope-stacks", daemon=True)
        _state.update(thread=t, pid=os.getpid(), stop=stop)
        t.start()
    except Exception:  # pylint: disable=broad-except
        pass


def _after_fork_in_child():
    # The sampler thread does not survive a fork: start a new one.
    if _state["thread"] is not None:
        _state["thread"] = None
        start()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
