"""The "Open table" button on import and replace tasks, and the URL it points at.

Airflow 3 shows an extra link from the XCom stored under the link's ``xcom_key``. The
operators push the URL there themselves as soon as the service has accepted the file,
so the button works while the task is still waiting for the table to be read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

from airflow.sdk import BaseOperatorLink

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from airflow.sdk.types import TaskInstanceKey

#: The XCom key under which an import or replace task pushes its table's CardID as soon as the
#: service accepted the file (besides ``return_value``): what the link's URL is built from, and
#: what the Data Tables page reads to find a task's table. Written here once, for the operators
#: that push it and the plugin that reads it.
CARD_ID_XCOM_KEY = "card_id"


def table_url(app_url: str | None, project_id: str, card_id: str) -> str | None:
    """The web application's page of a table: ``{app_url}/projects/{ProjectID}/cards/{CardID}``.

    ``None`` when the connection has no ``app_url`` extra (the button is then hidden).
    """
    if not app_url:
        return None
    return f"{app_url.rstrip('/')}/projects/{quote(project_id, safe='')}/cards/{quote(card_id, safe='')}"


class DataTablesTableLink(BaseOperatorLink):
    """Opens the imported or replaced table in the Data Tables web application."""

    name = "Open table"

    def get_link(self, operator: BaseOperator, *, ti_key: TaskInstanceKey) -> str:
        # Called on the worker when the task ends; the operator pushed the URL before waiting.
        from airflow.sdk.execution_time.xcom import XCom

        return XCom.get_value(ti_key=ti_key, key=self.xcom_key) or ""
