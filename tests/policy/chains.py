"""``ChainRetryPolicy`` as a DAG author imports it on Airflow 3.3, or a skip saying why not.

The backport arrived in ``apache-airflow-providers-common-compat`` 1.23.0, which the
constraints pin on Python 3.11 and later; on 3.10 the modules that need it skip.
"""

from __future__ import annotations

from typing import Any

import pytest


def chain_class() -> Any:
    """The ``ChainRetryPolicy`` of ``airflow.providers.common.compat.sdk``; skips the module
    when the installed common.compat has none."""
    try:
        from airflow.providers.common.compat.sdk import ChainRetryPolicy
    except (ImportError, AttributeError):
        pytest.skip(
            "ChainRetryPolicy needs apache-airflow-providers-common-compat 1.23.0 or later "
            "(Python 3.11+ in constraints.txt)",
            allow_module_level=True,
        )
    return ChainRetryPolicy
