"""RetryWindowPolicy in the failure path, and what it adds to DAG parsing.

Run from the work tree: ``python benchmarks/policy_failure_path.py [--rounds N]``.

Targets (one PASS/FAIL line each; the exit status is 1 if any fails):

- one evaluation at failure time, fixture build included, takes under 1 ms
  (median) on these machines;
- importing the policy on top of ``import airflow.sdk`` adds under 5 % to the
  import time a DAG file pays.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import subprocess
import sys
import time
from datetime import timedelta

EVALUATION_TARGET_US = 1000.0
IMPORT_TARGET = 0.05


def evaluation_us(rounds: int) -> float:
    """Median microseconds of ``RetryWindowPolicy.evaluate`` on a real operator."""
    import pendulum
    from airflow.providers.standard.operators.empty import EmptyOperator

    from airflow_retrywindow import Deadline, RetryWindowPolicy

    policy = RetryWindowPolicy(
        deadline=Deadline.after_data_interval_end(hours=6),
        duration=timedelta(minutes=35),
        validation=timedelta(minutes=5),
        safe_repeat=True,
        unknown=[TimeoutError],
    )
    task = EmptyOperator(
        task_id="load",
        retries=3,
        retry_delay=timedelta(seconds=4),
        retry_exponential_backoff=2,
        max_retry_delay=timedelta(seconds=12),
    )
    start = pendulum.now("UTC").start_of("day")
    context = {"task": task, "data_interval_start": start, "data_interval_end": start.add(days=1)}
    error = ConnectionError("positions database closed the connection")
    samples = []
    for _ in range(rounds):
        began = time.perf_counter_ns()
        decision = policy.evaluate(error, try_number=2, max_tries=3, context=context)
        samples.append((time.perf_counter_ns() - began) / 1000)
    assert decision.action.value == "retry", decision
    return statistics.median(samples)


_IMPORTS = """
import time
began = time.perf_counter()
import airflow.sdk
from airflow.sdk import DAG, task
sdk = time.perf_counter()
import airflow_retrywindow
airflow_retrywindow.RetryWindowPolicy
print(sdk - began, time.perf_counter() - sdk)
"""


def import_costs(rounds: int) -> tuple[float, float]:
    """Median milliseconds a fresh interpreter spends importing the SDK a DAG file
    uses, and then the policy on top of it."""
    sdk, policy = [], []
    for _ in range(rounds):
        done = subprocess.run(
            [sys.executable, "-c", _IMPORTS], check=True, capture_output=True, text=True
        )
        first, second = (float(x) * 1000 for x in done.stdout.split())
        sdk.append(first)
        policy.append(second)
    return statistics.median(sdk), statistics.median(policy)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000, help="evaluations to time")
    parser.add_argument("--starts", type=int, default=15, help="interpreter starts per import")
    args = parser.parse_args()

    logging.disable(logging.INFO)  # the evidence log line is not what is measured
    per_evaluation = evaluation_us(args.rounds)
    sdk, policy = import_costs(args.starts)
    added = policy / sdk
    print("failure path")
    print(f"  RetryWindowPolicy.evaluate, fixture build included: {per_evaluation:.0f} us median")
    print("DAG parsing import cost")
    print(f"  import airflow.sdk (DAG, task)     {sdk:.0f} ms")
    print(f"  then RetryWindowPolicy             {policy:.1f} ms ({added:+.1%})")
    checks = [
        (per_evaluation < EVALUATION_TARGET_US,
         f"one evaluation takes {per_evaluation:.0f} us (target < {EVALUATION_TARGET_US:.0f} us)"),
        (added < IMPORT_TARGET,
         f"the policy adds {added:.1%} to import time (target < {IMPORT_TARGET:.0%})"),
    ]  # fmt: skip
    for passed, text in checks:
        print(f"{'PASS' if passed else 'FAIL'}  {text}")
    return 0 if all(passed for passed, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
