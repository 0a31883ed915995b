"""Run at the start of every Python process with this folder on its import path: the
process follows the clock ``RW_RUN_CLOCK`` names (``tests/gate/run_clock.py``). A test puts
the services of its Airflow stack on one clock so, and the task processes they start."""

from tests.gate import run_clock

run_clock.follow()
