"""The "Open table" button on import and replace tasks, and the URL it points at.

Airflow 3 shows an extra link from the XCom stored under the link's ``xcom_key``, which the
worker writes when the task ends (from :meth:`DataTablesTableLink.get_link`). The operators
push the URL there themselves before they wait for the table to be read, so the button works
while the task is still waiting.
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
        # Called on the worker when the task ends, which stores the answer under xcom_key. The
        # operator pushed the URL before waiting; the one that ran the try knows it (one request
        # to the API server fewer per task), one resumed in another process reads it back.
        published = getattr(operator, "published_url", None)
        url = published() if callable(published) else None
        if url is not None:
            return url
        from airflow.sdk.execution_time.xcom import XCom

        return XCom.get_value(ti_key=ti_key, key=self.xcom_key) or ""
