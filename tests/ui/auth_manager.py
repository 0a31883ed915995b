"""An auth manager for the view's authorization test: one user may not read one DAG.

SimpleAuthManager lets every role read every DAG, so a user without access to a
DAG needs a real auth manager that says no. This one is SimpleAuthManager with
one rule added; the API server loads it by its dotted path
(``[core] auth_manager``), like any auth manager.
"""

from __future__ import annotations

from typing import Any

from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager
from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

from tests.ui.people import HIDDEN_DAGS, OUTSIDER


class OneDagHiddenAuthManager(SimpleAuthManager):
    """SimpleAuthManager, except that :data:`OUTSIDER` may not access the :data:`HIDDEN_DAGS`."""

    def is_authorized_dag(
        self, *, method: Any, user: SimpleAuthManagerUser, access_entity: Any = None,
        details: Any = None,
    ) -> bool:  # fmt: skip
        if user.get_name() == OUTSIDER[0] and getattr(details, "id", None) in HIDDEN_DAGS:
            return False
        return super().is_authorized_dag(
            method=method, user=user, access_entity=access_entity, details=details
        )
