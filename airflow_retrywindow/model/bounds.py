"""Every bound the model puts on a fixture, defined once.

The model checks fixtures against these (:mod:`~airflow_retrywindow.model.validation`);
everything that builds a fixture or translates settings into one (the clock, the
work estimate, Airflow's retry settings, the policy, the command line) imports them
from here, so a value the model would refuse is refused, with the same numbers,
before a fixture is built. Every bound is inclusive.
"""

from __future__ import annotations

import re

#: latest time on the fixture's clock (``asOf``, ``deadline``, ``observedAt``,
#: ``lastFinishedAt``), in seconds from its origin
TIME_LIMIT = 1_000_000_000
#: largest allowed age of an observation (``maxObservationAge``), in seconds
MAX_OBSERVATION_AGE = TIME_LIMIT
#: longest delay (``initialDelay``, ``maxDelay``), ``duration`` or ``validation``, in seconds
DURATION_LIMIT = 1_000_000
#: most attempts in one window, the first run included (``maxAttempts``, ``attempts``)
MAX_ATTEMPTS = 10
#: largest growth factor of the backoff (``multiplier``), a whole number from 1
MAX_MULTIPLIER = 5
#: most tasks in one fixture
MAX_TASKS = 20
#: longest task id
MAX_TASK_ID_LENGTH = 48
#: a valid task id: 1 to ``MAX_TASK_ID_LENGTH`` of ``A-Z a-z 0-9 _ -``
TASK_ID = re.compile(rf"[A-Za-z0-9_-]{{1,{MAX_TASK_ID_LENGTH}}}")
