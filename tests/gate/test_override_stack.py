"""An approved override end to end: API server, scheduler, DAG processor, triggerer.

Two runs of ``rw_override`` (see ``override_dags/rw_override.py``) go side by
side: ``load`` fails with no retries left, someone clears the gate with its
downstream tasks, the gate refuses the repeat and ``approve_repeat`` asks
``ops_lead``. ``ops_lead`` answers through the REST API as a user would (``PATCH
.../hitlDetails``): Approve in one run, Reject in the other. Clearing ``load``
with its upstream gate then lets the approved repeat run with ``ops_lead`` in the
record, and keeps the rejected one skipped. Clearing once more reuses nothing:
one approval lets one repeat through.
"""

from __future__ import annotations

import json
import secrets
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pendulum
import pytest

from devstack.stack import ADMIN, AirflowStack, sqlite_stack

pytestmark = [pytest.mark.airflow, pytest.mark.slow(minutes=1.2)]
DAGS = Path(__file__).with_name("override_dags")
DAG_ID = "rw_override"
APPROVER = "ops_lead"
REASON = "vendor re-sent the full feed (ticket OPS-4411); a repeat is safe"
PASSWORD = secrets.token_urlsafe(12)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowStack]:
    home = tmp_path_factory.mktemp("override-stack")
    passwords = home / "override-passwords.json"
    passwords.write_text(json.dumps({ADMIN[0]: ADMIN[1], APPROVER: PASSWORD}))
    people = {
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN[0]}:admin,{APPROVER}:user",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
    }
    services = ["api-server", "scheduler", "dag-processor", "triggerer"]
    with sqlite_stack(home, services, [DAG_ID], dags_folder=DAGS, extra_env=people) as running:
        yield running


def _call(stack: AirflowStack, user: str, method: str, path: str, body: Any) -> Any:
    """One REST API call as ``user``: a token for them, then the request."""
    password = PASSWORD if user == APPROVER else ADMIN[1]

    def send(verb: str, where: str, payload: Any, token: str | None = None) -> Any:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = json.dumps(payload).encode()
        request = urllib.request.Request(stack.url + where, data, headers, method=verb)
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read() or b"null")

    token = send("POST", "/auth/token", {"username": user, "password": password})
    return send(method, path, body, token=token["access_token"])


def _answer(stack: AirflowStack, run_id: str, option: str, user: str = APPROVER) -> Any:
    path = f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/approve_repeat/-1/hitlDetails"
    body = {"chosen_options": [option], "params_input": {"reason": REASON}}
    return _call(stack, user, "PATCH", path, body)


def _clear(stack: AirflowStack, run_id: str, task_id: str, *, upstream: bool) -> None:
    """Clear as a person does in the UI: the gate with its downstream, or work with its upstream."""
    stack.api(
        "POST",
        f"/api/v2/dags/{DAG_ID}/clearTaskInstances",
        {"dry_run": False, "dag_run_id": run_id, "task_ids": [task_id],
         "include_upstream": upstream, "include_downstream": not upstream,
         "only_failed": False, "reset_dag_runs": True},
    )  # fmt: skip


def _record(stack: AirflowStack, run_id: str) -> dict[str, Any]:
    rows = stack.rows(
        "select value from xcom where dag_id=:d and run_id=:r and task_id='gate' "
        "and key='return_value'",
        d=DAG_ID,
        r=run_id,
    )
    assert rows, "the gate pushed no decision record"
    value = rows[0][0]
    decoded = json.loads(value) if isinstance(value, (str, bytes)) else value
    return json.loads(decoded) if isinstance(decoded, str) else decoded  # type: ignore[no-any-return]


def _wait(stack: AirflowStack, what: str, ready: Any, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"waiting for {what} failed\n{stack.log_tails()}")
        time.sleep(1)


def _ended(stack: AirflowStack, run_ids: list[str], cleared: int) -> None:
    def done() -> bool:
        rows = stack.rows(
            "select count(*) from dag_run where dag_id=:d and clear_number>=:c "
            "and state in ('success', 'failed') and run_id in ('" + "','".join(run_ids) + "')",
            d=DAG_ID,
            c=cleared,
        )
        return bool(rows[0][0] == len(run_ids))

    _wait(stack, f"{run_ids} to end after clear {cleared}", done)


def _settled(stack: AirflowStack, run_id: str, task_id: str) -> bool:
    """Whether the scheduler has taken in the end of the process that paused ``task_id``.

    A person answers an approval after that, never within the second it takes.
    Airflow 3.3.2 marks the approval task failed when the answer moves it on
    before the scheduler has taken in that event ("finished with state success,
    but the task instance's state attribute is queued").
    """
    event = (
        "Received executor event with state success for task instance "
        f"TaskInstanceKey(dag_id='{DAG_ID}', task_id='{task_id}', run_id='{run_id}'"
    )
    return event in (stack.logs / "scheduler.log").read_text(errors="replace")


def _state(stack: AirflowStack, run_id: str, task_id: str) -> tuple[str | None, int]:
    return stack.task_states(DAG_ID, run_id)[task_id]


def test_an_approval_through_the_hitl_api_lets_one_repeat_run_and_a_rejection_does_not(
    stack: AirflowStack,
) -> None:
    today = pendulum.now("UTC").start_of("day")
    approved = stack.trigger(DAG_ID, conf={}, logical_date=today.to_date_string())
    rejected = stack.trigger(DAG_ID, conf={}, logical_date=today.subtract(days=1).to_date_string())
    both = [approved, rejected]
    _ended(stack, both, cleared=0)
    for run_id in both:
        # a normal run asks nobody: the gate skipped the approval
        assert _state(stack, run_id, "load") == ("failed", 1)
        assert _state(stack, run_id, "approve_repeat")[0] == "skipped"
        first = _record(stack, run_id)
        assert first["override"]["applied"] is False
        assert first["skipped"] == ["approve_repeat"]

    # the repeat: the gate refuses, and leaves the approval to ask ops_lead
    for run_id in both:
        _clear(stack, run_id, "gate", upstream=False)
    for run_id in both:
        _wait(
            stack,
            f"approve_repeat of {run_id} to ask",
            lambda run_id=run_id: _state(stack, run_id, "approve_repeat")[0] == "awaiting_input",
        )
        _wait(
            stack,
            f"the scheduler to take in approve_repeat of {run_id} pausing",
            lambda run_id=run_id: _settled(stack, run_id, "approve_repeat"),
        )
        assert _state(stack, run_id, "load") == ("skipped", 1)
        refused = _record(stack, run_id)
        assert refused["decisions"][0]["decision"] == "attempts-exhausted"
        assert refused["skipped"] == ["load"]
        assert refused["override"]["applied"] is False
        assert "approve_repeat has not asked in this run yet" in refused["override"]["note"]

    # only the assigned person may answer
    with pytest.raises(urllib.error.HTTPError) as refused_admin:
        _answer(stack, approved, "Approve", user=ADMIN[0])
    assert refused_admin.value.code == 403
    answer = _answer(stack, approved, "Approve")
    assert answer["responded_by"]["name"] == APPROVER
    _answer(stack, rejected, "Reject")
    _ended(stack, both, cleared=1)
    assert _state(stack, approved, "approve_repeat")[0] == "success"
    assert _state(stack, rejected, "approve_repeat")[0] == "success"  # Reject is an answer too

    # the operator clears the work with its upstream gate: the gate reads the answers
    for run_id in both:
        _clear(stack, run_id, "load", upstream=True)
    _ended(stack, both, cleared=2)

    assert _state(stack, approved, "load") == ("success", 2)
    assert _state(stack, approved, "approve_repeat")[0] == "success"  # left as it ended
    record = _record(stack, approved)
    row = record["decisions"][0]
    assert row["decision"] == "attempts-exhausted"  # the model's decision, unchanged
    override = record["override"]
    assert override["applied"] is True
    assert override["approvedBy"] == {"id": APPROVER, "name": APPROVER}
    assert override["reason"] == REASON
    assert override["targets"] == ["load"]
    assert override["overridden"] == [{"task": "load", "decision": "attempts-exhausted"}]
    approved_at = pendulum.parse(override["approvedAt"])
    assert approved_at == pendulum.parse(answer["responded_at"]).replace(microsecond=0)
    assert record["guard"][0]["action"] == "run"
    assert record["guard"][0]["override"] == f"refused by the model, overridden by {APPROVER}"
    assert record["guard"][0]["overridden"][0].startswith("attempts-exhausted")
    assert record["skipped"] == []
    status = record["statusUpdate"]
    assert f"May run: load (refused by the model, overridden by {APPROVER})." in status
    assert REASON in status
    assert "eligible" not in status.lower()

    assert _state(stack, rejected, "load") == ("skipped", 1)
    kept = _record(stack, rejected)
    assert kept["override"]["applied"] is False
    assert kept["override"]["note"].startswith(f"{APPROVER} rejected at ")
    assert kept["override"]["answer"]["chosen"] == ["Reject"]
    assert kept["skipped"] == ["load"]
    assert "No override through approve_repeat: ops_lead rejected at" in kept["statusUpdate"]

    # another clear of the approved run: the approval was used by the gate's last decision
    _clear(stack, approved, "load", upstream=True)
    _ended(stack, [approved], cleared=3)
    assert _state(stack, approved, "load") == ("skipped", 2)
    again = _record(stack, approved)
    assert again["decisions"][0]["decision"] == "validate-output"
    assert again["override"]["applied"] is False
    assert "before this gate's previous decision" in again["override"]["note"]
