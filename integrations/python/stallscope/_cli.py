"""The ``stallscope`` command of a pip install (pyproject.toml's console
entry): replaces itself with the packaged binary, same arguments, same
environment. The binary finds the preload shim, the recorder and the Python
hooks next to itself, in this package's ``_core/``."""

import os
import sys


def binary():
    """The packaged ``stallscope`` executable."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "_core", "bin", "stallscope")


def main():
    path = binary()
    if not os.access(path, os.X_OK):
        sys.stderr.write("stallscope: the packaged command %s is missing or not executable; "
                         "reinstall the stallscope wheel\n" % path)
        return 127
    os.execv(path, ["stallscope"] + sys.argv[1:])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
