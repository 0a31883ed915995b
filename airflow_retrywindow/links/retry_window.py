"""The gate's and the sensor's extra link: a button to their Retry window tab.

Airflow 3 computes an operator's extra links in the worker when the task
finishes and keeps them in XCom; the UI shows them as buttons on the task
instance. The address starts from ``[retry_window] view_base_url``, or
``[api] base_url`` when that is unset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow.sdk import BaseOperatorLink

from airflow_retrywindow.configuration import view_base_url
from airflow_retrywindow.links.addresses import ui_task_tab

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey


class RetryWindowLink(BaseOperatorLink):
    """Opens the task instance's Retry window tab: its decision record, timelines and fixtures."""

    name = "Retry window"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        """The UI address of the task instance's Retry window tab.

        :param operator: the gate or the sensor.
        :param ti_key: the task instance.
        """
        # [retry_window] view_base_url, else [api] base_url, else http://localhost:8080/
        return ui_task_tab(
            view_base_url(), ti_key.dag_id, ti_key.run_id, ti_key.task_id, ti_key.map_index
        )
