"""The window among Airflow's other retry policies, on a real scheduler with the LocalExecutor.

``ChainRetryPolicy([ExceptionRetryPolicy(FAIL on PermissionError), RetryWindowPolicy(...)])``
from common.compat: a killed try's retry is decided at its start, a ``PermissionError``
fails at once, a retryable failure waits exactly the model's backoff. A window fed by
``ClassifierRetryPolicy`` on pydantic-ai's test model (no network, no key): a category
that fails ends the task ``repair-cause``, one retried after 60 s against a deadline
45 s after the run was asked for is ``deadline-infeasible``, a ``TimeoutError``
declared unknown is ``reconcile-remote``; all on Airflow's heartbeat settings and the
window's default wait (4 s), while the test keeps every core busy twice over, the
model made ready before each task's code ran. A classifier that never answers is not
waited for past its bound. A chain with a RETRY rule before the window is an import error.

On the stack it shares with the modules configured alike (:mod:`tests.shared_stack`),
whose services carry the test model's connection; its DAG folder there holds a DAG the
DAG processor refuses.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

from devstack.stack import AirflowStack
from tests.policy.chains import chain_class
from tests.policy.test_api_outage_on_scheduler import evidence
from tests.shared_stack import SharedStacks, for_module, module_folder

pytestmark = [pytest.mark.airflow, pytest.mark.slow(minutes=3)]
chain_class()  # its DAGs chain with common.compat's ChainRetryPolicy: skipped without it

EVIDENCE_KEY = "retry_window.evidence"
#: the DAG file the DAG processor refuses, added to the module's folder once its DAGs run
REFUSED = Path(__file__).with_name("chain_dags") / "refused" / "rw_chain_refused.py"
#: looked up, not imported: pydantic-ai's import is a second of every collecting worker
HAS_COMMON_AI = find_spec("airflow.providers.common.ai.policies.retry") is not None
#: dag id -> its task ids
DAG_TASKS = {
    "rw_chain_killed": ["killed"],
    "rw_chain_denied": ["denied"],
    "rw_chain_flaky": ["flaky"],
    "rw_chain_slow_classifier": ["unhurried"],
}
#: the DAG of common.ai's classifier, run on its own while the machine is loaded
CLASSIFIER_DAG = "rw_chain_classifier"
RUN_TIMEOUT = 240
#: the modules a classifier's first answer would import, loaded before a task's code runs
MODEL_MODULES = ("airflow.providers.common.ai.hooks.pydantic_ai", "pydantic_ai.models.test")
#: busy processes per core while the classifier's DAG runs: each core twice over
BUSY_PER_CORE = 2


@pytest.fixture(scope="module")
def stack(shared_stacks: SharedStacks) -> AirflowStack:
    stack = for_module(
        shared_stacks, __file__, [*DAG_TASKS, *([CLASSIFIER_DAG] if HAS_COMMON_AI else [])]
    )
    shutil.copy(REFUSED, module_folder(stack, __file__) / REFUSED.name)

    stack.wait_for(
        lambda: bool(_refusal(stack)),
        f"the DAG processor to refuse {REFUSED.name}",
        timeout=300,
    )
    return stack


def _refusal(stack: AirflowStack) -> list[Any]:
    """The refused DAG file's import error: (its stack trace,), once reported."""
    return stack.rows(
        "select stacktrace from import_error where filename like :f", f=f"%/{REFUSED.name}"
    )


@pytest.fixture(scope="module")
def runs(stack: AirflowStack) -> dict[str, tuple[str, Path]]:
    """One run of every DAG, all triggered before any test waits for one: (run id, counter)."""
    files = stack.home / "chain-task-files"
    files.mkdir()
    return {dag_id: _trigger(stack, files, dag_id) for dag_id in DAG_TASKS}


@pytest.fixture(scope="module")
def classifier_run(stack: AirflowStack) -> dict[str, tuple[str, Path]]:
    """The classifier's DAG, triggered and finished while every core is busy twice over."""
    files = stack.home / "classifier-task-files"
    files.mkdir()
    with busy_cores(BUSY_PER_CORE):
        started = {CLASSIFIER_DAG: _trigger(stack, files, CLASSIFIER_DAG)}
        finished(stack, started, CLASSIFIER_DAG)
    return started


def _trigger(stack: AirflowStack, files: Path, dag_id: str) -> tuple[str, Path]:
    """One run of ``dag_id``, an hour before its deadline: (run id, its counter file)."""
    counter = files / f"{dag_id}.runs"
    conf = {"deadline_in": 3600, "counter": str(counter)}
    return stack.trigger(dag_id, conf=conf, logical_date="2026-11-01"), counter


@contextmanager
def busy_cores(per_core: int) -> Iterator[None]:
    """Keep every core this process may use busy ``per_core`` times over while the block runs.

    The load comes from the test, so a bound that holds only on an idle machine fails
    here whatever else runs beside it.
    """
    cores = len(os.sched_getaffinity(0))
    spin = [sys.executable, "-c", "while True: pass"]
    burners = [subprocess.Popen(spin) for _ in range(per_core * cores)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def finished(stack: AirflowStack, runs: dict[str, tuple[str, Path]], dag_id: str) -> str:
    return stack.wait_for_run(dag_id, runs[dag_id][0], timeout=RUN_TIMEOUT)


def body_runs(runs: dict[str, tuple[str, Path]], dag_id: str, task_id: str) -> list[str]:
    counter = runs[dag_id][1]
    lines = counter.read_text().splitlines() if counter.exists() else []
    return [line for line in lines if line.startswith(f"{task_id} ")]


def test_a_chain_with_a_retry_rule_before_the_window_is_refused_at_parse(
    stack: AirflowStack,
) -> None:
    ((text,),) = _refusal(stack)
    assert "AirflowClusterPolicyViolation" in text
    assert (
        "retry window gate: task 'load': retry_policy.policies[0] (ExceptionRetryPolicy) is "
        "asked before the RetryWindowPolicy at retry_policy.policies[1] and can answer RETRY "
        "(its rule for builtins.ConnectionError retries)"
    ) in text
    assert "classify=ExceptionRetryPolicy(...)" in text
    parsed = {row[0] for row in stack.rows("select dag_id from serialized_dag")}
    assert "rw_chain_refused" not in parsed


def test_a_killed_try_of_a_chained_window_is_decided_at_its_start(
    stack: AirflowStack, runs: dict[str, tuple[str, Path]]
) -> None:
    assert finished(stack, runs, "rw_chain_killed") == "failed"
    run_id = runs["rw_chain_killed"][0]
    assert len(body_runs(runs, "rw_chain_killed", "killed")) == 1  # never ran undecided
    assert stack.task_states("rw_chain_killed", run_id)["killed"] == ("failed", 2)
    latest = evidence(stack, "rw_chain_killed", run_id, "killed")["latest"]
    assert (latest["tryNumber"], latest["check"], latest["failure"]) == (
        2,
        "retry-start",
        "unknown",
    )
    assert latest["reason"].startswith("reconcile-remote: ")


def test_a_permission_error_fails_at_once_by_the_rule_before_the_window(
    stack: AirflowStack, runs: dict[str, tuple[str, Path]]
) -> None:
    assert finished(stack, runs, "rw_chain_denied") == "failed"
    run_id = runs["rw_chain_denied"][0]
    assert len(body_runs(runs, "rw_chain_denied", "denied")) == 1
    assert stack.task_states("rw_chain_denied", run_id)["denied"] == ("failed", 1)
    stored = stack.rows(
        "select 1 from task_state_store where dag_id='rw_chain_denied' and key=:k", k=EVIDENCE_KEY
    )
    assert stored == []  # the rule decided; the window was not asked


def test_a_retryable_failure_waits_exactly_the_models_backoff(
    stack: AirflowStack, runs: dict[str, tuple[str, Path]]
) -> None:
    assert finished(stack, runs, "rw_chain_flaky") == "success"
    run_id = runs["rw_chain_flaky"][0]
    assert len(body_runs(runs, "rw_chain_flaky", "flaky")) == 3
    decisions = evidence(stack, "rw_chain_flaky", run_id, "flaky")["decisions"]
    assert [d["result"]["tasks"][0]["decision"] for d in decisions] == ["wait-backoff"] * 2
    backoffs = [float(d["result"]["tasks"][0]["backoff"]) for d in decisions]
    assert backoffs == [1.0, 2.0]
    assert [d["chain"]["earlier"] for d in decisions] == [["ExceptionRetryPolicy: no decision"]] * 2
    earlier = stack.rows(
        "select try_number, retry_delay_override, retry_reason from task_instance_history"
        " where dag_id='rw_chain_flaky' and run_id=:r order by try_number",
        r=run_id,
    )
    assert [row[1] for row in earlier] == backoffs  # Airflow waited the model's delay
    # the chain's reason, as Airflow keeps it: the window decided, after the rule said nothing
    assert all(row[2].startswith("RetryWindowPolicy: wait-backoff: ") for row in earlier)
    assert all(row[2].endswith("(after ExceptionRetryPolicy: no decision)") for row in earlier)


def test_a_slow_classifier_is_not_waited_for_past_its_bound(
    stack: AirflowStack, runs: dict[str, tuple[str, Path]]
) -> None:
    # its classifier never answers: the retry ran, so the decision did not wait for it
    assert finished(stack, runs, "rw_chain_slow_classifier") == "success"
    run_id = runs["rw_chain_slow_classifier"][0]
    assert len(body_runs(runs, "rw_chain_slow_classifier", "unhurried")) == 2
    (decision,) = evidence(stack, "rw_chain_slow_classifier", run_id, "unhurried")["decisions"]
    assert decision["classified"]["answer"] == "timeout"
    assert decision["classified"]["reason"] == "no answer within 2 s"
    assert decision["classified"]["seconds"] >= 2  # the classifier was given its bound
    assert decision["action"] == "retry"  # the window's own classes: retryable
    # the delay the window handed Airflow: its own backoff, the task's retry_delay
    (task,) = decision["result"]["tasks"]
    assert (task["decision"], float(task["backoff"])) == ("wait-backoff", 1.0)
    handed = stack.rows(
        "select retry_delay_override from task_instance_history"
        " where dag_id='rw_chain_slow_classifier' and run_id=:r",
        r=run_id,
    )
    assert handed == [(1.0,)]


@pytest.mark.skipif(not HAS_COMMON_AI, reason="the common-ai extra (Python 3.11+)")
def test_a_classifier_on_a_test_model_decides_on_the_defaults_on_a_busy_machine(
    stack: AirflowStack, classifier_run: dict[str, tuple[str, Path]]
) -> None:
    # Airflow's heartbeat settings: the supervisor tolerates 10 s, the decision's bound is 9
    workers = [name for name in stack.env if name.startswith("AIRFLOW__WORKERS__")]
    assert [name for name in workers if "HEARTBEAT" in name] == []
    runs = classifier_run
    assert finished(stack, runs, CLASSIFIER_DAG) == "failed"
    run_id = runs[CLASSIFIER_DAG][0]
    states = stack.task_states(CLASSIFIER_DAG, run_id)
    decided = {}
    for task_id in ("revoked", "throttled", "unanswered"):
        assert states[task_id] == ("failed", 1), task_id
        assert len(body_runs(runs, CLASSIFIER_DAG, task_id)) == 1
        decided[task_id] = evidence(stack, CLASSIFIER_DAG, run_id, task_id)["latest"]
    revoked, throttled, unanswered = (decided[t] for t in ("revoked", "throttled", "unanswered"))
    # the model was made ready before each task's code ran: the failure waited for its answer
    ready = [line.split() for line in runs[CLASSIFIER_DAG][1].read_text().splitlines()]
    assert sorted(fields[1:] for fields in ready if fields[0] == "ready") == [
        [task_id, ",".join(MODEL_MODULES)] for task_id in ("revoked", "throttled", "unanswered")
    ]
    # and it answered within the default 4 s: its FAIL and its RETRY were used
    assert [(d["classified"]["by"], d["classified"]["answer"]) for d in (revoked, throttled)] == [
        ("classifier", "fail"),
        ("classifier", "retry"),
    ]
    assert revoked["reason"].startswith("repair-cause: ")
    assert "classified terminal by ClassifierRetryPolicy: category=auth" in revoked["reason"]
    assert throttled["result"]["tasks"][0]["decision"] == "deadline-infeasible"
    assert throttled["classified"]["floorSeconds"] == 60
    assert unanswered["result"]["tasks"][0]["decision"] == "reconcile-remote"
    assert "classified" not in unanswered  # declared unknown: the model is not asked
