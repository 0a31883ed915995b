"""What the REST API answered, read as its documentation describes it.

The reader sends its requests with urllib3 and reads each answer's JSON here, one field
at a time: a field missing, or not of the type Airflow's OpenAPI document gives it,
raises ``ValueError`` naming the field and the value, which the reader reports as an
unreadable answer. Only the fields the reader uses are read. (The generated
``apache-airflow-client`` imports every API and model of Airflow's REST API on its
first use, about a second of a core in every task process that reads a pool.)
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pendulum

from airflow_retrywindow.exceptions import AirflowApiError
from airflow_retrywindow.redaction import safe_text


class RefusedAnswer(Exception):
    """An answer outside 2xx: its status, reason, body and headers.

    :param status: the HTTP status.
    :param reason: its reason phrase.
    :param body: the answer's body, as text.
    :param headers: the answer's headers.
    """

    def __init__(self, status: int, reason: str | None, body: str, headers: Any) -> None:
        super().__init__(f"HTTP {status} {reason or ''}".rstrip())
        self.status = status
        self.reason = reason
        self.body = body
        self.headers = headers


class AnswerObject:
    """One JSON object of an answer, read field by field.

    :param value: the decoded JSON.
    :param where: where in the answer it is, for messages (``pools[2]``).
    """

    def __init__(self, value: object, where: str = "the answer") -> None:
        if not isinstance(value, dict):
            raise ValueError(f"{where} is not a JSON object: {_shown(value)}")
        self._value = value
        self._where = where

    def value(self, name: str) -> Any:
        """The field as JSON gave it; ``None`` when it is absent."""
        return self._value.get(name)

    def text(self, name: str) -> str:
        found = self._value.get(name)
        if not isinstance(found, str):
            raise self._wrong(name, "a string")
        return found

    def optional_text(self, name: str) -> str | None:
        return None if self._value.get(name) is None else self.text(name)

    def number(self, name: str) -> int:
        found = self._value.get(name)
        if isinstance(found, bool) or not isinstance(found, int):
            raise self._wrong(name, "an integer")
        return found

    def optional_number(self, name: str) -> int | None:
        return None if self._value.get(name) is None else self.number(name)

    def flag(self, name: str) -> bool:
        found = self._value.get(name)
        if not isinstance(found, bool):
            raise self._wrong(name, "true or false")
        return found

    def moment(self, name: str) -> pendulum.DateTime:
        """A time (ISO 8601 with ``Z`` or an offset), in UTC."""
        found = self.text(name)
        try:
            # datetime.fromisoformat reads "Z" only from Python 3.11 on
            parsed = datetime.fromisoformat(found[:-1] + "+00:00" if found.endswith("Z") else found)
        except ValueError:
            raise self._wrong(name, "a time") from None
        return aware(parsed)

    def optional_moment(self, name: str) -> pendulum.DateTime | None:
        return None if self._value.get(name) is None else self.moment(name)

    def texts(self, name: str) -> tuple[str, ...]:
        """A list of strings; ``()`` when the field is absent or null."""
        found = self._value.get(name) or []
        if not isinstance(found, list) or not all(isinstance(item, str) for item in found):
            raise self._wrong(name, "a list of strings")
        return tuple(found)

    def item(self, name: str) -> AnswerObject:
        return AnswerObject(self._value.get(name), f"{self._where}.{name}")

    def optional_item(self, name: str) -> AnswerObject | None:
        return None if self._value.get(name) is None else self.item(name)

    def items(self, name: str) -> list[AnswerObject]:
        found = self._value.get(name)
        if not isinstance(found, list):
            raise self._wrong(name, "a list")
        return [AnswerObject(each, f"{name}[{index}]") for index, each in enumerate(found)]

    def _wrong(self, name: str, kind: str) -> ValueError:
        found = self._value.get(name, "nothing")
        return ValueError(f"{self._where}.{name} is not {kind}: {_shown(found)}")


def aware(value: datetime) -> pendulum.DateTime:
    """A time the API sent, in UTC; one without a timezone is refused, never guessed."""
    if value.tzinfo is None:
        raise AirflowApiError(f"the API sent a time without a timezone: {value.isoformat()}")
    # built field by field: ``pendulum.instance(...).in_timezone("UTC")`` gives the same
    # DateTime but costs about ten times as much, and a pool's read converts thousands
    utc = value.astimezone(timezone.utc)
    return pendulum.DateTime(
        utc.year, utc.month, utc.day, utc.hour, utc.minute, utc.second, utc.microsecond,
        tzinfo=pendulum.UTC,
    )  # fmt: skip


def _shown(value: object) -> str:
    return safe_text(repr(value), limit=100)
