"""Every error a user of the provider may catch (or raise), in one place.

Each message says what was wrong, which value, and what to do. Nothing here
imports Airflow, so the pure model and the command line can use them too.
"""

from __future__ import annotations

# typing is not imported at run time: the command line raises these, and importing
# typing costs it more than an evaluation
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# -- the model's input --------------------------------------------------------------


class InvalidFixture(ValueError):
    """The fixture cannot be evaluated, so nothing in it was decided.

    :param field: the offending field in the fixture's spelling, e.g. ``maxDelay``.
    :param problem: what is allowed, and what was given.
    :param location: where the field sits, e.g. ``tasks[2] (id 'load')``.
    """

    def __init__(self, field: str, problem: str, location: str = "") -> None:
        if not location:
            text = f"{field} {problem}"
        elif not field:
            text = f"{location} {problem}"
        else:
            text = f"{location}: {field} {problem}"
        super().__init__(text)
        self.field = field
        self.problem = problem
        self.location = location

    def __reduce__(self) -> tuple[type[InvalidFixture], tuple[str, str, str]]:
        return (InvalidFixture, (self.field, self.problem, self.location))

    def at(self, location: str) -> InvalidFixture:
        """The same problem, reported at ``location``.

        :param location: where the offending field sits.
        """
        return InvalidFixture(self.field, self.problem, location)


# -- real time, deadlines and retry settings ---------------------------------------


class ClockError(ValueError):
    """A time cannot be placed on the model's clock.

    :ivar read: when the API server's clock could not be read, how many tries were
        made over how long (a :class:`~airflow_retrywindow.read_retry.ReadCount`).
    """

    read: Any = None


class DeadlineError(ValueError):
    """The deadline cannot be resolved for this run."""


class UnsupportedRetrySettings(ValueError):
    """The task's retry settings cannot be expressed in the model."""


class UnsupportedAirflowVersion(RuntimeError):
    """The installed Airflow lacks what was asked for: a ``RetryWindowPolicy`` needs
    Airflow 3.3's retry policies. The message names the version and what to use instead."""


class InvalidAttemptLimit(ValueError):
    """A retry budget or delay that cannot be used, with the setting and value named."""


# -- what a failed attempt tells the gate (raised by DAG authors) ------------------


class OutcomeUnknown(Exception):
    """The attempt may or may not have taken effect remotely: reconcile before retrying.

    :param message: what was lost, e.g. ``"load job response lost after submission"``.
    :param remote_job_id: the client-chosen id to look the remote job up by, if any.
    """

    def __init__(self, message: str, *, remote_job_id: str | None = None) -> None:
        super().__init__(message)
        self.remote_job_id = remote_job_id


class TerminalFailure(Exception):
    """Repeating the attempt cannot succeed until someone repairs the cause."""


# -- the gate over a DAG run ---------------------------------------------------------


class AirflowApiError(RuntimeError):
    """The REST API could not be read; the message says which request and why."""


class TargetError(ValueError):
    """A target, or what is known about it, cannot be turned into model facts."""


class ObservationError(TargetError):
    """Explicit observations that cannot be used; the message says which and why."""


class BudgetError(ValueError):
    """A budget argument, or a rendered estimate, that cannot be used."""


class RetryWindowGateError(RuntimeError):
    """The gate could not decide, so it refuses: the guarded work must not run."""


# -- notifications -------------------------------------------------------------------


class InvalidNotifier(ValueError):
    """A notifier argument that cannot be used, with the argument and value named."""


# -- the Retry window view -----------------------------------------------------------


class RecordError(ValueError):
    """A stored decision (evidence or a decision record) that the view cannot read.

    :param field: the field in the stored value's spelling, e.g. ``origin``.
    :param value: what was stored there.
    :param problem: what it must be.
    """

    def __init__(self, field: str, value: object, problem: str) -> None:
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        super().__init__(f"{field} {problem}, got {shown}")
        self.field = field
        self.problem = problem
