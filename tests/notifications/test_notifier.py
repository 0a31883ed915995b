"""``RetryWindowNotifier`` in process: arguments, finding the decision, handing the message on.

The callback context is made by hand here (a task instance, its state store and
XComs held in memory); ``test_notifier_on_airflow.py`` runs it on a real Airflow.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pendulum
import pytest
from airflow.sdk.bases.notifier import BaseNotifier

from airflow_retrywindow import Deadline, RetryWindowNotifier, RetryWindowPolicy
from airflow_retrywindow.exceptions import InvalidNotifier
from airflow_retrywindow.notifications.message import Message
from airflow_retrywindow.records.evidence import EVIDENCE_KEY, appended
from tests.notifications.stored import TASK_ID, gate_record, overridden_record, policy_entry


@dataclass
class TaskInstance:
    """The parts of Airflow's runtime task instance a callback reads."""

    try_number: int = 1
    state: str = "failed"
    task_id: str = TASK_ID
    dag_id: str = "positions_delivery"
    map_index: int = -1
    xcoms: dict[str, Any] = field(default_factory=dict)

    def xcom_pull(self, *, task_ids: str, key: str, map_indexes: int) -> Any:
        assert (task_ids, map_indexes) == (self.task_id, self.map_index)
        return self.xcoms.get(key)


@dataclass
class StateStore:
    """A task state store in memory; ``broken`` makes reading it fail."""

    values: dict[str, Any] = field(default_factory=dict)
    broken: bool = False

    def get(self, key: str) -> Any:
        if self.broken:
            raise RuntimeError("state store unavailable")
        return self.values.get(key)


class Recorder(BaseNotifier):
    """A channel that puts what it was asked to send in ``outbox``."""

    template_fields = ("subject", "html_content", "text")

    def __init__(
        self, outbox: list[dict[str, Any]], subject: str | None = None, text: str = "default"
    ) -> None:
        super().__init__()
        self.outbox = outbox
        self.subject = subject
        self.html_content: str | None = None
        self.text = text

    def notify(self, context: Any) -> None:
        self.outbox.append(
            {"subject": self.subject, "html_content": self.html_content, "text": self.text}
        )


def _context(
    ti: TaskInstance, store: StateStore | None = None, *, task: Any = None, error: Any = None
) -> dict[str, Any]:
    run = SimpleNamespace(
        run_id="manual__2026-12-01",
        data_interval_start=pendulum.datetime(2026, 12, 1, tz="UTC"),
        data_interval_end=pendulum.datetime(2026, 12, 2, tz="UTC"),
    )
    return {
        "ti": ti,
        "task": task or SimpleNamespace(task_id=ti.task_id),
        "dag_run": run,
        "run_id": run.run_id,
        "task_state_store": store or StateStore(),
        "exception": error,
    }


def _stored(decision: str) -> StateStore:
    return StateStore({EVIDENCE_KEY: appended(None, policy_entry(decision))})


def _collect() -> tuple[list[Message], Any]:
    got: list[Message] = []

    def channel(message: Message, context: Any) -> None:
        got.append(message)

    return got, channel


# -- arguments ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"notifier": Recorder}, "got the class Recorder; call it, e.g. Recorder"),
        ({"notifier": "smtp"}, "notifier must be an Airflow notifier .* got 'smtp'"),
        ({"fill": {"body": "text"}}, "fill names 'body', which Recorder does not have"),
        ({"fill": {"text": "markdown"}}, r"fill\['text'\] must be one of subject, text, html"),
        ({"fill": ["text"]}, "fill must be a mapping"),
        ({"work_unit": 20261201}, "work_unit must be a mapping, a text or None, got 20261201"),
        ({"affected": ["funds"]}, r"affected must be a text or None, got \['funds'\]"),
    ],
)
def test_bad_arguments_name_the_argument_and_value(kwargs: dict[str, Any], message: str) -> None:
    arguments = {"notifier": Recorder([]), **kwargs}
    with pytest.raises(InvalidNotifier, match=message):
        RetryWindowNotifier(**arguments)


def test_fill_needs_a_notifier_not_a_callable() -> None:
    with pytest.raises(InvalidNotifier, match="fill applies to an Airflow notifier"):
        RetryWindowNotifier(lambda message, context: None, fill={"text": "text"})


# -- a plain callable ----------------------------------------------------------------


def test_a_callable_gets_the_message_with_templates_rendered() -> None:
    got, channel = _collect()
    notifier = RetryWindowNotifier(
        channel,
        work_unit={"business_date": "{{ dag_run.data_interval_start | ds }}"},
        affected="funds of {{ ti.dag_id }}",
    )
    notifier(_context(TaskInstance(), _stored("deadline-infeasible")))
    (message,) = got
    assert message.decision == "deadline-infeasible"
    assert "Unit of work: business_date=2026-12-01." in message.text
    assert "  Affected population: funds of positions_delivery" in message.text
    # rendered on a copy: the notifier keeps its templates for the next try
    assert notifier.work_unit == {"business_date": "{{ dag_run.data_interval_start | ds }}"}


def test_without_a_work_unit_the_data_interval_stands_in() -> None:
    got, channel = _collect()
    RetryWindowNotifier(channel)(_context(TaskInstance(), _stored("repair-cause")))
    assert (
        "Unit of work: data interval 2026-12-01 00:00:00Z to 2026-12-02 00:00:00Z." in got[0].text
    )


# -- finding the decision ------------------------------------------------------------


def test_an_unreadable_store_falls_back_to_the_tries_xcom() -> None:
    got, channel = _collect()
    ti = TaskInstance(xcoms={EVIDENCE_KEY: policy_entry("reconcile-remote")})
    RetryWindowNotifier(channel)(_context(ti, StateStore(broken=True)))
    assert got[0].decision == "reconcile-remote"


@pytest.mark.parametrize(
    ("state", "consequence"),
    [
        ("failed", "the task has failed and no further try is scheduled"),
        ("up_for_retry", "Airflow scheduled a retry on its own retry settings, unchecked"),
    ],
)
def test_no_stored_decision_sends_a_refusal(state: str, consequence: str) -> None:
    got, channel = _collect()
    error = ValueError("bad partition 20261201")
    RetryWindowNotifier(channel)(_context(TaskInstance(state=state), error=error))
    (message,) = got
    assert message.subject.startswith("[retry window] no-decision: ")
    assert "Why: no retry window decision is stored for try 1 (the task has no " in message.text
    assert f"What happens now: {consequence}" in message.text
    assert "Failure: ValueError: bad partition 20261201." in message.text


def test_a_retry_under_the_policy_without_a_decision_is_refused_by_the_start_check() -> None:
    got, channel = _collect()
    policy = RetryWindowPolicy(
        deadline=Deadline.at(pendulum.datetime(2026, 12, 2, tz="UTC")),
        duration=timedelta(minutes=25),
        validation=timedelta(minutes=5),
        safe_repeat=True,
    )
    task = SimpleNamespace(task_id=TASK_ID, retry_policy=policy)
    RetryWindowNotifier(channel)(_context(TaskInstance(state="up_for_retry"), task=task))
    (message,) = got
    assert "What happens now: Airflow scheduled a retry without a recorded decision; " in (
        message.text
    )
    assert "the provider's retry-start check refuses that try" in message.text


def test_a_decision_of_an_earlier_try_is_not_this_trys() -> None:
    got, channel = _collect()
    RetryWindowNotifier(channel)(_context(TaskInstance(try_number=2), _stored("wait-backoff")))
    assert got[0].decision == "no-decision"
    assert "the latest stored decision is for try 1, not for this try 2" in got[0].text


def test_unreadable_evidence_is_reported_not_raised() -> None:
    got, channel = _collect()
    entry = {**policy_entry("wait-backoff"), "fixture": {"asOf": "soon"}}
    RetryWindowNotifier(channel)(
        _context(TaskInstance(), StateStore({EVIDENCE_KEY: {"latest": entry}}))
    )
    assert got[0].decision == "no-decision"
    assert "a decision was stored but could not be read (InvalidFixture: " in got[0].text


def test_a_gate_is_read_from_its_decision_record() -> None:
    got, channel = _collect()
    record = gate_record(deadline_in=timedelta(minutes=4))
    ti = TaskInstance(task_id="retry_gate", state="success", xcoms={"return_value": record})
    gate = SimpleNamespace(task_id="retry_gate", gate_settings=lambda: None)
    RetryWindowNotifier(channel)(_context(ti, task=gate))
    (message,) = got
    assert message.decision == "deadline-infeasible"
    assert "held back by the gate: rerun_load" in message.text
    assert "Unit of work: business_date=2026-12-01." in message.text


def test_a_gates_approved_override_reaches_the_message() -> None:
    got, channel = _collect()
    ti = TaskInstance(
        task_id="retry_gate", state="success", xcoms={"return_value": overridden_record()}
    )
    gate = SimpleNamespace(task_id="retry_gate", gate_settings=lambda: None)
    RetryWindowNotifier(channel)(_context(ti, task=gate))
    (message,) = got
    assert "Approved override: refused by the model, overridden by ops_lead at " in message.text
    assert "  Reason: vendor re-sent the feed (OPS-4411)" in message.text


def test_a_gate_record_with_an_unreadable_override_is_no_decision() -> None:
    """An override is never told on a guess: the work is treated as refused."""
    got, channel = _collect()
    record = overridden_record()
    record["override"]["approvedBy"] = "ops_lead"
    ti = TaskInstance(task_id="retry_gate", state="success", xcoms={"return_value": record})
    gate = SimpleNamespace(task_id="retry_gate", gate_settings=lambda: None)
    RetryWindowNotifier(channel)(_context(ti, task=gate))
    assert got[0].decision == "no-decision"
    assert "could not be read (RecordError: override.approvedBy must be an object" in got[0].text


def test_a_failed_gate_without_a_record_says_its_work_does_not_run() -> None:
    got, channel = _collect()
    gate = SimpleNamespace(task_id="retry_gate", gate_settings=lambda: None)
    error = RuntimeError("GET http://api:8080/api/v2/... failed")
    RetryWindowNotifier(channel)(
        _context(TaskInstance(task_id="retry_gate"), task=gate, error=error)
    )
    assert "the gate did not decide, so the work it guards does not run" in got[0].text


# -- an Airflow notifier -------------------------------------------------------------


def _send(context: dict[str, Any], subject: str | None = None, **kwargs: Any) -> dict[str, Any]:
    """What ``RetryWindowNotifier`` over a :class:`Recorder` sent for ``context``."""
    outbox: list[dict[str, Any]] = []
    recorder = Recorder(outbox, subject=subject)
    RetryWindowNotifier(recorder, **kwargs)(context)
    # a copy was filled and rendered: the wrapped notifier is as it was given
    assert (recorder.subject, recorder.html_content, recorder.text) == (subject, None, "default")
    (sent,) = outbox
    return sent


def test_unset_subject_and_html_are_filled_with_the_message() -> None:
    sent = _send(_context(TaskInstance(), _stored("reconcile-remote")))
    assert sent["subject"].startswith("[retry window] reconcile-remote: ")
    assert sent["html_content"].startswith('<pre style="white-space: pre-wrap">Retry window: ')
    assert sent["text"] == "default"


def test_the_notifiers_own_templates_can_use_the_message() -> None:
    subject = "{{ retry_window.decision }} on {{ ti.task_id }}"
    sent = _send(_context(TaskInstance(), _stored("reconcile-remote")), subject=subject)
    assert sent["subject"] == f"reconcile-remote on {TASK_ID}"


def test_fill_sets_the_named_attributes() -> None:
    context = _context(TaskInstance(), _stored("repair-cause"))
    sent = _send(context, subject="kept", fill={"text": "text"})
    assert sent["subject"] == "kept"
    assert sent["text"].startswith("Retry window: repair-cause for task load_positions")


def test_failure_text_is_never_rendered_as_a_template() -> None:
    entry = policy_entry(
        "reconcile-remote", subject="ValueError: {{ 7 * 6 }} {{ conn.db.password }}"
    )
    store = StateStore({EVIDENCE_KEY: appended(None, entry)})
    sent = _send(_context(TaskInstance(), store))
    assert "{{ 7 * 6 }}" in sent["html_content"]
    assert "42" not in sent["html_content"]


def test_airflow_lists_the_notifier_of_the_provider() -> None:
    from airflow.providers_manager import ProvidersManager

    # Airflow imports each listed class and drops those that are not the provider's own
    listed = ProvidersManager().notification
    assert "airflow_retrywindow.notifications.notifier.RetryWindowNotifier" in listed
