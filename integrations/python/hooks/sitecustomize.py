"""Loaded by Python at start-up because ``stallscope run`` put this folder
first on PYTHONPATH. Installs a finder that waits for the program's own
import of the watched PyTorch modules and patches each right after it loaded
(nothing is imported before that: a program that never imports torch sees
only this module and one entry on ``sys.meta_path``), then runs the
sitecustomize this one shadows (Debian ships /etc/python3.11/sitecustomize.py),
so the user's start-up code still runs.
"""

import os
import sys

# The modules whose import brings in the hooks (stallscope.torch_hooks
# patches them; keep the two lists equal).
_WATCHED = frozenset((
    "torch.utils.data.dataloader",
    "torch.optim.optimizer",
    "torch.utils.data._utils.worker",
    "torch.utils.data._utils.fetch",
    "torch.utils.data._utils.pin_memory",
    "torch.cuda.amp.grad_scaler",
    "torch.amp.grad_scaler",
))


class StallscopeAfterImport:
    """Finds nothing itself: lets the other finders find a watched module and
    runs stallscope's patch right after the module executed."""

    def find_spec(self, name, path, target=None):
        if name not in _WATCHED:
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
        had_own = "exec_module" in getattr(loader, "__dict__", {})
        original = loader.exec_module

        def exec_module(module):
            try:
                original(module)
            finally:
                if not had_own:  # the loader looks as it did before
                    try:
                        del loader.exec_module
                    except AttributeError:
                        pass
            _patch(name, module)

        try:
            loader.exec_module = exec_module
        except AttributeError:  # a loader with __slots__: no hook for it
            pass
        return spec


def _patch(name, module):
    try:
        from stallscope import torch_hooks  # pylint: disable=import-outside-toplevel
        torch_hooks.patch(name, module)
    except Exception as e:  # pylint: disable=broad-except
        sys.stderr.write("stallscope: hook for %s not installed: %r\n" % (name, e))


def _install_hooks():
    if os.environ.get("STALLSCOPE_PYTHON_HOOKS", "on") in ("off", "0", "false"):
        return
    for name in _WATCHED:  # imported before us (a usercustomize, a .pth file)
        module = sys.modules.get(name)
        if module is not None:
            _patch(name, module)
    if not any(type(f).__name__ == "StallscopeAfterImport" for f in sys.meta_path):
        sys.meta_path.insert(0, StallscopeAfterImport())


def _chain_next_sitecustomize():
    here = os.path.dirname(os.path.abspath(__file__))
    saved = list(sys.path)
    ours = sys.modules.pop("sitecustomize", None)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
        import sitecustomize  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except ImportError:
        pass
    except Exception as e:  # pylint: disable=broad-except
        sys.stderr.write("stallscope: the next sitecustomize failed: %r\n" % (e,))
    finally:
        sys.path[:] = saved
        if ours is not None:
            sys.modules["sitecustomize"] = ours


_install_hooks()
_chain_next_sitecustomize()
