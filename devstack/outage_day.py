"""``make demo``'s outage day: four gated loads of a breaker pool, and their API goes down.

The DAG ``dags/retry_window_outage.py`` runs four loads in ``positions_api``, which the
demo's stack makes a breaker pool with 15 s rounds (:data:`ENV`); the controller's DAG
file ``dags/retry_window_pool_breakers.py`` beside it runs the breaker. The day drives a
:class:`~devstack.breaker_fleet.DependencyStandIn`: down from the trigger, so every first
try is refused, and up again once a call of one of the open breaker's probes was refused.
While the day lasts, a thread reads the pool's description every :data:`LOOK_EVERY`
seconds and keeps each change of its breaker's line (:class:`BreakerWatch`). What each
try met is read back afterwards: when Airflow scheduled and queued it (its tables) and
what the API answered it (the stand-in's calls). A try scheduled while the breaker was
open waited for a slot it held; a try queued while it was open took its probe's slot.
"""

from __future__ import annotations

import io
import math
import threading
import time
import urllib.error
from collections.abc import Iterator, Sequence
from contextlib import redirect_stdout
from dataclasses import dataclass
from datetime import datetime

import pendulum

from airflow_retrywindow.breaker.settings import CONTROLLER_DAG
from airflow_retrywindow.labels import UTC_CLOCK
from airflow_retrywindow.records.breaker_state import CLOSED, OPEN, BreakerState
from devstack.breaker_fleet import BREAKER_POOL, Call, DependencyStandIn, breaker_env, breaker_line
from devstack.stack import AirflowStack

DAG_ID = "retry_window_outage"
DATE = "2026-12-03"
#: the loads' pool, a breaker pool, and its size: one slot a load, so all four first
#: tries run at once
POOL = BREAKER_POOL
SLOTS = 4
#: the breaker's round on the demo's stack, in seconds: the day takes about two minutes
ROUND = 15
ENV = breaker_env(ROUND)
#: the loads have retries=3: tries 1 to 4
MAX_TRY = 4
#: seconds between two reads of the breaker's line: each phase lasts a round at least
LOOK_EVERY = 2.0
#: seconds the controller may take to start watching the pool, the run to end, and
#: rounds the breaker may take to close after it
WATCH_LIMIT = 180
RUN_LIMIT = 300
CLOSE_ROUNDS = 4
#: the endpoint the loads call, and the day's line when it answers again
ENDPOINT = "positions"
BACK = f"the {ENDPOINT} API answers again (the stand-in is up)"


@dataclass(frozen=True)
class Seen:
    """The breaker's line as read: when (Unix seconds), and the state it held."""

    at: float
    state: BreakerState


@dataclass(frozen=True)
class Try:
    """One try of a load, as Airflow's tables and the stand-in kept it.

    :param task: the load.
    :param number: its try number.
    :param scheduled: when Airflow scheduled it (Unix seconds), ``None`` if it did not.
    :param queued: when Airflow queued it, once a slot let it; ``None`` if it was not.
    :param status: what the API answered its call, ``None`` when it made none.
    """

    task: str
    number: int
    scheduled: float | None
    queued: float | None
    status: int | None


@dataclass(frozen=True)
class Outage:
    """What the day did.

    :param run_id: its run.
    :param state: the run's end state.
    :param calls: every call the API answered, in order.
    :param seen: each change of the breaker's line, in order.
    :param back_at: when the API answered again (Unix seconds), ``None`` if it did not.
    :param tries: every try of every load.
    :param unread: the reads of the breaker's line that failed, and why.
    """

    run_id: str
    state: str
    calls: Sequence[Call]
    seen: Sequence[Seen]
    back_at: float | None
    tries: Sequence[Try]
    unread: Sequence[str] = ()

    @property
    def opened(self) -> bool:
        """Whether the breaker was seen open."""
        return _ever_open(self.seen)

    @property
    def closed_again(self) -> bool:
        """Whether the breaker was seen closed after it had opened."""
        phases = [each.state.phase for each in self.seen]
        return OPEN in phases and CLOSED in phases[phases.index(OPEN) :]

    def open_spans(self) -> list[tuple[float, float]]:
        """When the breaker was open, as (from, to) in Unix seconds: from the ``since`` of
        each open phase to that of the phase after it (on until now when none followed)."""
        phases: list[tuple[str, float]] = []
        for each in self.seen:
            phase = (each.state.phase, each.state.since.timestamp())
            if not phases or phases[-1] != phase:
                phases.append(phase)
        ends = [since for _, since in phases[1:]] + [math.inf]
        return [
            (since, end) for (phase, since), end in zip(phases, ends, strict=True) if phase == OPEN
        ]

    def held(self, each: Try) -> float | None:
        """Seconds ``each`` waited for a slot the open breaker held, ``None`` when it did not
        wait for one (scheduled while the breaker was not open)."""
        if each.scheduled is None or not _within(each.scheduled, self.open_spans()):
            return None
        return (each.queued if each.queued is not None else time.time()) - each.scheduled

    def probed(self, each: Try) -> bool:
        """Whether ``each`` took a probe's slot: it was queued while the breaker was open."""
        return each.queued is not None and _within(each.queued, self.open_spans())

    def probes(self) -> list[Try]:
        """The tries that took a probe's slot."""
        return [each for each in self.tries if self.probed(each)]

    def refused(self) -> list[Call]:
        """The calls the API refused: those that reached it while it was down."""
        return [each for each in self.calls if each.status != 200]

    def told(self, task: str) -> str:
        """What ``task``'s tries met, in a line: ``try 1: 503; try 2 held 41 s, probe: 200``."""
        steps = []
        for each in self.tries:
            if each.task != task:
                continue
            held = self.held(each)
            step = f"try {each.number}" + (f" held {held:.0f} s" if held is not None else "")
            step += ", probe" if self.probed(each) else ""
            steps.append(f"{step}: {each.status or 'no call'}")
        return "; ".join(steps)

    def breaker_lines(self) -> Iterator[tuple[str, str]]:
        """Each change of the breaker's line, and when the API came back, in order: the time
        read (UTC), and the breaker's words and why (or the API's return)."""
        back = self.back_at
        for each in self.seen:
            if back is not None and back <= each.at:
                yield _clock(back), BACK
                back = None
            yield _clock(each.at), f"{each.state.words()}: {each.state.reason}"
        if back is not None:
            yield _clock(back), BACK


def _ever_open(seen: Sequence[Seen]) -> bool:
    return any(each.state.phase == OPEN for each in seen)


def _within(at: float, spans: Sequence[tuple[float, float]]) -> bool:
    return any(start <= at < end for start, end in spans)


def _clock(at: float) -> str:
    return pendulum.from_timestamp(at, tz="UTC").format(UTC_CLOCK)


class BreakerWatch:
    """The breaker's line read every :data:`LOOK_EVERY` seconds from a thread, while in a
    ``with`` block; each change is kept. It brings the API back once it refused a call of
    one of the open breaker's probes.

    :param stack: the stack whose pool it reads.
    :param standin: the API's stand-in, down until then.
    """

    def __init__(self, stack: AirflowStack, standin: DependencyStandIn) -> None:
        self.stack = stack
        self.standin = standin
        self.seen: list[Seen] = []
        self.unread: list[str] = []
        self.back_at: float | None = None
        self._ended = threading.Event()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="breaker-watch", daemon=True)

    def __enter__(self) -> BreakerWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._ended.set()
        self._thread.join()

    def wait_closed(self, timeout: float) -> None:
        """Wait until the breaker was seen closed after it opened (at once when it never
        opened), at most ``timeout`` seconds."""
        if _ever_open(self.seen):
            self._closed.wait(timeout)

    def _probe_refused(self, state: BreakerState) -> bool:
        """Whether the API refused a call since the open breaker's last probe opened its slot:
        the probe's (nothing else of the pool runs while it is open). Told by the calls,
        not the breaker: its next round opens the next probe as it counts this one failed."""
        probe = state.last_probe
        if state.phase != OPEN or probe is None:
            return False
        opened = probe.at.timestamp()
        return any(call.at >= opened and call.status != 200 for call in list(self.standin.calls))

    def _watch(self) -> None:
        while not self._ended.wait(LOOK_EVERY):
            self.look()

    def look(self) -> None:
        """Read the breaker's line once; keep it when it changed."""
        try:
            found = breaker_line(self.stack, POOL)
        except (RuntimeError, OSError, urllib.error.URLError) as error:
            self.unread.append(f"{_clock(time.time())} {error}")
            return
        state = BreakerState.of(found) if found is not None else None
        if state is None:
            return
        if not self.seen or self.seen[-1].state.words() != state.words():
            self.seen.append(Seen(time.time(), state))
        if self.back_at is None and self._probe_refused(state):
            self.back_at = self.standin.up()
        if _ever_open(self.seen) and state.phase == CLOSED:
            self._closed.set()


def create_pool(stack: AirflowStack) -> None:
    """The loads' pool, :data:`SLOTS` slots."""
    stack.api("POST", "/api/v2/pools", {"name": POOL, "slots": SLOTS})


def stage(stack: AirflowStack, states: io.TextIOBase) -> Outage:
    """Run the day: the API down, the run triggered and waited for (its task states as
    they change written to ``states``), then the breaker's close waited for.

    :raises RuntimeError: when the controller never watched the pool, or the run did
        not end in time.
    """
    stack.wait_for_dag(DAG_ID)
    stack.wait_for(
        lambda: breaker_line(stack, POOL) is not None,
        f"the breakers' controller (the DAG {CONTROLLER_DAG}) to watch pool {POOL}",
        timeout=WATCH_LIMIT,
    )
    standin = DependencyStandIn()
    standin.down()
    try:
        with BreakerWatch(stack, standin) as watch:
            run_id = stack.trigger(DAG_ID, conf={"api": standin.url}, logical_date=DATE)
            states.write(f"\n===== outage day: run {run_id}: task states as they changed =====\n")
            with redirect_stdout(states):
                state = stack.wait_for_run(DAG_ID, run_id, timeout=RUN_LIMIT)
            watch.wait_closed(CLOSE_ROUNDS * ROUND)
    finally:
        standin.close()
    return Outage(
        run_id, state, list(standin.calls), list(watch.seen), watch.back_at,
        tries(stack, run_id, standin.calls), list(watch.unread),
    )  # fmt: skip


def tries(stack: AirflowStack, run_id: str, calls: Sequence[Call]) -> list[Try]:
    """Every try of the run's loads, ended ones from Airflow's task instance history."""
    rows = stack.rows(
        "select task_id, try_number, scheduled_dttm, queued_dttm from task_instance_history"
        " where dag_id = :d and run_id = :r union all"
        " select task_id, try_number, scheduled_dttm, queued_dttm from task_instance"
        " where dag_id = :d and run_id = :r",
        d=DAG_ID,
        r=run_id,
    )
    answered = {(each.task, each.try_number): each.status for each in calls}
    found: dict[tuple[str, int], Try] = {}
    # the task instance's own row, listed last, wins over a history row of the same try
    for task, number, scheduled, queued in rows:
        key = (str(task), int(number))
        found[key] = Try(*key, _seconds(scheduled), _seconds(queued), answered.get(key))
    return [found[key] for key in sorted(found)]


def _seconds(value: datetime | str | None) -> float | None:
    """A time column in Unix seconds (SQLite answers text, in UTC)."""
    if value is None:
        return None
    if isinstance(value, str):
        found = pendulum.parse(value, tz="UTC")
        assert isinstance(found, datetime)
        return found.timestamp()
    return (value if value.tzinfo else value.replace(tzinfo=pendulum.UTC)).timestamp()


def problems(outage: Outage, finals: dict[str, tuple[str | None, int]]) -> list[str]:
    """What the day did other than what it shows; [] when nothing.

    Every load succeeds within its attempts; the breaker opened and held a load; the API
    came back after a refused probe; the breaker closed again.

    :param finals: each load's (state, try number) at the end.
    """
    found = [
        f"{task}: expected success by try {MAX_TRY}, got {state} at try {number}"
        for task, (state, number) in sorted(finals.items())
        if state != "success" or number > MAX_TRY
    ]
    if not outage.opened:
        found.append(
            f"pool {POOL}'s breaker never opened: the loads ran into the outage unheld (does "
            f"the DAG {CONTROLLER_DAG} run? the triggerer's log has its rounds)"
        )
    elif not any(outage.held(each) is not None for each in outage.tries):
        found.append("no load waited for a slot while the breaker was open")
    elif outage.back_at is None:
        found.append("no probe of the open breaker reached the API: it was never brought back")
    elif not outage.closed_again:
        found.append(f"the breaker did not close within {CLOSE_ROUNDS} rounds of the run's end")
    return found


LESSON = (
    "The positions API was down from the loads' first tries until {back:.0f} s after pool "
    "{pool}'s breaker opened. {opener} after {why}, and the pool's slots went to 0: the "
    "breaker held every load in Airflow's queue, with no worker, no trigger and no try "
    "spent while held (the longest wait {longest:.0f} s). It opened one slot a round for a "
    "probe: {refused_probes} refused, then one answered, and the breaker recovered "
    "({recovery}). All {loads} loads succeeded with no attempt exhausted; {down} calls "
    "reached the API while it was down, {first} of them first tries."
)


def lesson(outage: Outage) -> str:
    """The day's lesson, told from what it did (once :func:`problems` found nothing)."""
    first_open = next(each.state for each in outage.seen if each.state.phase == OPEN)
    back = outage.back_at or first_open.since.timestamp()
    opener = (
        "The controller's round opened it"
        if first_open.by == "controller"
        else f"A failing try, {first_open.by}, tripped it"
    )
    held = [found for each in outage.tries if (found := outage.held(each)) is not None]
    refused = outage.refused()
    return LESSON.format(
        back=back - first_open.since.timestamp(),
        pool=POOL,
        opener=opener,
        why=first_open.reason.split("; ")[0],
        longest=max(held),
        refused_probes=sum(1 for each in outage.probes() if each.status != 200),
        recovery=recovery(outage),
        loads=len({each.task for each in outage.tries}),
        down=len(refused),
        first=sum(1 for each in refused if each.try_number == 1),
    )


def recovery(outage: Outage) -> str:
    """How the slots came back after the last open phase: ``2 slots, then 4, the pool's
    size``."""
    phases = [each.state for each in outage.seen]
    last_open = max(index for index, state in enumerate(phases) if state.phase == OPEN)
    slots: list[int] = []
    for state in phases[last_open + 1 :]:
        if not slots or slots[-1] != state.slots:
            slots.append(state.slots)
    if not slots:
        return "not yet"
    told = f"{slots[0]} slots" + "".join(f", then {count}" for count in slots[1:])
    return told + (", the pool's size" if phases[-1].phase == CLOSED else "")


def details(outage: Outage) -> list[str]:
    """The day in full, for the details file: every call, every line of the breaker."""
    lines = ["What the positions API answered, each call:"]
    lines += [
        f"  {_clock(each.at)}  {each.task:<8} try {each.try_number}: {each.status}"
        for each in outage.calls
    ]
    lines += ["", f"Pool {POOL}'s breaker, each change of its line as read:"]
    lines += [
        f"  {_clock(each.at)}  {each.state.line()}  (by {each.state.by})" for each in outage.seen
    ]
    if outage.back_at is not None:
        lines.append(f"  the API answered again from {_clock(outage.back_at)}")
    lines += [f"  could not read it at {each}" for each in outage.unread]
    lines += ["", "Each try: when Airflow scheduled and queued it, and what the API answered it:"]
    lines += [
        f"  {each.task:<8} try {each.number}: scheduled {_shown(each.scheduled)}, queued "
        f"{_shown(each.queued)}, answered {each.status or 'no call'}"
        for each in outage.tries
    ]
    return lines


def _shown(at: float | None) -> str:
    return "-" if at is None else _clock(at)
