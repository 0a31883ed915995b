"""The clock a test gives a DAG run or a stack: a process on it stops, moves and forks with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pendulum

from tests.gate.gate_runs import ROOT
from tests.gate.run_clock import RunClock

#: a process on the clock: it stops it, forks while its follower holds its lock, and once
#: told to go, both tell the time
ON_THE_CLOCK = """
import json, os, sys, threading, time

def tell(who):  # one write: the parent's and the child's lines do not interleave
    os.write(1, (json.dumps([who, time.time()]) + "\\n").encode())

from tests.gate import run_clock

run_clock.stop()
stopped = time.time()
threading.Event().wait(0.2)  # real time passes; the clock does not
tell("stopped" if time.time() == stopped else "ran on")
(follower,) = run_clock._FOLLOWING
held, release = threading.Event(), threading.Event()


def hold():  # as the follower's thread does while it reads the clock file
    with follower.lock:
        held.set()
        release.wait()


threading.Thread(target=hold, daemon=True).start()
held.wait()
child = os.fork()  # in the child, no thread will ever let the lock go
release.set()
while not os.path.exists(sys.argv[1]):
    threading.Event().wait(0.01)
threading.Event().wait(0.05)  # the follower reads the clock file every 0.01 s
tell("child" if child == 0 else "parent")
if child == 0:
    os._exit(0)
os.waitpid(child, 0)
"""


def test_a_process_stops_the_clock_and_follows_the_test_moving_it_and_so_does_its_fork(
    tmp_path: Path,
) -> None:
    clock = RunClock.started(tmp_path / "run-clock")
    go = tmp_path / "go"
    env = {**os.environ, **clock.services_env(str(ROOT))}
    process = subprocess.Popen(
        [sys.executable, "-c", ON_THE_CLOCK, str(go)],
        env=env, stdout=subprocess.PIPE, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert process.stdout is not None
    who, stopped = json.loads(process.stdout.readline())
    assert who == "stopped" and clock.stopped()
    assert abs(clock.now() - stopped) < 1e-5  # as written: whole microseconds
    later = pendulum.from_timestamp(stopped, tz="UTC").add(hours=1)
    clock.run_from(later)
    go.touch()
    told = dict(json.loads(line) for line in process.stdout)
    assert process.wait(timeout=60) == 0
    assert set(told) == {"parent", "child"}
    for when in told.values():  # an hour on, running: a few real seconds past it at most
        assert later.timestamp() <= when < later.add(minutes=1).timestamp()


#: a process on the clock that reads no time until the test says so, long after the test
#: set the clock running: as an idle worker does, forked for a task seconds later
IDLE_ON_THE_CLOCK = """
import json, os, sys, threading, time

from tests.gate import run_clock

(follower,) = run_clock._FOLLOWING
while not run_clock._running(follower.applied):  # the change applied; no time read
    threading.Event().wait(0.01)
os.write(1, b"applied\\n")
sys.stdin.readline()
os.write(1, (json.dumps(time.time()) + "\\n").encode())
"""
#: how far apart two processes' real clocks may read: each takes it from the pair of wall
#: and monotonic clocks it read at its start, which are read a few microseconds apart
REAL_CLOCKS_AGREE = 0.001


def test_a_process_idle_since_the_clock_was_set_running_tells_the_time_it_runs_at(
    tmp_path: Path,
) -> None:
    clock = RunClock.started(tmp_path / "run-clock")
    clock.stop_at(pendulum.datetime(2026, 12, 3, tz="UTC").timestamp())
    env = {**os.environ, **clock.services_env(str(ROOT))}
    process = subprocess.Popen(
        [sys.executable, "-c", IDLE_ON_THE_CLOCK],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert process.stdin is not None and process.stdout is not None
    clock.run_from(pendulum.datetime(2026, 12, 3, 1, tz="UTC"))
    assert process.stdout.readline() == "applied\n"
    idle = threading.Event()
    idle.wait(0.5)  # real time the process spends reading no time
    before = clock.now()
    process.stdin.write("go\n")
    process.stdin.flush()
    told = json.loads(process.stdout.readline())
    after = clock.now()
    assert process.wait(timeout=60) == 0
    # the clock the process tells runs from when it was set running, not from its first read
    assert before - REAL_CLOCKS_AGREE <= told <= after + REAL_CLOCKS_AGREE
