"""What a status read is handed: nothing of the try's that it could change.

The read of a resumable job's status runs in a thread with a timeout
(:mod:`~airflow_retrywindow.policies.reconcile`). A Python thread cannot be stopped:
after a timeout it is abandoned and runs on. So it is handed only its own objects:

* a deep copy of the operator whose hooks, and attributes that cannot be copied
  (a job object holding a client), are left out (``None``: an operator such as
  BigQuery's builds a new hook when it needs one, and keeps the job it reads), so
  neither the operator nor its hook's clients and caches are shared with the try;
* a read-only view of the task context: its mapping cannot be changed, the task
  is the copy, the task state store answers ``get`` and drops writes, and the task
  instance answers its attributes and ``xcom_pull`` and drops ``xcom_push`` (the
  BigQuery operator pushes its job's links while it reads). Any other method of the
  task instance is refused.

The DAG, the task group, the logger and the retry policy are shared: they describe
the task, and a read has no reason to change them.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any


def _describing(task: Any) -> list[Any]:
    """What an operator shares with its copy rather than copies: its DAG, task group,
    logger and retry policy, read through their public names."""
    return [task.get_dag(), task.task_group, task.log, getattr(task, "retry_policy", None)]


def detached_copy(task: Any) -> Any:
    """A deep copy of ``task`` without its hooks, sharing only what describes the task.

    An attribute that cannot be copied (BigQuery's ``_job`` holds a client, which
    refuses to be) is left out of the copy, as a hook is: never shared.
    """
    from airflow.sdk import BaseHook

    memo: dict[int, Any] = {id(value): value for value in _describing(task) if value is not None}
    for value in vars(task).values():
        if isinstance(value, BaseHook):
            memo[id(value)] = None  # the copy builds its own when it needs one
    for name, value in vars(task).items():
        if id(value) in memo or name in getattr(task, "shallow_copy_attrs", ()):
            continue
        try:
            copy.deepcopy(value, memo)  # kept in memo: the copy below reuses it
        except Exception:
            memo[id(value)] = None
    return copy.deepcopy(task, memo)


class ReadOnlyStore:
    """The try's task state store as a read sees it: ``get`` answers, writes are dropped."""

    def __init__(self, store: Any) -> None:
        self._store = store

    def get(self, key: str, default: Any = None) -> Any:
        """The stored value, as a copy: changing it changes nothing stored."""
        return copy.deepcopy(self._store.get(key, default))

    def set(self, key: str, value: Any, *args: Any, **kwargs: Any) -> None:
        """Dropped: a read keeps nothing."""

    def delete(self, key: str, *args: Any, **kwargs: Any) -> None:
        """Dropped: a read removes nothing."""


class ReadOnlyTaskInstance:
    """The try's task instance as a read sees it: its attributes, never its actions."""

    def __init__(self, ti: Any, task: Any) -> None:
        object.__setattr__(self, "_ti", ti)
        object.__setattr__(self, "task", task)

    def xcom_push(self, key: str, value: Any, *args: Any, **kwargs: Any) -> None:
        """Dropped: what a read pushes never reaches the try's XComs."""

    def xcom_pull(self, *args: Any, **kwargs: Any) -> Any:
        """Read the try's XComs."""
        return self._ti.xcom_pull(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._ti, name)
        if callable(value):
            raise PermissionError(
                f"a job status read may not call the task instance's {name}(): it is handed "
                "a read-only view of the try"
            )
        return copy.deepcopy(value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise PermissionError(
            f"a job status read may not set the task instance's {name}: it is handed a "
            "read-only view of the try"
        )


class ReadOnlyContext(Mapping[str, Any]):
    """A task context a read cannot change, nor change the try through.

    :param context: the try's context.
    :param task: what the read sees as the task (the detached copy).
    """

    def __init__(self, context: Mapping[str, Any], task: Any) -> None:
        values = dict(context)
        values["task"] = task
        for key in ("ti", "task_instance"):
            if values.get(key) is not None:
                values[key] = ReadOnlyTaskInstance(values[key], task)
        if values.get("task_state_store") is not None:
            values["task_state_store"] = ReadOnlyStore(values["task_state_store"])
        self._values = values

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)
