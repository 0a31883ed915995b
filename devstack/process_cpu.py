"""The CPU a service used, from ``/proc``: what the benchmarks charge an API server.

Linux only. A forking server's workers are found below its pid; PostgreSQL's own CPU,
or that of processes the server did not start, is not counted.
"""

from __future__ import annotations

import os
from pathlib import Path


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command's name; ``None`` once gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def process_tree(root: int) -> list[int]:
    """``root`` and every process below it (a forking server's workers)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        fields = _stat(int(entry.name)) if entry.name.isdigit() else None
        if fields is not None:
            parents[int(entry.name)] = int(fields[1])
    found, grown = {root}, True
    while grown:
        below = {pid for pid, parent in parents.items() if parent in found}
        grown = not below <= found
        found |= below
    return sorted(found)


def cpu_seconds(pids: list[int]) -> float:
    """User and system time of ``pids`` so far, in seconds."""
    ticks = 0
    for pid in pids:
        fields = _stat(pid)
        if fields is not None:
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")
