"""A target's task instances, one per map index, and the id the model knows each by.

A target that is not mapped has one task instance, map index ``-1``. A mapped
task (``.expand()``) or a task inside a mapped task group has one per map index,
``0`` to ``n - 1``, once Airflow has expanded it (before that, one with ``-1``).
The gate decides each on its own: an :class:`Instance` is what it decides about.

The model knows a task by an id of 1 to 48 of ``A-Z a-z 0-9 _ -``
(:data:`~airflow_retrywindow.model.bounds.TASK_ID`). :func:`model_ids` gives each
instance of one gate its own:

* a task that is not mapped keeps the id it always had
  (:func:`~airflow_retrywindow.timing.fixtures.model_task_id`: its task id, or a
  readable alias with a hash when Airflow's id does not fit the model's rules);
* a map index is ``<task id>-<map index>`` (``load-3``) when that fits the rules
  and no other instance of the gate has it; otherwise a readable alias that keeps
  the map index and ends in a hash of both (``grp_load-3-1f0e9c2a``).

In reasons and status updates an instance is named as Airflow's UI lists it:
``load`` or ``load[3]`` (:func:`label`); observations use the same names.

Nothing here imports Airflow.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from airflow_retrywindow.exceptions import TargetError
from airflow_retrywindow.model.bounds import MAX_TASK_ID_LENGTH, TASK_ID
from airflow_retrywindow.timing.fixtures import model_task_id

#: Airflow's map index of a task instance that is not (yet) mapped
UNMAPPED = -1
#: hex digits of the hash that keeps an alias unique
_DIGEST = 8
#: ``load[3]``: a map index in a name; task ids cannot hold brackets
_LABEL = re.compile(r"(?P<task_id>[^\[\]]+)\[(?P<map_index>0|[1-9][0-9]*)\]")


@dataclass(frozen=True, order=True)
class Instance:
    """One task instance of a target in the gate's DAG run.

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
    """A task instance's name: the task id, with ``[map index]`` when it is mapped.

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


def model_id(instance: Instance, *, aliased: bool = False) -> str:
    """The id the model knows ``instance`` by, before other instances are considered.

    :param instance: the task instance.
    :param aliased: give a map index its hashed alias even when the plain id fits
        (used when the plain id is taken).
    """
    if not instance.mapped:
        return model_task_id(instance.task_id)
    suffix = f"-{instance.map_index}"
    plain = instance.task_id + suffix
    if not aliased and TASK_ID.fullmatch(plain):
        return plain
    # the label holds brackets, which no task id does: its hash is the instance's own
    digest = hashlib.sha1(instance.label.encode(), usedforsecurity=False).hexdigest()[:_DIGEST]
    room = max(MAX_TASK_ID_LENGTH - len(suffix) - 1 - _DIGEST, 1)
    readable = re.sub(r"[^A-Za-z0-9_-]", "_", instance.task_id)[:room]
    return f"{readable}{suffix}-{digest}"


def model_ids(instances: Iterable[Instance]) -> dict[Instance, str]:
    """A distinct model id for every instance of one gate, the same for the same instances.

    :param instances: every task instance the gate decides.
    :raises TargetError: when two instances would still share an id (a hash collision).
    """
    ids = {instance: model_id(instance) for instance in instances}
    taken = Counter(ids.values())
    for instance, found in ids.items():
        if instance.mapped and taken[found] > 1:
            # e.g. map index 3 of "load" and a task named "load-3": the map index yields
            ids[instance] = model_id(instance, aliased=True)
    owners: dict[str, list[str]] = {}
    for instance, found in ids.items():
        owners.setdefault(found, []).append(instance.label)
    clashes = {found: names for found, names in owners.items() if len(names) > 1}
    if clashes:
        found, names = next(iter(clashes.items()))
        raise TargetError(
            f"{' and '.join(map(repr, names))} would both be known to the model as {found!r}; "
            "rename one of the tasks"
        )
    return ids
