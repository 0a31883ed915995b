"""A breaker pool's controller through faults, on a real scheduler and triggerer.

The pool ``positions_api`` (:data:`SLOTS` slots, :data:`ROUND` s rounds) is held by its
breaker, forced open by on-call's Variable, and then its controller meets what can
happen to it: its process is killed with nothing to restart it, the triggerer comes back,
the API server is away for a round, the connection's password changes, the pool is
renamed. Each time the pool is back at its owner's size within about two rounds of
losing its controller, or held again once the controller is back; it is never held by
nothing. No task of the pool runs: only the breaker is watched.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Iterator

import pendulum
import pytest
import sqlalchemy

from devstack.breaker_fleet import BREAKER_POOL, CONTROLLER_FILE, breaker_env, breaker_line
from devstack.distributed import POSTGRES, admin_sql
from devstack.stack import ADMIN, API_CONNECTION, AirflowStack

pytestmark = [pytest.mark.airflow, pytest.mark.slow(minutes=6), pytest.mark.alone]

ROUND = 10
SLOTS = 6
FORCE = f"retry_window_breaker_{BREAKER_POOL}"
#: how long a lost controller may keep its pool: a lease (a round and a half and the
#: grace), the scheduler's check of deferral timeouts (2 s here) and the task's resume
GIVEN_BACK_WITHIN = 2 * ROUND + 15 + 2 + 30


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AirflowStack]:
    home = tmp_path_factory.mktemp("breaker-faults")
    dags = home / "dags"
    dags.mkdir()
    shutil.copy(CONTROLLER_FILE, dags)
    database = f"retrywindow_faults_{os.getpid()}_{int(time.time())}"
    admin_sql(f'CREATE DATABASE "{database}"')
    running = AirflowStack(
        home=home,
        database_url=f"postgresql+psycopg2://{POSTGRES}/{database}",
        dags_folder=dags,
        # tokens last seconds: a reader that kept its password meets the rotation soon
        extra_env={**breaker_env(ROUND), "AIRFLOW__API_AUTH__JWT_EXPIRATION_TIME": "15"},
    )
    try:
        running.prepare()
        running.start("api-server", "scheduler", "dag-processor", "triggerer")
        running.api("POST", "/api/v2/pools", {"name": BREAKER_POOL, "slots": SLOTS})
        running.wait_for(lambda: breaker_line(running) is not None, "the breaker", timeout=180)
        yield running
    finally:
        running.stop()
        admin_sql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


@pytest.fixture(autouse=True)
def no_force_left(stack: AirflowStack) -> Iterator[None]:
    """A test that failed with the breaker forced open leaves no force to the next: each
    starts from a pool its owner holds."""
    yield
    clear_force(stack)


def clear_force(stack: AirflowStack) -> None:
    with stack.engine.begin() as db:
        db.execute(sqlalchemy.text("delete from variable where key = :k"), {"k": FORCE})


def slots(stack: AirflowStack, pool: str = BREAKER_POOL) -> int:
    return int(stack.api("GET", f"/api/v2/pools/{pool}")["slots"])


def held_open(stack: AirflowStack) -> None:
    """On-call forces the breaker open; the controller's next rounds hold the pool, and its
    lease is renewed short: what the controller of a held pool holds."""
    stack.api("POST", "/api/v2/variables", {"key": FORCE, "value": "open"})
    stack.wait_for(lambda: slots(stack) == 0, "the pool held", timeout=4 * ROUND)
    stack.wait_for(lambda: short_lease(stack), "the short lease", timeout=4 * ROUND)


def short_lease(stack: AirflowStack) -> bool:
    """Whether the controller's task is deferred on a lease of a held pool: two rounds and
    the grace at most (a pool not held keeps a lease of ten rounds)."""
    rows = stack.rows(
        "select trigger_timeout from task_instance where dag_id = 'retry_window_pool_breakers'"
        " and state = 'deferred' and trigger_timeout is not null"
    )
    return bool(rows) and all(
        (timeout - pendulum.now("UTC")).total_seconds() <= 2 * ROUND + 15 for (timeout,) in rows
    )


def as_admin(
    stack: AirflowStack, password: str, method: str, path: str, body: object = None
) -> object:
    """A REST call as the admin user, whose password is ``password`` now."""
    token = stack._request("POST", "/auth/token", {"username": ADMIN[0], "password": password})
    return stack._request(method, path, body, token=token["access_token"])


def lifted(stack: AirflowStack, password: str = ADMIN[1]) -> None:
    """On-call knows the dependency up: forced closed, the pool is back at its owner's size,
    and the force deleted, it stays there. (A breaker whose open force is deleted stays
    open and probes, and no task of this pool runs to be its probe.)"""
    as_admin(
        stack, password, "PATCH", f"/api/v2/variables/{FORCE}", {"key": FORCE, "value": "closed"}
    )

    def given_back() -> bool:
        pool = as_admin(stack, password, "GET", f"/api/v2/pools/{BREAKER_POOL}")
        return isinstance(pool, dict) and pool["slots"] == SLOTS

    stack.wait_for(given_back, "the force closed", timeout=6 * ROUND)
    as_admin(stack, password, "DELETE", f"/api/v2/variables/{FORCE}")


def test_a_killed_controller_gives_its_pool_back_and_a_returning_one_holds_it_again(
    stack: AirflowStack,
) -> None:
    held_open(stack)
    triggerer = stack.processes.pop("triggerer")
    os.killpg(triggerer.pid, signal.SIGKILL)  # the controller's process, nothing restarts it
    triggerer.wait()
    lost = time.time()
    stack.wait_for(lambda: slots(stack) == SLOTS, "the pool given back", timeout=120)
    assert time.time() - lost <= GIVEN_BACK_WITHIN
    line = breaker_line(stack)
    assert line is not None and line["phase"] == "closed"
    assert "controller was lost" in line["reason"]
    # the triggerer back: the controller holds the pool again, as on-call still forces it
    stack.start("triggerer")
    stack.wait_for(lambda: slots(stack) == 0, "the pool held again", timeout=6 * ROUND)
    lifted(stack)


def test_an_api_server_away_for_a_round_leaves_the_pool_held_then_the_controller_goes_on(
    stack: AirflowStack,
) -> None:
    held_open(stack)
    for name in ("api-server", "execution-api"):
        end = stack.processes.pop(name)
        os.killpg(end.pid, signal.SIGKILL)
        end.wait()
    time.sleep(ROUND)  # a round without the API server: what the fault is
    stack.start("api-server")
    assert slots(stack) == 0  # nothing could change the pool meanwhile, nor gave it back
    lifted(stack)


def test_a_rotated_password_is_read_anew_from_the_connection(stack: AirflowStack) -> None:
    try:
        _rotate(stack)
    finally:
        (stack.home / "passwords.json").write_text(json.dumps({ADMIN[0]: ADMIN[1]}))
        with stack.engine.begin() as db:
            db.execute(
                sqlalchemy.text("update connection set password = :p where conn_id = :c"),
                {"p": ADMIN[1], "c": API_CONNECTION},
            )
        clear_force(stack)  # a rotation that failed half way leaves it forced


def refused_logins(stack: AirflowStack) -> int:
    """The token requests the REST API server refused so far (its access log)."""
    logged = (stack.logs / "api-server.log").read_text(errors="replace").splitlines()
    return sum("path=/auth/token" in line and "status_code=401" in line for line in logged)


def _rotate(stack: AirflowStack) -> None:
    # the admin's password changes; the connection still holds the old one
    before = refused_logins(stack)
    (stack.home / "passwords.json").write_text(json.dumps({ADMIN[0]: "rotated"}))
    # the token the controller holds runs out and its next login is refused: the fault
    stack.wait_for(
        lambda: refused_logins(stack) > before, "the controller's login refused", timeout=6 * ROUND
    )
    as_admin(stack, "rotated", "POST", "/api/v2/variables", {"key": FORCE, "value": "open"})
    time.sleep(3 * ROUND)  # rounds that cannot read the pools: nothing is applied
    assert as_admin(stack, "rotated", "GET", f"/api/v2/pools/{BREAKER_POOL}")["slots"] == SLOTS
    with stack.engine.begin() as db:
        db.execute(
            sqlalchemy.text("update connection set password = 'rotated' where conn_id = :c"),
            {"c": API_CONNECTION},
        )

    def held() -> bool:
        return as_admin(stack, "rotated", "GET", f"/api/v2/pools/{BREAKER_POOL}")["slots"] == 0

    # with no restart of the triggerer: the next round reads the connection anew
    stack.wait_for(held, "the pool held", timeout=6 * ROUND)
    lifted(stack, "rotated")


def test_a_renamed_pool_is_given_back_its_size(stack: AirflowStack) -> None:
    held_open(stack)
    renamed = "positions_api_renamed"
    with stack.engine.begin() as db:
        db.execute(
            sqlalchemy.text("update slot_pool set pool = :new where pool = :old"),
            {"new": renamed, "old": BREAKER_POOL},
        )
    stack.wait_for(lambda: slots(stack, renamed) == SLOTS, "the renamed pool", timeout=6 * ROUND)
    described = stack.api("GET", f"/api/v2/pools/{renamed}")["description"] or ""
    assert "retry window breaker:" not in described
