"""PyTorch hooks installed by ``stallscope run`` (through sitecustomize).

Nothing here imports torch: ``install_import_hooks()`` waits for the
program's own imports and patches each module right after it loaded:

* ``torch.utils.data.dataloader``: a data wait around every DataLoader
  iterator ``__next__`` (batch id = the iterator's batch count). A step
  begins at the first ``__next__`` while no step is open.
* ``torch.optim.optimizer``: a step ends at every optimizer step —
  ``register_optimizer_step_post_hook`` on torch >= 2.0, else the ``step`` of
  each Optimizer subclass is wrapped when it is first instantiated.
* ``torch.utils.data._utils.worker``: DataLoader worker processes name their
  track "DataLoader worker <id>" and leave a mark with their worker id.

Every hook swallows its own errors: a hook must never break training.
"""

import importlib.abc
import sys
import threading

import stallscope

_tls = threading.local()
_state = {"loader_seen": False}


def _optimizer_stepped(*_args, **_kwargs):
    try:
        if _state["loader_seen"]:
            stallscope.step_end()  # the next __next__ begins the next step
        else:
            stallscope.step()  # no DataLoader: steps tile optimizer steps
    except Exception:  # pylint: disable=broad-except
        pass


def _patch_dataloader(module):
    base = getattr(module, "_BaseDataLoaderIter", None)
    if base is None or getattr(base.__next__, "_stallscope", False):
        return
    original = base.__next__

    def __next__(self):
        try:
            _state["loader_seen"] = True
            if not stallscope.step_open():
                stallscope.step()
            start = stallscope.now()
        except Exception:  # pylint: disable=broad-except
            start = 0
        batch = original(self)
        try:
            stallscope.record_data_wait(start, stallscope.now(),
                                        getattr(self, "_num_yielded", 0))
        except Exception:  # pylint: disable=broad-except
            pass
        return batch

    __next__._stallscope = True
    base.__next__ = __next__


def _wrap_step(cls):
    step = cls.__dict__.get("step")
    if step is None or getattr(step, "_stallscope", False):
        return

    def wrapped(self, *args, **kwargs):
        depth = getattr(_tls, "depth", 0)
        _tls.depth = depth + 1  # a subclass calling super().step() counts once
        try:
            return step(self, *args, **kwargs)
        finally:
            _tls.depth = depth
            if depth == 0:
                _optimizer_stepped()

    wrapped._stallscope = True
    wrapped.__wrapped__ = step
    cls.step = wrapped


def _patch_optimizer(module):
    register = getattr(module, "register_optimizer_step_post_hook", None)
    if register is not None:  # torch >= 2.0
        register(_optimizer_stepped)
        return
    optimizer = getattr(module, "Optimizer", None)
    if optimizer is None or getattr(optimizer.__init__, "_stallscope", False):
        return
    original_init = optimizer.__init__

    def __init__(self, *args, **kwargs):
        try:
            _wrap_step(type(self))
        except Exception:  # pylint: disable=broad-except
            pass
        original_init(self, *args, **kwargs)

    __init__._stallscope = True
    optimizer.__init__ = __init__


def _patch_worker(module):
    loop = getattr(module, "_worker_loop", None)
    if loop is None or getattr(loop, "_stallscope", False):
        return
    try:
        import inspect  # pylint: disable=import-outside-toplevel
        position = list(inspect.signature(loop).parameters).index("worker_id")
    except (ValueError, TypeError):
        position = None

    def _worker_loop(*args, **kwargs):
        try:
            worker = kwargs.get("worker_id")
            if worker is None and position is not None and position < len(args):
                worker = args[position]
            stallscope.thread_name("DataLoader worker %s" % worker)
            stallscope.mark("dataloader_worker %s" % worker)
        except Exception:  # pylint: disable=broad-except
            pass
        return loop(*args, **kwargs)

    _worker_loop._stallscope = True
    module._worker_loop = _worker_loop


_PATCHES = {
    "torch.utils.data.dataloader": _patch_dataloader,
    "torch.optim.optimizer": _patch_optimizer,
    "torch.utils.data._utils.worker": _patch_worker,
}


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: lets the other finders find a watched module and
    runs its patch right after the module executed."""

    def find_spec(self, name, path, target=None):
        patch = _PATCHES.get(name)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module

        def exec_module(module):
            original(module)
            try:
                patch(module)
            except Exception as e:  # pylint: disable=broad-except
                sys.stderr.write("stallscope: hook for %s not installed: %s\n" % (name, e))

        loader.exec_module = exec_module
        return spec


def install_import_hooks():
    """Patches the watched torch modules when (if ever) the program imports
    them; those already imported are patched now."""
    for name, patch in _PATCHES.items():
        module = sys.modules.get(name)
        if module is not None:
            patch(module)
    if not any(isinstance(f, _AfterImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport())
