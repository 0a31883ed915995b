"""The offline retry decision model: pure standard library, no Airflow.

:func:`decide` takes a :class:`Fixture` and returns a :class:`Verdict`;
:func:`evaluate` is the same on the decoded JSON (``decide(Fixture.from_dict(...))``
as JSON), and is what the command line runs. The typed values are small frozen
values without ``dataclasses`` (:mod:`~airflow_retrywindow.model.value`), so
importing this package stays as cheap as starting a bare script.
"""

from __future__ import annotations

from airflow_retrywindow.exceptions import InvalidFixture
from airflow_retrywindow.model.decisions import Decision
from airflow_retrywindow.model.evaluate import evaluate
from airflow_retrywindow.model.fixture import Fixture
from airflow_retrywindow.model.observation import Observation
from airflow_retrywindow.model.policy import Policy, backoff
from airflow_retrywindow.model.states import TaskState
from airflow_retrywindow.model.verdict import TaskDecision, Verdict, decide

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
