"""``python -m stallscope ARGS``: the ``stallscope`` command of this install."""

import sys

from stallscope._cli import main

sys.exit(main())
