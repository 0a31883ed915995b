"""The offline retry decision model: pure standard library, no Airflow.

:func:`evaluate` takes the decoded JSON fixture and returns the JSON result; it
is what the command line runs. The typed values (:class:`Fixture`,
:class:`Policy`, :class:`Observation`, :class:`Verdict`, ...) and :func:`decide`
give the same answers and load on first use, so that importing this package
stays as cheap as starting a bare script.
"""

from __future__ import annotations

from importlib import import_module

from airflow_retrywindow.exceptions import InvalidFixture
from airflow_retrywindow.model.decisions import Decision
from airflow_retrywindow.model.evaluate import evaluate
from airflow_retrywindow.model.states import TaskState

# typing itself is not imported at run time: it costs more than an evaluation
TYPE_CHECKING = False
if TYPE_CHECKING:
    from airflow_retrywindow.model.fixture import Fixture
    from airflow_retrywindow.model.observation import Observation
    from airflow_retrywindow.model.policy import Policy, backoff
    from airflow_retrywindow.model.verdict import TaskDecision, Verdict, decide

# typed names -> the module defining them; dataclasses cost more to import than
# the whole evaluation, so these wait until someone asks for them
_TYPED = {
    "Fixture": "airflow_retrywindow.model.fixture",
    "Observation": "airflow_retrywindow.model.observation",
    "Policy": "airflow_retrywindow.model.policy",
    "backoff": "airflow_retrywindow.model.policy",
    "TaskDecision": "airflow_retrywindow.model.verdict",
    "Verdict": "airflow_retrywindow.model.verdict",
    "decide": "airflow_retrywindow.model.verdict",
}

__all__ = [
    "Decision",
    "Fixture",
    "InvalidFixture",
    "Observation",
    "Policy",
    "TaskDecision",
    "TaskState",
    "Verdict",
    "backoff",
    "decide",
    "evaluate",
]


def __getattr__(name: str) -> object:
    module = _TYPED.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return list(__all__)
