"""Loaded by Python at start-up because ``stallscope run`` put this folder
first on PYTHONPATH. Installs the PyTorch hooks (lazily: nothing is imported
until the program imports torch itself), then runs the sitecustomize this
one shadows (Debian ships /etc/python3.11/sitecustomize.py), so the user's
start-up code still runs.
"""

import os
import sys


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


def _install_hooks():
    if os.environ.get("STALLSCOPE_PYTHON_HOOKS", "on") in ("off", "0", "false"):
        return
    try:
        from stallscope import torch_hooks  # pylint: disable=import-outside-toplevel
        torch_hooks.install_import_hooks()
    except Exception as e:  # pylint: disable=broad-except
        sys.stderr.write("stallscope: Python hooks not installed: %r\n" % (e,))


_install_hooks()
_chain_next_sitecustomize()
