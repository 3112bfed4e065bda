"""PyTorch hooks installed by ``stallscope run`` (through sitecustomize).

Nothing here imports torch: sitecustomize's finder waits for the program's
own imports and calls ``patch(name, module)`` right after each watched module
loaded:

* ``torch.utils.data.dataloader``: a data wait around every DataLoader
  iterator ``__next__`` (batch id = the iterator's batch count). A step
  begins at the first ``__next__`` while no step is open.
* ``torch.optim.optimizer``: a step ends at every optimizer step —
  ``register_optimizer_step_post_hook`` on torch >= 2.0, else the ``step`` of
  each Optimizer subclass is wrapped when it is first instantiated.
* ``torch.utils.data._utils.worker``: DataLoader worker processes name their
  track "DataLoader worker <id>" and leave a mark with their worker id.

Every hook is transparent: a wrapper carries the name, qualified name,
module, docstring and signature of what it wraps (``functools.wraps``), and
stands where the original stood, so pickle finds it by reference there — a
``spawn`` or ``forkserver`` worker unpickles its target as the wrapper (in a
child with the hooks) or as torch's own function (in one without). Every
hook swallows its own errors: a hook must never break training.
"""

import functools
import inspect
import threading

import stallscope

_tls = threading.local()
_state = {"loader_seen": False}
_MARK = "_stallscope_hook"


def _is_ours(fn):
    return getattr(fn, _MARK, False)


def _transparent(original, wrapper):
    """``wrapper`` made to look like ``original`` and marked as ours."""
    wrapper = functools.wraps(original)(wrapper)
    setattr(wrapper, _MARK, True)
    return wrapper


def _optimizer_stepped(*_args, **_kwargs):
    try:
        if _state["loader_seen"]:
            stallscope.step_end()  # the next __next__ begins the next step
        else:
            stallscope.step()  # no DataLoader: steps tile optimizer steps
    except Exception:  # pylint: disable=broad-except
        pass


def _before_next():
    try:
        _state["loader_seen"] = True
        if not stallscope.step_open():
            stallscope.step()
        return stallscope.now()
    except Exception:  # pylint: disable=broad-except
        return 0


def _after_next(iterator, start):
    try:
        stallscope.record_data_wait(start, stallscope.now(), getattr(iterator, "_num_yielded", 0))
    except Exception:  # pylint: disable=broad-except
        pass


def _patch_dataloader(module):
    base = getattr(module, "_BaseDataLoaderIter", None)
    if base is None or _is_ours(base.__next__):
        return
    original = base.__next__

    def __next__(self):
        start = _before_next()
        batch = original(self)
        _after_next(self, start)
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
    except Exception:  # pylint: disable=broad-except
        pass


def _patch_worker(module):
    loop = getattr(module, "_worker_loop", None)
    if loop is None or _is_ours(loop):
        return
    position = _worker_id_position(loop)

    def worker_loop_wrapper(*args, **kwargs):
        _name_worker(position, args, kwargs)
        return loop(*args, **kwargs)

    # Pickled by reference (module + qualified name), which now names the
    # wrapper: spawn and forkserver workers find it again after import.
    module._worker_loop = _transparent(loop, worker_loop_wrapper)


_PATCHES = {
    "torch.utils.data.dataloader": _patch_dataloader,
    "torch.optim.optimizer": _patch_optimizer,
    "torch.utils.data._utils.worker": _patch_worker,
}


def patch(name, module):
    """Installs the hook for the watched module ``name`` (no-op otherwise;
    idempotent)."""
    fn = _PATCHES.get(name)
    if fn is not None:
        fn(module)
