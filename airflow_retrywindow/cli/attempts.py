"""Retry budgets across systems, and the attempts a retry policy lays out.

Systems count a retry budget differently. Airflow ``retries``, Cloud Workflows
``max_retries`` and AWS Step Functions ``MaxAttempts`` count only the repeats;
the model's ``maxAttempts`` and Temporal's ``maximum_attempts`` count every run,
the first included. So ``max_retries=3`` allows 4 runs and ``maxAttempts=3``
allows 3. Translating through :class:`AttemptLimit` keeps the count honest.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_retrywindow.exceptions import InvalidAttemptLimit
from airflow_retrywindow.model.bounds import MAX_ATTEMPTS
from airflow_retrywindow.model.rules import backoff_delay


@dataclass(frozen=True)
class Convention:
    """How one system spells and counts a retry budget.

    :param system: the system, e.g. ``Airflow``.
    :param setting: the setting's name in that system, e.g. ``retries``.
    :param counts_first_run: whether the number includes the first run.
    :param note: anything else about the number worth knowing.
    :param unlimited_at_zero: whether 0 means no limit at all.
    """

    system: str
    setting: str
    counts_first_run: bool
    note: str = ""
    unlimited_at_zero: bool = False

    def value(self, runs: int) -> int:
        """The setting's value for a budget of ``runs`` runs in total.

        :param runs: total runs, the first included.
        """
        return runs if self.counts_first_run else runs - 1

    def runs(self, value: int) -> int:
        """The total runs that the setting's ``value`` allows.

        :param value: the setting's value.
        """
        return value if self.counts_first_run else value + 1


AIRFLOW = Convention("Airflow", "retries", counts_first_run=False)
WORKFLOWS = Convention("Cloud Workflows", "max_retries", counts_first_run=False)
MODEL = Convention(
    "retry-window model", "maxAttempts", counts_first_run=True, note=f"1 to {MAX_ATTEMPTS}"
)
STEP_FUNCTIONS = Convention(
    "AWS Step Functions", "MaxAttempts", counts_first_run=False, note="0 = never retry"
)
TEMPORAL = Convention(
    "Temporal",
    "maximum_attempts",
    counts_first_run=True,
    note="0 = unlimited",
    unlimited_at_zero=True,
)
CONVENTIONS = (AIRFLOW, WORKFLOWS, MODEL, STEP_FUNCTIONS, TEMPORAL)


@dataclass(frozen=True)
class PlannedAttempt:
    """One attempt of a retry sequence, in seconds from the first attempt's start.

    :param number: 1 for the first run, 2 for the first retry, and so on.
    :param wait: the backoff before it; 0 for the first run.
    :param start: when it starts.
    :param end: when it ends, given the assumed duration of each attempt.
    """

    number: int
    wait: int
    start: int
    end: int


@dataclass(frozen=True)
class AttemptLimit:
    """How many times a task may run in total, the first run included.

    :param runs: total runs allowed, 1 or more.
    """

    runs: int

    def __post_init__(self) -> None:
        if type(self.runs) is not int or self.runs < 1:
            raise InvalidAttemptLimit(f"a budget needs at least 1 run, got {self.runs!r}")

    @classmethod
    def from_setting(cls, convention: Convention, value: int) -> AttemptLimit:
        """The budget that one system's setting describes.

        :param convention: the system and setting.
        :param value: the setting's value.
        :raises InvalidAttemptLimit: if the value allows no run or no finite budget.
        """
        if convention.unlimited_at_zero and type(value) is int and value == 0:
            raise InvalidAttemptLimit(
                f"{convention.system} {convention.setting} 0 means unlimited attempts, which "
                "cannot be planned or checked against a deadline; give the total number of runs"
            )
        lowest = 1 if convention.counts_first_run else 0
        if type(value) is not int or value < lowest:
            raise InvalidAttemptLimit(
                f"{convention.system} {convention.setting} must be a whole number of at least "
                f"{lowest}, got {value!r}"
            )
        return cls(convention.runs(value))

    @classmethod
    def from_airflow_retries(cls, retries: int) -> AttemptLimit:
        """The budget of an Airflow task's ``retries`` (the first run not counted).

        :param retries: the task's ``retries``.
        """
        return cls.from_setting(AIRFLOW, retries)

    @classmethod
    def from_workflows_max_retries(cls, max_retries: int) -> AttemptLimit:
        """The budget of a Cloud Workflows ``max_retries`` (the first run not counted).

        :param max_retries: the retry policy's ``max_retries``.
        """
        return cls.from_setting(WORKFLOWS, max_retries)

    @classmethod
    def from_max_attempts(cls, max_attempts: int) -> AttemptLimit:
        """The budget of the model's ``maxAttempts`` (every run counted).

        :param max_attempts: the policy's ``maxAttempts``.
        """
        return cls.from_setting(MODEL, max_attempts)

    @classmethod
    def from_step_functions_max_attempts(cls, max_attempts: int) -> AttemptLimit:
        """The budget of an AWS Step Functions retrier's ``MaxAttempts``.

        It counts retries only: ``MaxAttempts`` 3 allows 4 runs, 0 allows one.

        :param max_attempts: the retrier's ``MaxAttempts``.
        """
        return cls.from_setting(STEP_FUNCTIONS, max_attempts)

    @classmethod
    def from_temporal_maximum_attempts(cls, maximum_attempts: int) -> AttemptLimit:
        """The budget of a Temporal retry policy's ``maximum_attempts`` (every run counted).

        :param maximum_attempts: the policy's ``maximum_attempts``; 0 (unlimited)
            is refused, since an unlimited budget cannot be planned.
        """
        return cls.from_setting(TEMPORAL, maximum_attempts)

    @property
    def retries(self) -> int:
        """The repeats after the first run."""
        return self.runs - 1

    @property
    def airflow_retries(self) -> int:
        """Airflow's ``retries`` for this budget."""
        return AIRFLOW.value(self.runs)

    @property
    def workflows_max_retries(self) -> int:
        """Cloud Workflows' ``max_retries`` for this budget."""
        return WORKFLOWS.value(self.runs)

    @property
    def max_attempts(self) -> int:
        """The model's ``maxAttempts`` for this budget; see :attr:`fits_model`."""
        return MODEL.value(self.runs)

    @property
    def step_functions_max_attempts(self) -> int:
        """AWS Step Functions' ``MaxAttempts`` for this budget."""
        return STEP_FUNCTIONS.value(self.runs)

    @property
    def temporal_maximum_attempts(self) -> int:
        """Temporal's ``maximum_attempts`` for this budget."""
        return TEMPORAL.value(self.runs)

    @property
    def fits_model(self) -> bool:
        """Whether the model can express this budget (1 to 10 runs)."""
        return self.runs <= MAX_ATTEMPTS

    def model_max_attempts(self) -> int:
        """The model's ``maxAttempts``, refusing a budget the model cannot express.

        :raises InvalidAttemptLimit: if the budget has more than 10 runs.
        """
        if not self.fits_model:
            raise InvalidAttemptLimit(
                f"{self.runs} runs ({self.retries} retries) do not fit the model, which "
                f"allows {MAX_ATTEMPTS} runs at most ({MAX_ATTEMPTS - 1} retries)"
            )
        return self.max_attempts

    def sequence(
        self, *, initial_delay: int, max_delay: int, multiplier: int, duration: int = 0
    ) -> tuple[PlannedAttempt, ...]:
        """Lay out every run of the budget under the model's capped exponential backoff.

        With ``duration`` 0 every attempt is taken to fail at once, so the offsets
        count from the first attempt's failure.

        :param initial_delay: the wait after the first attempt, 1 or more seconds.
        :param max_delay: the cap on any wait, at least ``initial_delay``.
        :param multiplier: how much each wait grows, 1 or more.
        :param duration: how long each attempt is assumed to run, 0 or more seconds.
        :raises InvalidAttemptLimit: if a delay, the multiplier or the duration is out of range.
        """
        _at_least(initial_delay, "initial delay", 1)
        _at_least(max_delay, "max delay", initial_delay)
        _at_least(multiplier, "multiplier", 1)
        _at_least(duration, "duration", 0)
        planned = [PlannedAttempt(1, 0, 0, duration)]
        for number in range(2, self.runs + 1):
            wait = backoff_delay(
                number - 1, initial_delay=initial_delay, max_delay=max_delay, multiplier=multiplier
            )
            start = planned[-1].end + wait
            planned.append(PlannedAttempt(number, wait, start, start + duration))
        return tuple(planned)


def _at_least(value: int, name: str, lowest: int) -> None:
    if type(value) is not int or value < lowest:
        raise InvalidAttemptLimit(
            f"the {name} must be a whole number of at least {lowest}, got {value!r}"
        )
