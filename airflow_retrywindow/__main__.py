"""``python -m airflow_retrywindow``: the command line; with no arguments, ``evaluate``."""

import sys

from airflow_retrywindow.cli import main

if __name__ == "__main__":
    sys.exit(main())
