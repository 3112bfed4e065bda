"""PyTorch hooks installed by ``stallscope run`` (through sitecustomize).

Nothing here imports torch: sitecustomize's finder waits for the program's
own imports and calls ``patch(name, module)`` right after each watched module
loaded:

* ``torch.utils.data.dataloader``: a data wait around every DataLoader
  iterator ``__next__`` (batch id = the batch's index in its iterator). A
  step begins at the first ``__next__`` while no step is open — unless
  gradients are off (``torch.no_grad``): that is an evaluation loop, a
  ``phase:eval`` range until the next training batch or optimizer step.
  With ``stallscope run --headspace`` the kept batches are handed out again
  instead of loading (``_headspace``).
  The loader's configuration, construction site, ``--set`` settings and
  hand-offs: ``_dataloader``.
* ``torch.optim.optimizer``: an optimizer step makes the step's end due —
  it ends when the trainer next asks for a batch, begins an evaluation loop
  or exits, so steps tile the iterations —
  ``register_optimizer_step_post_hook`` on torch >= 2.0, else the ``step`` of
  each Optimizer subclass is wrapped when it is first instantiated.
* ``torch.cuda.amp.grad_scaler``, ``torch.amp.grad_scaler``: a
  ``GradScaler.step`` that skipped ``optimizer.step()`` (inf or NaN
  gradients) ends the step too.
* ``torch.utils.data._utils.worker``: DataLoader worker processes name their
  track "DataLoader worker <id>", leave a mark with their worker id and read
  their queues through taps (each batch's fetch, with its index).
* ``torch.utils.data._utils.fetch``: sample and collate spans.
* ``torch.utils.data._utils.pin_memory``: the pin-memory thread's copies.

Once torch is imported the Python stack sampler (``_sampler``) starts.

Every hook is transparent: a wrapper carries the name, qualified name,
module, docstring and signature of what it wraps (``functools.wraps``), and
stands where the original stood, so pickle finds it by reference there — a
``spawn`` or ``forkserver`` worker unpickles its target as the wrapper (in a
child with the hooks) or as torch's own function (in one without). Every
hook swallows its own errors: a hook must never break training.
"""

import functools
import inspect
import sys
import threading

import stallscope
from stallscope import _dataloader, _headspace, _sampler

_tls = threading.local()
_state = {"loader_seen": False, "optimizer_steps": 0, "eval": None, "pending": 0,
          "end_due": False, "atexit": False}
_MARK = "_stallscope_hook"


def _is_ours(fn):
    return getattr(fn, _MARK, False)


def _transparent(original, wrapper):
    """``wrapper`` made to look like ``original`` and marked as ours."""
    wrapper = functools.wraps(original)(wrapper)
    setattr(wrapper, _MARK, True)
    return wrapper


def _grad_enabled():
    torch = sys.modules.get("torch")
    try:
        return torch.is_grad_enabled()
    except Exception:  # pylint: disable=broad-except
        return True


def _eval_begin():
    if _state["eval"] is None:
        _state["eval"] = threading.get_ident()
        lib = stallscope.library()
        if lib is not None:
            lib.stallscope_range_push(b"phase:eval")


def _eval_end():
    """Closes the evaluation phase on the thread that opened it."""
    if _state["eval"] is not None and _state["eval"] == threading.get_ident():
        _state["eval"] = None
        lib = stallscope.library()
        if lib is not None:
            lib.stallscope_range_pop()


def _optimizer_stepped(*_args, **_kwargs):
    try:
        _state["optimizer_steps"] += 1
        _eval_end()
        if _state["loader_seen"]:
            # The step ends when the trainer next asks for a batch: what it
            # does after the optimizer step (logging, a scheduler) is its own.
            _state["end_due"] = True
        else:
            stallscope.step()  # no DataLoader: steps tile optimizer steps
    except Exception:  # pylint: disable=broad-except
        pass


def _end_due_step():
    """Ends the step whose optimizer step came, if any (now)."""
    if _state["end_due"]:
        _state["end_due"] = False
        stallscope.step_end()


def _before_next(iterator):
    """Before a batch is asked for. Returns (when, batch index)."""
    try:
        _state["loader_seen"] = True
        _end_due_step()  # before `start`: the next step begins after this one ended
        start = stallscope.now()
        if not _grad_enabled():  # an evaluation loop: a phase, not steps
            if not stallscope.step_open():
                _eval_begin()
        elif not stallscope.step_open() and not _state["pending"]:
            _eval_end()
            _state["pending"] = start  # a step, once a batch comes back
        _dataloader.next_started(iterator, start)
        return start, getattr(iterator, "_num_yielded", 0)
    except Exception:  # pylint: disable=broad-except
        return 0, 0


def _after_next(start, index, got_batch):
    """After the ask: a batch came back (``got_batch``) or the loader ended."""
    try:
        _dataloader.next_ended()
        pending, _state["pending"] = _state["pending"], 0
        if not got_batch:
            return  # the end of an epoch begins no step
        if pending and not stallscope.step_open():
            stallscope.step(at=pending)  # the step began when the trainer began to wait
        if start:
            stallscope.record_data_wait(start, stallscope.now(), index)
    except Exception:  # pylint: disable=broad-except
        pass


def _patch_dataloader(module):
    loader = getattr(module, "DataLoader", None)
    if loader is not None:
        _dataloader.patch_init(loader)
        _dataloader.patch_iter(loader)
    multi = getattr(module, "_MultiProcessingDataLoaderIter", None)
    if multi is not None:
        _dataloader.patch_multiprocess_iter(multi)
    base = getattr(module, "_BaseDataLoaderIter", None)
    if base is None or _is_ours(base.__next__):
        return
    original = base.__next__

    def __next__(self):
        start, index = _before_next(self)
        try:
            try:  # --headspace: a kept batch again instead of loading
                replayed, batch = _headspace.replay(self)
            except StopIteration:
                raise
            except Exception:  # pylint: disable=broad-except
                replayed = False
            if not replayed:
                batch = original(self)
        except BaseException:  # StopIteration at the end of an epoch: no batch, no wait
            _after_next(start, index, False)
            raise
        _after_next(start, index, True)
        if not replayed:
            _headspace.keep(self, batch)
            try:
                _dataloader.batch_received(self, batch)
            except Exception:  # pylint: disable=broad-except
                pass
        return batch

    base.__next__ = _transparent(original, __next__)


def _wrap_step(cls):
    step = cls.__dict__.get("step")
    if step is None or _is_ours(step):
        return

    def step_wrapper(self, *args, **kwargs):
        depth = getattr(_tls, "depth", 0)
        _tls.depth = depth + 1  # a subclass calling super().step() counts once
        try:
            return step(self, *args, **kwargs)
        finally:
            _tls.depth = depth
            if depth == 0:
                _optimizer_stepped()

    cls.step = _transparent(step, step_wrapper)


def _patch_optimizer(module):
    register = getattr(module, "register_optimizer_step_post_hook", None)
    if register is not None:  # torch >= 2.0
        if not _state.get("post_hook"):
            _state["post_hook"] = register(_optimizer_stepped)
        return
    optimizer = getattr(module, "Optimizer", None)
    if optimizer is None or _is_ours(optimizer.__init__):
        return
    original_init = optimizer.__init__

    def init_wrapper(self, *args, **kwargs):
        try:
            _wrap_step(type(self))
        except Exception:  # pylint: disable=broad-except
            pass
        original_init(self, *args, **kwargs)

    optimizer.__init__ = _transparent(original_init, init_wrapper)


def _worker_id_position(loop):
    try:
        return list(inspect.signature(loop).parameters).index("worker_id")
    except (ValueError, TypeError):
        return None


def _name_worker(position, args, kwargs):
    try:
        worker = kwargs.get("worker_id")
        if worker is None and position is not None and position < len(args):
            worker = args[position]
        stallscope.thread_name("DataLoader worker %s" % worker)
        stallscope.mark("dataloader_worker %s" % worker)
        return worker
    except Exception:  # pylint: disable=broad-except
        return None


def _flush():
    try:
        lib = stallscope.library()
        if lib is not None and hasattr(lib, "stallscope_flush"):
            lib.stallscope_flush()
    except Exception:  # pylint: disable=broad-except
        pass


def _patch_worker(module):
    loop = getattr(module, "_worker_loop", None)
    if loop is None or _is_ours(loop):
        return
    position = _worker_id_position(loop)

    def worker_loop_wrapper(*args, **kwargs):
        worker = _name_worker(position, args, kwargs)
        try:
            args, kwargs = _dataloader.wrap_worker_args(loop, args, kwargs, worker)
        except Exception:  # pylint: disable=broad-except
            pass
        try:
            return loop(*args, **kwargs)
        finally:
            _flush()  # the worker ends with os._exit: no exit handler writes its last records

    # Pickled by reference (module + qualified name), which now names the
    # wrapper: spawn and forkserver workers find it again after import.
    module._worker_loop = _transparent(loop, worker_loop_wrapper)


def _patch_grad_scaler(module):
    """``GradScaler.step`` ends the step even when it skipped
    ``optimizer.step()`` (inf or NaN gradients), so two iterations never
    merge. Only the class that defines ``step`` is wrapped (torch >= 2.3's
    ``torch.cuda.amp.GradScaler`` inherits it from ``torch.amp``'s)."""
    scaler = getattr(module, "GradScaler", None)
    step = getattr(scaler, "__dict__", {}).get("step") if scaler is not None else None
    if step is None or _is_ours(step):
        return

    def step_wrapper(self, *args, **kwargs):
        depth = getattr(_tls, "scaler_depth", 0)
        _tls.scaler_depth = depth + 1
        before = _state["optimizer_steps"]
        try:
            return step(self, *args, **kwargs)
        finally:
            _tls.scaler_depth = depth
            if depth == 0 and _state["optimizer_steps"] == before:
                try:
                    if stallscope.step_open():  # skipped: end the iteration anyway
                        _optimizer_stepped()
                except Exception:  # pylint: disable=broad-except
                    pass

    scaler.step = _transparent(step, step_wrapper)


_PATCHES = {
    "torch.utils.data.dataloader": _patch_dataloader,
    "torch.optim.optimizer": _patch_optimizer,
    "torch.utils.data._utils.worker": _patch_worker,
    "torch.utils.data._utils.fetch": _dataloader.patch_fetchers,
    "torch.utils.data._utils.pin_memory": _dataloader.patch_pin_memory,
    "torch.cuda.amp.grad_scaler": _patch_grad_scaler,
    "torch.amp.grad_scaler": _patch_grad_scaler,
}


def patch(name, module):
    """Installs the hook for the watched module ``name`` (no-op otherwise;
    idempotent)."""
    fn = _PATCHES.get(name)
    if fn is not None:
        fn(module)
        _sampler.start()  # once per process: the program imported torch
        if not _state["atexit"]:
            _state["atexit"] = True
            import atexit  # pylint: disable=import-outside-toplevel
            atexit.register(_at_exit)


def _at_exit():
    try:
        _end_due_step()  # the last step ends with the program
        _eval_end()
    except Exception:  # pylint: disable=broad-except
        pass
