"""Where the Retry window view lives: its mount point, its UI tabs, its links.

The API server mounts the view under :data:`MOUNT`. The UI shows it as a tab
(an iframe) on every task instance and every DAG run; Airflow fills the
``{DAG_ID}``, ``{RUN_ID}``, ``{TASK_ID}`` and ``{MAP_INDEX}`` placeholders of the
tab's address. Nothing here imports Airflow.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, urlsplit

#: where the API server mounts the view (a FastAPI sub-application)
MOUNT = "/retry-window"
#: the UI's tab on a task instance: ``.../tasks/<task>/plugin/<TASK_TAB>``
TASK_TAB = "retry-window"
#: the UI's tab on a DAG run: ``.../runs/<run>/plugin/<RUN_TAB>``
RUN_TAB = "retry-window-run"
#: what the UI puts in the address when a task instance is not mapped: it leaves
#: the placeholder as it is
MAP_INDEX_PLACEHOLDER = "{MAP_INDEX}"

TASK_VIEW_HREF = (
    MOUNT + "/dags/{DAG_ID}/runs/{RUN_ID}/tasks/{TASK_ID}?map_index=" + MAP_INDEX_PLACEHOLDER
)
RUN_VIEW_HREF = MOUNT + "/dags/{DAG_ID}/runs/{RUN_ID}"


def under_base(base_url: str, path: str) -> str:
    """``path`` under the path of Airflow's base address (``[api] base_url``).

    The UI loads a tab's address as it is given, so a deployment under a path
    prefix (``https://host/airflow/``) needs the prefix in the address.
    """
    return urlsplit(base_url).path.rstrip("/") + path


def segment(value: str) -> str:
    """``value`` as one path segment of an address."""
    return quote(value, safe="")


def ui_task_tab(base_url: str, dag_id: str, run_id: str, task_id: str, map_index: int) -> str:
    """The UI address of a task instance's Retry window tab.

    :param base_url: the UI's base address (``[api] base_url``).
    :param dag_id: the DAG.
    :param run_id: the DAG run.
    :param task_id: the task.
    :param map_index: its map index (-1 when not mapped).
    """
    mapped = f"/mapped/{map_index}" if map_index >= 0 else ""
    return (
        f"{base_url.rstrip('/')}/dags/{segment(dag_id)}/runs/{segment(run_id)}"
        f"/tasks/{segment(task_id)}{mapped}/plugin/{TASK_TAB}"
    )


@dataclass(frozen=True)
class ViewLinks:
    """The view's own addresses for one DAG run, under the path it is served at.

    :param root: the view's path as the browser sees it, e.g. ``/retry-window``.
    :param dag_id: the DAG.
    :param run_id: the DAG run.
    """

    root: str
    dag_id: str
    run_id: str

    @property
    def run(self) -> str:
        """The DAG run's view."""
        return f"{self.root}/dags/{segment(self.dag_id)}/runs/{segment(self.run_id)}"

    def task(self, task_id: str, map_index: int) -> str:
        """A task instance's view."""
        return f"{self.run}/tasks/{segment(task_id)}?map_index={map_index}"

    def fixture(self, task_id: str, map_index: int, name: str) -> str:
        """A stored fixture, as JSON (``name`` as in :class:`~.decision_rows.Replay`)."""
        return f"{self.run}/tasks/{segment(task_id)}/fixtures/{name}.json?map_index={map_index}"
