"""Evaluate a fixture given as plain JSON values, the way the command line does.

It is the typed model on the decoded JSON: :meth:`Fixture.from_dict` rejects
exactly what the model rejects, :func:`~airflow_retrywindow.model.verdict.decide`
decides, and :meth:`Verdict.to_dict` is the JSON result. There is one path to a
decision.
"""

from __future__ import annotations

from airflow_retrywindow.model.fixture import Fixture
from airflow_retrywindow.model.verdict import decide

# typing itself is not imported at run time: it costs more than an evaluation
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def evaluate(payload: object) -> dict[str, Any]:
    """Decide every task of a fixture and return the model's JSON result.

    The result has ``tasks`` (sorted by id, each with ``id``, ``decision``,
    ``backoff``, ``earliestStart`` and ``estimatedFinish``), ``deadlinePassed``,
    and four flags that are always false because the model only decides:
    ``jobsExecuted``, ``idempotencyProven``, ``completionGuaranteed`` and
    ``productionApproval``.

    :param payload: the decoded fixture.
    :raises InvalidFixture: if anything in the fixture is invalid; nothing is decided then.
    """
    return decide(Fixture.from_dict(payload)).to_dict()
