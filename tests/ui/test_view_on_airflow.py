"""The Retry window view on a real Airflow: plugin discovery, auth, fixtures, links, a browser.

One stack (API server, scheduler, DAG processor, triggerer on SQLite) parses ``dags/``
and runs the gate example once (``retry_window_gate_example``: a gate and a sensor,
their decisions in XCom, a notifier), on every Airflow the package supports. On
Airflow 3.3 it also runs, at the same time, the example DAG once on a late day, where the
policy, the gate and the sensor refuse; before 3.3 the DAG files with a
``RetryWindowPolicy`` are import errors that say why, and the gate example runs beside
them. The API server uses a real auth manager that denies one user both examples
(``tests/ui/auth_manager.py``).

Every process of the stack, services and tasks, runs on one clock the test controls
(``tests/gate/run_clock.py``): it stops the clock before it triggers the gate example, so
its sensor finds load's backoff whole however late a busy machine starts it, and sets it
running from the end of the sensor's wait once the sensor deferred and the worker that
deferred it ended.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from email.message import Message
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pendulum
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as until
from selenium.webdriver.support.ui import WebDriverWait

from devstack.example import DAG_ID, LATE, decoded, evidence
from devstack.stack import ADMIN, PARSE_LIMIT, ROOT, AirflowStack, sqlite_stack
from tests.gate.run_clock import RunClock
from tests.ui import browser
from tests.ui.people import OUTSIDER

pytestmark = [pytest.mark.airflow, pytest.mark.slow(minutes=6)]

SCREENSHOT = ROOT / "docs" / "images" / "retry-window-view.png"
REFUSED = "report"  # on a late day its policy refuses: deadline-infeasible
GATE_DAG_ID = "retry_window_gate_example"
SENSOR = "load_retry_window"  # the gate example's sensor, holding load's retry
#: the files of dags/ that build a RetryWindowPolicy: import errors before Airflow 3.3
POLICY_FILES = {"retry_window_example.py", "retry_window_outage.py"}


@dataclass(frozen=True)
class FinishedRun:
    """A finished run on a running stack: the example DAG's late day, or the gate example's."""

    stack: AirflowStack
    run_id: str
    dag_id: str = DAG_ID

    def view(self, task_id: str | None = None, suffix: str = "") -> str:
        run = f"{self.stack.url}/retry-window/dags/{self.dag_id}/runs/"
        run += quote(self.run_id, safe="")
        return run if task_id is None else f"{run}/tasks/{task_id}{suffix}"

    def record(self, task_id: str) -> dict[str, Any]:
        """The decision record a gate or a sensor of the run pushed to XCom."""
        rows = self.stack.rows(
            "select value from xcom where dag_id=:d and run_id=:r and task_id=:t "
            "and key='return_value'",
            d=self.dag_id, r=self.run_id, t=task_id,
        )  # fmt: skip
        assert rows, f"{task_id} pushed no decision record\n{self.stack.log_tails()}"
        found = decoded(rows[0][0])
        assert isinstance(found, dict)
        return found


@dataclass(frozen=True)
class Answer:
    status: int
    body: str
    headers: dict[str, str]  # names in lower case


@pytest.fixture(scope="module")
def clock(tmp_path_factory: pytest.TempPathFactory) -> RunClock:
    """The clock of every process of the stack: real time until the runs are triggered."""
    return RunClock.started(tmp_path_factory.mktemp("ui-clock") / "run-clock")


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, retry_policies: bool, clock: RunClock
) -> Iterator[AirflowStack]:
    """The stack, once its DAG processor parsed every file of dags/."""
    home = tmp_path_factory.mktemp("ui-stack")
    passwords = home / "ui-passwords.json"
    passwords.write_text(json.dumps({ADMIN[0]: ADMIN[1], OUTSIDER[0]: OUTSIDER[1]}))
    extra_env = {
        "AIRFLOW__CORE__AUTH_MANAGER": "tests.ui.auth_manager.OneDagHiddenAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN[0]}:admin,{OUTSIDER[0]}:viewer",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        # the services import the test auth manager and the clock from the repository
        **clock.services_env(
            os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        ),
    }
    services = ["api-server", "scheduler", "dag-processor", "triggerer"]
    with sqlite_stack(home, services, [], extra_env=extra_env) as running:
        expected = {GATE_DAG_ID, DAG_ID} if retry_policies else {GATE_DAG_ID}
        refused = set() if retry_policies else POLICY_FILES

        def parsed() -> bool:
            errors = import_errors(running)
            unexpected = set(errors) - refused
            assert not unexpected, {name: errors[name] for name in unexpected}
            stored = {dag_id for (dag_id,) in running.rows("select dag_id from serialized_dag")}
            return expected <= stored and refused <= set(errors)

        running.wait_for(parsed, "the DAG processor to parse dags/", timeout=PARSE_LIMIT + 60)
        yield running


def import_errors(stack: AirflowStack) -> dict[str, str]:
    """File name -> the import error the DAG processor recorded for it."""
    rows = stack.rows("select filename, stacktrace from import_error")
    return {Path(filename).name: str(trace) for filename, trace in rows}


@pytest.fixture(scope="module")
def runs(stack: AirflowStack, retry_policies: bool, clock: RunClock) -> dict[str, FinishedRun]:
    """DAG id -> its finished run: the gate example's, triggered on the stopped clock, and on
    Airflow 3.3 the example DAG's late day, triggered once the gate example's sensor deferred
    its wait for load's backoff and the clock runs from the wait's end. (The late day is
    late by the time that passes on a running clock: its deadline is seconds away.)"""
    clock.stop_at(clock.now())
    started = {GATE_DAG_ID: stack.trigger(GATE_DAG_ID, conf={}, logical_date="2026-12-03")}
    gate_run = FinishedRun(stack, started[GATE_DAG_ID], GATE_DAG_ID)
    stack.wait_for(
        lambda: (
            stack.task_states(GATE_DAG_ID, gate_run.run_id).get(SENSOR, ("", 0))[0] == "deferred"
        ),
        "the gate example's sensor to defer its wait",
        timeout=300,
    )
    # and the worker that deferred it gone, its end taken by the scheduler: the scheduler
    # fails a resumed task when its deferral's end comes in after the resume, which a clock
    # set running at once made likely (a backoff's time then passes in no time)
    stack.wait_for(
        lambda: deferral_ended(stack, SENSOR), "the sensor's deferral to end", timeout=120
    )
    (wait,) = gate_run.record(SENSOR)["waits"]
    clock.run_from(_parsed(wait["until"]))
    if retry_policies:
        started[DAG_ID] = stack.trigger(DAG_ID, conf=LATE.conf, logical_date=LATE.business_date)
    for dag_id, run_id in started.items():
        assert stack.wait_for_run(dag_id, run_id, timeout=300) == "success"
    return {dag_id: FinishedRun(stack, run_id, dag_id) for dag_id, run_id in started.items()}


def deferral_ended(stack: AirflowStack, task_id: str) -> bool:
    """Whether the scheduler took the executor's event of ``task_id``'s first process."""
    logged = (stack.logs / "scheduler.log").read_text(errors="replace")
    return f"TaskInstance Finished: dag_id={GATE_DAG_ID}, task_id={task_id}," in logged


@pytest.fixture(scope="module")
def late_run(runs: dict[str, FinishedRun]) -> FinishedRun:
    return runs[DAG_ID]


@pytest.fixture(scope="module")
def gate_run(runs: dict[str, FinishedRun]) -> FinishedRun:
    return runs[GATE_DAG_ID]


def token(stack: AirflowStack, user: tuple[str, str]) -> str:
    answer = post_json(f"{stack.url}/auth/token", {"username": user[0], "password": user[1]})
    return str(answer["access_token"])


def post_json(url: str, body: dict[str, str]) -> dict[str, str]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        return dict(json.loads(answer.read()))


def get(url: str, *, bearer: str | None = None, cookie: str | None = None) -> Answer:
    headers = {}
    if bearer:
        headers["Authorization"] = f"Bearer {bearer}"
    if cookie:
        headers["Cookie"] = f"_token={cookie}"
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return Answer(answer.status, answer.read().decode(), _lowered(answer.headers))
    except urllib.error.HTTPError as error:
        return Answer(error.code, error.read().decode(), _lowered(error.headers))


def _lowered(headers: Message) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


def test_only_the_dag_files_with_a_retry_policy_are_refused_before_airflow_3_3(
    stack: AirflowStack, retry_policies: bool
) -> None:
    errors = import_errors(stack)
    if retry_policies:
        assert errors == {}
    else:
        assert set(errors) == POLICY_FILES
        # the outage example builds nothing but its policies: their refusal says why
        assert "retry policies arrived in Airflow 3.3" in errors["retry_window_outage.py"]
    assert stack.rows("select 1 from serialized_dag where dag_id=:d", d=GATE_DAG_ID)


def test_airflow_lists_the_plugin_with_its_tabs(stack: AirflowStack) -> None:
    listed = stack.airflow("plugins", "-o", "json").stdout
    plugins = {item["name"]: item for item in json.loads(listed[listed.index("[") :])}
    ours = plugins["retry_window"]
    assert "airflow.plugins" in ours["source"]
    assert [app["url_prefix"] for app in ours["fastapi_apps"]] == ["/retry-window"]
    tabs = {view["destination"]: view for view in ours["external_views"]}
    assert tabs["task_instance"]["href"].endswith("/tasks/{TASK_ID}?map_index={MAP_INDEX}")
    assert tabs["dag_run"]["url_route"] == "retry-window-run"


@pytest.mark.requires_airflow_3_3
def test_the_view_needs_a_user_who_may_read_the_dag(late_run: FinishedRun) -> None:
    stack = late_run.stack
    addresses = [
        late_run.view(),
        late_run.view(REFUSED),
        late_run.view(REFUSED, "/fixtures/policy-0.json"),
    ]
    outsider = token(stack, OUTSIDER)
    for url in addresses:
        anonymous = get(url)
        assert anonymous.status == 401, (url, anonymous)
        for denied in (get(url, bearer=outsider), get(url, cookie=outsider)):
            assert denied.status == 403, (url, denied)
            # nothing of the DAG: no decision, no task, no time
            assert "deadline" not in denied.body
            assert REFUSED not in denied.body
    admin = token(stack, ADMIN)
    allowed = get(late_run.view(REFUSED), cookie=admin)  # the UI's iframe sends the cookie
    assert allowed.status == 200
    assert "deadline-infeasible" in allowed.body
    assert allowed.headers["content-security-policy"].startswith("default-src 'none'")
    missing = get(f"{stack.url}/retry-window/dags/{DAG_ID}/runs/no_such_run", bearer=admin)
    assert missing.status == 404
    bad = get(late_run.view(REFUSED, "?map_index=two"), bearer=admin)
    assert bad.status == 400
    assert "map_index" in bad.body and "two" in bad.body


@pytest.mark.requires_airflow_3_3
def test_run_view_shows_every_decision_of_the_run(late_run: FinishedRun) -> None:
    page = get(late_run.view(), bearer=token(late_run.stack, ADMIN))
    assert page.status == 200
    for task_id, decisions in evidence(late_run.stack, late_run.run_id).items():
        for entry in decisions:
            assert entry["reason"].split(":")[0] in page.body
            assert f'data-task="{task_id}"' in page.body
    assert "Gate retry_gate" in page.body
    assert "Sensor load_retry_window" in page.body


@pytest.mark.requires_airflow_3_3
def test_downloaded_fixture_replays_to_the_stored_result(
    late_run: FinishedRun, tmp_path: Path
) -> None:
    stored = evidence(late_run.stack, late_run.run_id)[REFUSED][0]
    answer = get(
        late_run.view(REFUSED, "/fixtures/policy-0.json"), bearer=token(late_run.stack, ADMIN)
    )
    assert answer.status == 200
    assert 'filename="report-try-1.json"' in answer.headers["content-disposition"]
    assert json.loads(answer.body) == stored["fixture"]
    fixture = tmp_path / "report-try-1.json"
    fixture.write_text(answer.body)
    command = [sys.executable, "-m", "airflow_retrywindow"]
    evaluated = subprocess.run(
        [*command, "evaluate", str(fixture)], capture_output=True, text=True, check=True
    )
    assert json.loads(evaluated.stdout) == stored["result"]
    explained = subprocess.run(
        [*command, "explain", "--origin", stored["origin"], str(fixture)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "deadline-infeasible" in explained.stdout


def test_gate_and_sensor_link_to_their_tab(gate_run: FinishedRun) -> None:
    run = f"/dags/{GATE_DAG_ID}/dagRuns/{gate_run.run_id}"
    for task_id in ("retry_gate", SENSOR):
        links = gate_run.stack.api("GET", f"/api/v2{run}/taskInstances/{task_id}/links")
        assert links["extra_links"]["Retry window"] == (
            f"{gate_run.stack.url}/dags/{GATE_DAG_ID}/runs/{gate_run.run_id}"
            f"/tasks/{task_id}/plugin/retry-window"
        )


def test_the_gate_and_the_sensor_decided_on_the_scheduler(gate_run: FinishedRun) -> None:
    states = gate_run.stack.task_states(GATE_DAG_ID, gate_run.run_id)
    assert states == {
        "extract_positions": ("success", 1),
        "load": ("failed", 1),
        "archive": ("failed", 1),
        "transform": ("failed", 1),
        "load_retry_window": ("success", 1),
        "retry_load": ("success", 1),  # the sensor let the retry through after the backoff
        "retry_gate": ("success", 1),
        "rerun_everything": ("skipped", 0),  # archive has no attempt left
    }
    assert decisions(gate_run.record("retry_gate")) == {
        "extract_positions": "validate-output",
        "load": "retry-eligible",
        "archive": "attempts-exhausted",
        "transform": "deadline-infeasible",
    }
    sensor = gate_run.record(SENSOR)
    assert decisions(sensor) == {"load": "retry-eligible"}
    sensor_held_the_retry(
        sensor,
        backoff_over=ended(gate_run, "load") + retry_delay(gate_run, "load"),
        retry_started=started(gate_run, "retry_load"),
    )


def sensor_held_the_retry(
    sensor: dict[str, Any], *, backoff_over: pendulum.DateTime, retry_started: pendulum.DateTime
) -> None:
    """The sensor looked while load's backoff ran, waited once until its end, decided again
    after it, and the retry started after it.

    :param sensor: the sensor's decision record.
    :param backoff_over: when load's backoff ended: its try's end plus its retry_delay.
    :param retry_started: when retry_load started.
    """
    # no wait recorded: the sensor never held the retry
    assert len(sensor["waits"]) == 1, sensor["waits"]
    (wait,) = sensor["waits"]
    assert wait["reason"].startswith("wait-backoff: attempt 2 of 2 may start at"), wait
    looked, until = _parsed(wait["at"]), _parsed(wait["until"])
    assert looked < backoff_over <= until, wait
    assert _parsed(sensor["asOf"]) >= until, sensor["asOf"]
    assert retry_started >= backoff_over


#: load's end in the records of :func:`test_the_sensor_check_fails_when_the_sensor_did_not_wait`
LOAD_ENDED = pendulum.datetime(2026, 12, 3, 9, 0, 0, tz="UTC")


def _sensor_record(*waits: tuple[int, int], decided_at: int) -> dict[str, Any]:
    """A sensor's record: its waits (looked at, until) and its last decision, in seconds after
    load's end."""

    def at(seconds: int) -> str:
        return LOAD_ENDED.add(seconds=seconds).isoformat()

    reason = "wait-backoff: attempt 2 of 2 may start at 2026-12-03T09:00:41Z"
    return {
        "waits": [{"at": at(a), "until": at(u), "reason": reason} for a, u in waits],
        "asOf": at(decided_at),
    }


@pytest.mark.parametrize(
    "sensor",
    [
        _sensor_record(decided_at=55),  # started after the backoff: nothing to wait for
        _sensor_record((45, 46), decided_at=46),  # looked after the backoff was over
        _sensor_record((10, 30), decided_at=30),  # woke before the backoff's end
        _sensor_record((10, 41), decided_at=35),  # decided before its wait ended
    ],
    ids=["no-wait", "looked-late", "woke-early", "decided-early"],
)
def test_the_sensor_check_fails_when_the_sensor_did_not_wait(sensor: dict[str, Any]) -> None:
    backoff_over = LOAD_ENDED.add(seconds=40)
    with pytest.raises(AssertionError):
        sensor_held_the_retry(
            sensor, backoff_over=backoff_over, retry_started=LOAD_ENDED.add(seconds=60)
        )
    # the run the stack makes: a look at the end of load, a wait to a second past the backoff
    waited = _sensor_record((0, 41), decided_at=41)
    sensor_held_the_retry(
        waited, backoff_over=backoff_over, retry_started=LOAD_ENDED.add(seconds=42)
    )


def _parsed(text: str) -> pendulum.DateTime:
    moment = pendulum.parse(text, tz="UTC")
    assert isinstance(moment, pendulum.DateTime), text
    return moment


def started(run: FinishedRun, task_id: str) -> pendulum.DateTime:
    """When a task's current try started, on the API server's clock."""
    return _moment(run.stack.rows(
        "select start_date from task_instance where dag_id=:d and run_id=:r and task_id=:t",
        d=run.dag_id, r=run.run_id, t=task_id,
    ))  # fmt: skip


def ended(run: FinishedRun, task_id: str) -> pendulum.DateTime:
    """When a task's current try ended, on the API server's clock."""
    return _moment(run.stack.rows(
        "select end_date from task_instance where dag_id=:d and run_id=:r and task_id=:t",
        d=run.dag_id, r=run.run_id, t=task_id,
    ))  # fmt: skip


def _moment(rows: list[Any]) -> pendulum.DateTime:
    ((value,),) = rows
    return _parsed(str(value))


def retry_delay(run: FinishedRun, task_id: str) -> timedelta:
    """A task's retry_delay, as the REST API tells it."""
    delay = run.stack.api("GET", f"/api/v2/dags/{run.dag_id}/tasks/{task_id}")["retry_delay"]
    return timedelta(
        days=delay["days"], seconds=delay["seconds"], microseconds=delay["microseconds"]
    )


def decisions(record: dict[str, Any]) -> dict[str, str]:
    return {row["taskId"]: row["decision"] for row in record["decisions"]}


def task_log(run: FinishedRun, task_id: str) -> str:
    """The log of a task's first try, as the worker wrote it under the Airflow home."""
    folder = run.stack.home / "logs" / f"dag_id={run.dag_id}" / f"run_id={run.run_id}"
    # beside it, the triggerer writes attempt=1.log.trigger.<id>.log
    return (folder / f"task_id={task_id}" / "attempt=1.log").read_text()


def test_the_view_shows_the_gate_and_sensor_records_to_who_may_read_them(
    gate_run: FinishedRun,
) -> None:
    stack = gate_run.stack
    outsider, admin = token(stack, OUTSIDER), token(stack, ADMIN)
    for url in (gate_run.view(), gate_run.view("retry_gate")):
        assert get(url).status == 401
        denied = get(url, cookie=outsider)
        assert denied.status == 403, (url, denied)
        assert "deadline-infeasible" not in denied.body
    page = get(gate_run.view(), bearer=admin)
    assert page.status == 200
    assert "Gate retry_gate" in page.body
    assert "Sensor load_retry_window" in page.body
    for task_id in ("retry_gate", SENSOR):
        for row in gate_run.record(task_id)["decisions"]:
            assert row["reason"].split(":")[0] in page.body
            assert f'data-task="{row["taskId"]}"' in page.body
    task = get(gate_run.view("retry_gate"), cookie=admin)
    assert task.status == 200
    assert "deadline-infeasible" in task.body


def test_a_gate_fixture_downloads_and_replays(gate_run: FinishedRun, tmp_path: Path) -> None:
    stored = gate_run.record("retry_gate")["fixtures"][0]
    answer = get(
        gate_run.view("retry_gate", "/fixtures/record-0.json"), bearer=token(gate_run.stack, ADMIN)
    )
    assert answer.status == 200
    assert json.loads(answer.body) == stored["fixture"]
    fixture = tmp_path / "fixture.json"
    fixture.write_text(answer.body)
    evaluated = subprocess.run(
        [sys.executable, "-m", "airflow_retrywindow", "evaluate", str(fixture)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert json.loads(evaluated.stdout) == stored["result"]


def test_the_notifier_tells_the_gate_decisions_in_the_task_log(gate_run: FinishedRun) -> None:
    logged = task_log(gate_run, "retry_gate")
    assert "Retry window notification: [retry window]" in logged
    assert "deadline-infeasible" in logged


@pytest.mark.requires_airflow_3_3
@pytest.mark.skipif(not browser.installed(), reason="needs Debian's chromium and chromium-driver")
def test_refused_task_shows_its_decision_and_timeline_in_a_browser(
    late_run: FinishedRun, tmp_path: Path
) -> None:
    stack = late_run.stack
    task_page = f"{stack.url}/dags/{DAG_ID}/runs/{late_run.run_id}/tasks/{REFUSED}"
    shot = tmp_path / "retry-window-view.png"
    with browser.chromium(tmp_path / "profile", tmp_path / "chromedriver.log") as driver:
        wait = WebDriverWait(driver, 60)
        driver.get(f"{stack.url}/auth/login")
        wait.until(until.presence_of_element_located((By.NAME, "username"))).send_keys(ADMIN[0])
        driver.find_element(By.NAME, "password").send_keys(ADMIN[1])
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait.until(lambda d: d.get_cookie("_token") is not None)
        driver.get(task_page)
        tab = wait.until(
            until.element_to_be_clickable(
                (By.XPATH, "//*[self::a or self::button][normalize-space()='Retry window']")
            )
        )
        tab.click()
        wait.until(until.url_contains("/plugin/retry-window"))
        wait.until(
            until.frame_to_be_available_and_switch_to_it(
                (By.CSS_SELECTOR, "iframe[title='Retry window']")
            )
        )
        decision = wait.until(
            until.visibility_of_element_located(
                (By.CSS_SELECTOR, "article[data-decision='deadline-infeasible'] .badge")
            )
        )
        assert decision.text == "deadline-infeasible"
        reason = driver.find_element(By.CSS_SELECTOR, "article.decision .reason")
        assert reason.is_displayed()
        assert reason.text.startswith("deadline-infeasible: next attempt would start")
        assert "report the impact instead of retrying" in reason.text
        picture = driver.find_element(By.CSS_SELECTOR, "figure.timeline svg")
        assert picture.is_displayed()
        kinds = {
            item.get_attribute("data-kind")
            for item in picture.find_elements(By.CSS_SELECTOR, "text[data-kind]")
        }
        assert {"deadline", "finish", "earliest-start"} <= kinds
        driver.switch_to.default_content()
        driver.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000
    keep_screenshot(shot)


def keep_screenshot(shot: Path) -> None:
    """Keep the screenshot as a test artifact, and as the README's picture when asked."""
    runs = ROOT / ".test-runs"
    if runs.is_dir():
        shutil.copy(shot, runs / shot.name)
    if os.environ.get("RETRYWINDOW_UPDATE_SCREENSHOT") == "1":
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, SCREENSHOT)
