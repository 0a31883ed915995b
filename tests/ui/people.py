"""The users of the view's stack beyond the admin, apart from the auth manager that
knows them (:mod:`tests.ui.auth_manager`), whose import builds Airflow's API server app:
the tests name them without it."""

from __future__ import annotations

#: the user who may read no run, task instance or XCom of the :data:`HIDDEN_DAGS`
OUTSIDER = ("outsider", "outsider-password")
HIDDEN_DAGS = frozenset({"retry_window_example", "retry_window_gate_example"})
