#!/usr/bin/env bash
# A virtual environment with PyTorch 2.x from PyPI, for the harness and
# scenarios that run on the torch users run (docs/accuracy.md):
#
#   scripts/torch2-venv.sh [DIR]        (default: ../venv-torch2)
#
# Debian's python3 (with python3-venv) makes the environment; pip installs
# torch and numpy into it (about 5 GB with the CUDA wheels torch pulls).
# An environment that already imports torch 2.x is left as it is. Prints
# the environment's python on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-../venv-torch2}
py=$dir/bin/python
if [ -x "$py" ] && "$py" -c 'import sys, torch; sys.exit(int(torch.__version__.split(".")[0]) < 2)' 2>/dev/null; then
  echo "torch2-venv: $dir has torch $("$py" -c 'import torch; print(torch.__version__)')" >&2
  echo "$py"
  exit 0
fi
/usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null ||
  { echo "torch2-venv: /usr/bin/python3 cannot make a venv: apt-get install python3-venv" >&2; exit 1; }
/usr/bin/python3 -m venv "$dir"
echo "torch2-venv: installing torch and numpy into $dir (about 5 GB) ..." >&2
"$py" -m pip install --quiet --disable-pip-version-check torch numpy
"$py" -c 'import torch; print("torch2-venv: torch", torch.__version__)' >&2
echo "$py"
