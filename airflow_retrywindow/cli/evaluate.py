"""``evaluate``: print the model's JSON result for a fixture."""

from __future__ import annotations

import json

from airflow_retrywindow.cli.streams import UnreadableInputError, emit, load, refuse
from airflow_retrywindow.model import InvalidFixture, evaluate


def run(path: str) -> int:
    """Evaluate the fixture at ``path`` and print the result as one JSON line.

    :param path: a file name, or ``-`` for standard input.
    :returns: 0 when evaluated, 2 when the input was refused.
    """
    try:
        result = evaluate(load(path))
    except UnreadableInputError as error:
        return refuse(error.reason)
    except InvalidFixture as error:
        return refuse(str(error))
    return emit(json.dumps(result, sort_keys=True) + "\n")
