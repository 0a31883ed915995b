"""The window among Airflow's other retry policies: found in a chain, refused where bypassed.

A ``RetryWindowPolicy`` inside a ``ChainRetryPolicy`` (common.compat's backport on
Airflow 3.3, the SDK's from 3.4), a list (3.4) or a chain within a chain is gated
exactly as a bare one: the retry-start check is installed, ``check_dag`` checks its
settings, and its decisions say where in the chain it sits. An order that lets a
retry bypass it, a policy never asked, or a window held out of sight is refused when
the DAG is parsed. These run the real policies, the real backport and the real
cluster policy in-process, the DAG files of ``chain_dags/refused/`` through Airflow's
own DAG parsing; the same on a real scheduler is in ``test_chain_on_scheduler.py``.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import subprocess
import sys
from datetime import timedelta
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
from airflow.exceptions import AirflowClusterPolicyViolation
from airflow.sdk import ExceptionRetryPolicy, RetryAction, RetryPolicy, RetryRule
from airflow.sdk.exceptions import AirflowFailException

from airflow_retrywindow import RetryWindowPolicy, check_dag
from airflow_retrywindow.policies import cluster_policy
from airflow_retrywindow.policies.cluster_policy import task_policy
from airflow_retrywindow.policies.retry_start import RetryStartCheck, installed_on
from airflow_retrywindow.records.composition import SEARCH_DEPTH, placement_of, window_of
from airflow_retrywindow.records.evidence import EVIDENCE_KEY, UNKNOWN
from tests.policy.chains import chain_class
from tests.policy.hidden_windows import Asking, Delegating, Settings, closing_over
from tests.policy.resumable_jobs import Store, context, policy
from tests.policy.test_failure_paths import operator

ChainRetryPolicy = chain_class()

REFUSED = Path(__file__).with_name("chain_dags") / "refused"
POLICY_CHECKS = "AIRFLOW__RETRY_WINDOW__POLICY_CHECKS"
#: the way out every message of a window held out of sight gives
IN_THE_CHAIN = (
    "retry_policy=ChainRetryPolicy([ExceptionRetryPolicy(...FAIL rules...), "
    "RetryWindowPolicy(...)])"
)
#: each DAG file of chain_dags/refused/ whose window the provider cannot see -> what holds
#: it, and where it is; the last needs common.ai's ClassifierRetryPolicy
HIDDEN = {
    "rw_hidden_not_a_policy.py": ("retry_policy (Asking)", "retry_policy.window"),
    "rw_hidden_bound_method.py": ("retry_policy (Delegating)", "retry_policy.ask.__self__"),
    "rw_hidden_partial.py": ("retry_policy (Delegating)", "retry_policy.ask.args[0]"),
    "rw_hidden_closure.py": ("retry_policy (Delegating)", "retry_policy.ask.<closure window>"),
    "rw_hidden_plain_object.py": ("retry_policy (Configured)", "retry_policy.settings.window"),
    "rw_hidden_last_first.py": ("retry_policy (LastFirst)", "retry_policy.policies[0]"),
    "rw_hidden_deep.py": (
        "retry_policy (ClassifierRetryPolicy)",
        "retry_policy.fallback_policy.policies[1].policies[1]",
    ),
}
HAS_COMMON_AI = find_spec("airflow.providers.common.ai.policies.retry") is not None


def window(**overrides: Any) -> RetryWindowPolicy:
    return policy(**{"failed_statuses": (), **overrides})


def fail_on_permission() -> ExceptionRetryPolicy:
    return ExceptionRetryPolicy(
        rules=[RetryRule(exception=PermissionError, action=RetryAction.FAIL, reason="no grant")]
    )


def retry_on_connection() -> ExceptionRetryPolicy:
    return ExceptionRetryPolicy(rules=[RetryRule(exception=ConnectionError)])


class Holding(RetryPolicy):
    """A policy of one's own that keeps a window as its fallback, where no chain shows it."""

    def __init__(self, fallback: RetryPolicy) -> None:
        self.fallback = fallback

    def evaluate(self, exception: Any, try_number: int, max_tries: int, context: Any = None) -> Any:
        return self.fallback.evaluate(exception, try_number, max_tries, context)


# -- found wherever it sits ----------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "where"),
    [
        ("bare", "retry_policy"),
        ("chain", "retry_policy.policies[1]"),
        ("chain within a chain", "retry_policy.policies[1].policies[1]"),
    ],
)
def test_the_window_is_found_wherever_a_chain_puts_it(shape: str, where: str) -> None:
    gate = window()
    composed: Any = {
        "bare": gate,
        "chain": ChainRetryPolicy([fail_on_permission(), gate]),
        "chain within a chain": ChainRetryPolicy(
            [fail_on_permission(), ChainRetryPolicy([fail_on_permission(), gate])]
        ),
    }[shape]
    task = operator(composed)
    assert window_of(task) is gate
    found = placement_of(task)
    assert found is not None and found.where == where
    assert check_dag(task.dag) == []


def test_a_task_without_a_window_has_none() -> None:
    assert window_of(operator(ChainRetryPolicy([fail_on_permission()]))) is None
    assert window_of(operator(None)) is None


def test_the_retry_start_check_is_installed_on_a_chained_window() -> None:
    task = operator(ChainRetryPolicy([fail_on_permission(), window()]))
    task_policy(task)
    assert isinstance(task._pre_execute_hook, RetryStartCheck)


def test_a_killed_try_of_a_chained_window_is_decided_before_its_body() -> None:
    task = operator(ChainRetryPolicy([fail_on_permission(), window()]))
    task_policy(task)
    store = Store()
    with pytest.raises(AirflowFailException, match=r"^reconcile-remote: the outcome of attempt 1"):
        task._pre_execute_hook(context(task, try_number=2, store=store, max_tries=2))
    latest = store.values[EVIDENCE_KEY]["latest"]
    assert (latest["tryNumber"], latest["check"], latest["failure"]) == (2, "retry-start", UNKNOWN)


def test_check_dag_checks_a_chained_windows_settings() -> None:
    task = operator(ChainRetryPolicy([fail_on_permission(), window()]), retries=12)
    assert check_dag(task.dag) == [
        "rw_paths: task 'load': retries=12 means 13 runs; the gate supports up to "
        "9 retries (10 runs). Lower retries"
    ]


# -- what the chain decides, and what the evidence says of it ------------------------------


def test_a_rule_that_fails_first_ends_the_task_and_the_window_decides_the_rest() -> None:
    task = operator(ChainRetryPolicy([fail_on_permission(), window()]))
    chain, store = task.retry_policy, Store()
    denied = chain.evaluate(
        PermissionError("denied"), 1, 2, context(task, try_number=1, store=store, max_tries=2)
    )
    assert denied.action is RetryAction.FAIL
    assert denied.reason == "ExceptionRetryPolicy: no grant"
    assert EVIDENCE_KEY not in store.values  # the window was not asked

    decided = chain.evaluate(
        ConnectionError("reset"), 1, 2, context(task, try_number=1, store=store, max_tries=2)
    )
    assert decided.action is RetryAction.RETRY
    assert decided.retry_delay == timedelta(seconds=30)  # exactly the model's backoff
    assert decided.reason.startswith("RetryWindowPolicy: wait-backoff: ")
    latest = store.values[EVIDENCE_KEY]["latest"]
    assert latest["chain"] == {
        "where": "retry_policy.policies[1]",
        "decidedBy": "RetryWindowPolicy",
        "before": ["retry_policy.policies[0]: ExceptionRetryPolicy"],
        "after": [],
        "earlier": ["ExceptionRetryPolicy: no decision"],
    }
    assert "Decided by RetryWindowPolicy at retry_policy.policies[1], after " in latest["reason"]


def test_a_bare_window_keeps_no_chain_in_its_evidence() -> None:
    task, store = operator(window()), Store()
    task.retry_policy.evaluate(
        ConnectionError("reset"), 1, 2, context(task, try_number=1, store=store, max_tries=2)
    )
    assert "chain" not in store.values[EVIDENCE_KEY]["latest"]


# -- refused when the DAG is parsed ------------------------------------------------------


def test_a_rule_that_retries_before_the_window_is_refused_naming_it() -> None:
    task = operator(ChainRetryPolicy([retry_on_connection(), window()]))
    (problem,) = check_dag(task.dag)
    assert problem.startswith(
        "rw_paths: task 'load': retry_policy.policies[0] (ExceptionRetryPolicy) is asked before "
        "the RetryWindowPolicy at retry_policy.policies[1] and can answer RETRY (its rule for "
        "builtins.ConnectionError retries): that retry would run with no deadline check."
    )
    assert "RetryWindowPolicy(..., classify=ExceptionRetryPolicy(...))" in problem
    with pytest.raises(AirflowClusterPolicyViolation, match="can answer RETRY"):
        task_policy(task)


@pytest.mark.parametrize(
    ("before", "why"),
    [
        (ExceptionRetryPolicy(rules=[], default=RetryAction.RETRY), "default=RetryAction.RETRY"),
        (Holding(fail_on_permission()), "any answer of Holding may be RETRY"),
    ],
)
def test_any_policy_before_the_window_that_may_retry_is_refused(before: Any, why: str) -> None:
    (problem,) = check_dag(operator(ChainRetryPolicy([before, window()])).dag)
    assert why in problem and "classify=" in problem


def test_rules_that_only_fail_or_pass_on_may_come_first() -> None:
    only_fail = ExceptionRetryPolicy(
        rules=[
            RetryRule(exception=PermissionError, action=RetryAction.FAIL),
            RetryRule(exception=KeyError, action=RetryAction.DEFAULT),
        ],
        default=RetryAction.FAIL,
    )
    assert check_dag(operator(ChainRetryPolicy([only_fail, window()])).dag) == []


def test_a_policy_after_the_window_is_refused_unless_the_window_hands_failures_back() -> None:
    never_asked = operator(ChainRetryPolicy([window(), retry_on_connection()]))
    (problem,) = check_dag(never_asked.dag)
    assert "retry_policy.policies[1] (ExceptionRetryPolicy) is asked after the " in problem
    assert "it would never be asked" in problem
    handed_back = operator(ChainRetryPolicy([window(on_error="default"), retry_on_connection()]))
    assert check_dag(handed_back.dag) == []


def test_a_window_held_out_of_sight_is_refused_with_the_way_out() -> None:
    gate = window()
    task = operator(ChainRetryPolicy([fail_on_permission(), Holding(gate)]))
    assert placement_of(task) is None and window_of(task) is gate
    (problem,) = check_dag(task.dag)
    assert problem == (
        "rw_paths: task 'load': retry_policy.policies[1] (Holding) holds a RetryWindowPolicy at "
        "retry_policy.policies[1].fallback, where the provider cannot see it: only "
        "ChainRetryPolicy itself (and on Airflow 3.4 a task's list) is known to ask its "
        "policies in order, so nothing tells whether Holding asks the window at all, or answers "
        "RETRY before it, a retry with no deadline check. Put the window in "
        f"retry_policy itself or in a chain, after what can only FAIL: {IN_THE_CHAIN}, and let "
        "Holding classify for it: RetryWindowPolicy(..., classify=Holding(...))"
    )
    with pytest.raises(AirflowClusterPolicyViolation, match="where the provider cannot see it"):
        task_policy(task)


def test_two_windows_in_one_chain_are_refused() -> None:
    (problem,) = check_dag(operator(ChainRetryPolicy([window(), window()])).dag)
    assert "more than one RetryWindowPolicy" in problem


def test_a_window_that_classifies_with_a_window_is_refused() -> None:
    (problem,) = check_dag(operator(window(classify=window())).dag)
    assert "holds another RetryWindowPolicy at retry_policy.classify" in problem


# -- a window the provider cannot see, in a DAG file as Airflow parses it -----------------


def hidden_dag(name: str) -> Path:
    """The DAG file ``name`` of ``chain_dags/refused/``; the one of common.ai skips without it."""
    if name == "rw_hidden_deep.py" and not HAS_COMMON_AI:
        pytest.skip("ClassifierRetryPolicy needs the common-ai extra (Python 3.11+)")
    return REFUSED / name


def parsed(path: Path) -> Any:
    """``path`` parsed as the DAG processor parses it, every cluster policy applied."""
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(path))


@pytest.mark.parametrize("name", list(HIDDEN))
def test_a_window_the_provider_cannot_see_refuses_its_dag(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(POLICY_CHECKS, raising=False)  # enforce, the default
    bag = parsed(hidden_dag(name))
    holder, where = HIDDEN[name]
    (error,) = bag.import_errors.values()
    assert error.startswith(
        "AirflowClusterPolicyViolation: retry window gate: task 'load': "
        f"{holder} holds a RetryWindowPolicy at {where}, where the provider cannot see it"
    )
    assert IN_THE_CHAIN in error
    assert bag.dag_ids == []


@pytest.mark.parametrize("name", list(HIDDEN))
def test_in_warn_mode_a_window_the_provider_cannot_see_is_logged_and_still_checked(
    name: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(POLICY_CHECKS, "warn")
    with caplog.at_level(logging.WARNING, logger=cluster_policy.__name__):
        bag = parsed(hidden_dag(name))
    holder, where = HIDDEN[name]
    assert bag.import_errors == {}
    (dag,) = bag.dags.values()
    assert installed_on(dag.get_task("load"))
    assert "policy_checks = warn" in caplog.text
    assert f"{holder} holds a RetryWindowPolicy at {where}" in caplog.text


def test_a_chain_subclass_is_refused_naming_the_chain_to_write() -> None:
    (error,) = parsed(REFUSED / "rw_hidden_last_first.py").import_errors.values()
    assert "LastFirst is a subclass of ChainRetryPolicy, which may ask its policies in " in error
    assert "write ChainRetryPolicy([...]) itself" in error


def nested(gate: Any, depth: int) -> Any:
    """``gate`` held ``depth`` attributes below the task's ``retry_policy``."""
    held = gate
    for _ in range(depth):
        held = Asking(held)
    return held


@pytest.mark.parametrize("depth", [5, 12, SEARCH_DEPTH])
def test_a_window_at_any_depth_within_the_bound_is_found_and_refused(depth: int) -> None:
    gate = window()
    task = operator(nested(gate, depth))
    assert window_of(task) is gate
    (problem,) = check_dag(task.dag)
    assert f"holds a RetryWindowPolicy at retry_policy{'.window' * depth}, " in problem


def test_the_search_ends_at_its_one_bound_and_on_a_cycle() -> None:
    assert window_of(operator(nested(window(), SEARCH_DEPTH + 1))) is None
    looping = Asking(None)
    looping.window = [looping, Settings(looping)]
    assert window_of(operator(looping)) is None


def test_a_policy_of_ones_own_that_holds_no_window_is_not_the_providers() -> None:
    task = operator(Delegating(closing_over(fail_on_permission())))
    assert window_of(task) is None and check_dag(task.dag) == []
    task_policy(task)
    assert task._pre_execute_hook is None


#: another distribution that registers a cluster policy wrapping every task's retry policy
WRAPPING_DISTRIBUTION = {
    "wrap_retry_policies.py": '''"""Wraps each task's retry policy in one that logs first."""

from airflow.policies import hookimpl


class Audited:
    def __init__(self, inner):
        self.inner = inner

    def evaluate(self, **asked):
        print("asked", asked)
        return self.inner.evaluate(**asked)


@hookimpl
def task_policy(task):
    if task.retry_policy is not None:
        task.retry_policy = Audited(task.retry_policy)
''',
    "wrap_retry_policies-1.0.dist-info/METADATA": (
        "Metadata-Version: 2.1\nName: wrap-retry-policies\nVersion: 1.0\n"
    ),
    "wrap_retry_policies-1.0.dist-info/entry_points.txt": (
        "[airflow.policy]\nwrap = wrap_retry_policies\n"
    ),
    "rw_wrapped_later.py": '''"""An Airflow DAG whose window another distribution's policy wraps."""

from datetime import timedelta

import pendulum
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG

from airflow_retrywindow import Deadline, RetryWindowPolicy

window = RetryWindowPolicy(
    deadline=Deadline.after_data_interval_end(hours=6),
    duration=timedelta(minutes=5),
    validation=timedelta(0),
    safe_repeat=True,
)
with DAG("rw_wrapped_later", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    EmptyOperator(task_id="load", retries=2, retry_policy=window)
''',
}
PARSE_WITH_PLUGINS = """
import json, sys
from airflow import settings
from airflow.dag_processing.dagbag import DagBag
registered = [name for name, _ in settings.get_policy_plugin_manager().list_name_plugin()]
bag = DagBag(dag_folder=sys.argv[1])
found = {"registered": registered, "errors": list(bag.import_errors.values()),
         "dags": sorted(bag.dag_ids)}
print("PARSED", json.dumps(found))
"""


def test_a_policy_another_distribution_wraps_after_ours_is_still_checked(
    tmp_path: Path,
) -> None:
    for name, text in WRAPPING_DISTRIBUTION.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    # found first on the path, the other distribution's policy is registered first, and
    # pluggy calls the last registered first: ours, unless it asks to be called last
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", PARSE_WITH_PLUGINS, str(tmp_path / "rw_wrapped_later.py")],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("PARSED ")]
    found = json.loads(line.removeprefix("PARSED "))
    registered = found["registered"]
    assert registered.index("wrap") < registered.index("retry_window"), registered
    (error,) = found["errors"]
    assert "retry_policy (Audited) holds a RetryWindowPolicy at retry_policy.inner" in error
    assert found["dags"] == []


# -- Airflow 3.4's list, with the SDK's own ChainRetryPolicy -----------------------------


def test_a_list_is_refused_on_an_airflow_that_calls_it_itself() -> None:
    (problem,) = check_dag(operator([fail_on_permission(), window()]).dag)
    assert "retry_policy is a list, which Airflow 3.4 asks as a chain" in problem
    assert "from airflow.providers.common.compat.sdk import ChainRetryPolicy" in problem


@pytest.fixture
def sdk_with_chain(monkeypatch: pytest.MonkeyPatch) -> type:
    """Airflow 3.4's SDK: ``ChainRetryPolicy`` in its retry_policy module and ``airflow.sdk``.

    The backport keeps its source in step with the SDK's (common.compat's tests compare
    them), so the SDK's class is the backport's source, defined in the SDK's module.
    """
    import airflow.providers.common.compat._retry_policy as backport
    import airflow.sdk
    import airflow.sdk.definitions.retry_policy as sdk

    namespace = dict(vars(backport))
    namespace["__name__"] = sdk.__name__
    exec(compile(inspect.getsource(backport), sdk.__file__, "exec"), namespace)
    chain = namespace["ChainRetryPolicy"]
    assert chain is not backport.ChainRetryPolicy and chain.__module__ == sdk.__name__
    monkeypatch.setattr(sdk, "ChainRetryPolicy", chain, raising=False)
    monkeypatch.setattr(airflow.sdk, "ChainRetryPolicy", chain, raising=False)
    return chain


def test_the_sdks_chain_and_a_list_are_found_on_airflow_3_4(sdk_with_chain: type) -> None:
    gate = window()
    listed = operator([fail_on_permission(), sdk_with_chain([fail_on_permission(), gate])])
    found = placement_of(listed)
    assert found is not None and found.window is gate
    assert found.where == "retry_policy[1].policies[1]"
    assert check_dag(listed.dag) == []
    task_policy(listed)
    assert isinstance(listed._pre_execute_hook, RetryStartCheck)


def test_a_list_within_the_tasks_list_is_no_chain_on_airflow_3_4(sdk_with_chain: type) -> None:
    # Airflow asks only the task's own list as a chain, and a chain takes no list
    (problem,) = check_dag(operator([fail_on_permission(), [window()]]).dag)
    assert "retry_policy[1] (list) holds a RetryWindowPolicy at retry_policy[1][0], " in problem


def test_a_list_that_retries_first_is_refused_on_airflow_3_4(sdk_with_chain: type) -> None:
    (problem,) = check_dag(operator([retry_on_connection(), window()]).dag)
    assert problem.startswith("rw_paths: task 'load': retry_policy[0] (ExceptionRetryPolicy)")


# -- the gate, the sensor and the notifier read a chained window ----------------------------


def test_the_gate_takes_a_chained_windows_estimates_and_waits() -> None:
    from airflow_retrywindow.gate.estimates import resolve_estimates
    from airflow_retrywindow.gate.targets import settings_of
    from airflow_retrywindow.timing.work import Work

    gate = window(duration=timedelta(minutes=2), validation=timedelta(minutes=1), jitter=0.5)
    task = operator(ChainRetryPolicy([fail_on_permission(), gate]))
    found = resolve_estimates(task.dag, {"load": None}, None)
    assert found.works == {"load": Work(duration=120, validation=60, safe_repeat=True)}
    assert found.deadline is gate.deadline
    assert found.sources["load"]["deadline"] == "policy"
    # the policy's jitter widens the waits the gate decides on, as for a bare window
    assert settings_of(task).initial_delay == 45


def test_the_notifier_takes_a_chained_windows_deadline() -> None:
    from airflow_retrywindow.notifications.lookup import _deadline_and_work

    task = operator(ChainRetryPolicy([fail_on_permission(), window()]))
    deadline, work = _deadline_and_work(context(task, try_number=1, store=Store()), task)
    assert deadline is not None and work == 180
