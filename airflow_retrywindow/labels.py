"""How the package names things for people: task instances and times.

The lowest room of the package: the view, the notifier, ``explain``, the gate and
the policy all print a task instance and a time, and each takes the form from here,
so that one instance reads ``load[3]`` everywhere and one time reads alike in every
message. Nothing here imports from another module of the package.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Airflow's map index of a task instance that is not (yet) mapped
UNMAPPED = -1
#: ``load[3]``: a map index in a name; task ids cannot hold brackets
_LABEL = re.compile(r"(?P<task_id>[^\[\]]+)\[(?P<map_index>0|[1-9][0-9]*)\]")

#: a time in reasons, notices and ``explain``: ``2026-12-04 17:08:16Z``
UTC_SHOWN = "YYYY-MM-DD HH:mm:ss[Z]"
#: a time in status updates and stored texts, ISO 8601: ``2026-12-04T17:08:16Z``
UTC_ISO = "YYYY-MM-DDTHH:mm:ss[Z]"
#: a time of the day in question: ``17:08:16Z``
UTC_CLOCK = "HH:mm:ss[Z]"
#: a time in the Retry window view: ``2026-12-04 17:08:16 UTC``
VIEW_SHOWN = "YYYY-MM-DD HH:mm:ss [UTC]"
#: a time of day in the view and in a dependency's reasons: ``17:08:16 UTC``
VIEW_CLOCK = "HH:mm:ss [UTC]"


@dataclass(frozen=True, order=True)
class Instance:
    """One task instance: a task id and its map index.

    :param task_id: the Airflow task id.
    :param map_index: its map index, ``-1`` when the task is not (yet) mapped.
    """

    task_id: str
    map_index: int = UNMAPPED

    @property
    def mapped(self) -> bool:
        """Whether this is one map index of a mapped task."""
        return self.map_index > UNMAPPED

    @property
    def label(self) -> str:
        """Its name in reasons, status updates and observations: ``load`` or ``load[3]``."""
        return label(self.task_id, self.map_index)


def label(task_id: str, map_index: int = UNMAPPED) -> str:
    """A task instance's name as Airflow's UI lists it: the task id, with ``[map index]``
    when it is mapped.

    :param task_id: the Airflow task id.
    :param map_index: its map index, ``-1`` when not mapped.
    """
    return task_id if map_index <= UNMAPPED else f"{task_id}[{map_index}]"


def parse_label(text: str) -> Instance:
    """The instance a name stands for: ``load`` -> map index -1, ``load[3]`` -> 3.

    :param text: a task id, or a task id with a map index in brackets.
    """
    found = _LABEL.fullmatch(text)
    if found is None:
        return Instance(text)
    return Instance(found["task_id"], int(found["map_index"]))
