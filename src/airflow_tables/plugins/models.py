"""The JSON the page's routes answer, as pydantic models: the page's contract, typed and shown in OpenAPI.

One model per answer (``ConnectionsResponse``, ``TablesPage``, ``TaskTable``) and one per part
of it; the page's code builds these values directly (a connection, the credits), so nothing is
described twice. Field names are the page's own (``card_id``, ``state_label``), never the service's wire
names: rows are built from :class:`airflow_tables.model.TableSummary`, which reads those. States,
their labels and their order come from :class:`airflow_tables.model.TableStatus`, so the scripts
show the label the JSON carries and keep no map of their own.

Imported by the api-server only (through :mod:`.app`); the plugin module that every Airflow
component loads never imports it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from airflow_tables.model import TableStatus

#: The states a listed table can be in (a listed table is never gone), in the order the page sorts
#: them (:attr:`TableStatus.rank`: what needs a look first).
LISTED = tuple(sorted((s for s in TableStatus if s is not TableStatus.GONE), key=lambda status: status.rank))
#: The ``state`` filter's values: the listed states (a test holds the two together).
ListedState = Literal["being_read", "failed", "ready"]


class PageModel(BaseModel):
    """Every answer's base: a value (frozen) with no field it does not declare."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class State(PageModel):
    """One state a table can be in, with the words the page shows for it."""

    state: TableStatus
    label: Annotated[str, Field(description="The state in words (TableStatus.label).")]


class ConnectionInfo(PageModel):
    """A ``datatables`` connection as the page may describe it: never its key (built by :mod:`.connections`)."""

    conn_id: str
    service: Annotated[str | None, Field(description="The service's host (and port).")] = None
    project_id: Annotated[str | None, Field(description="The connection's default department.")] = None
    app_url: Annotated[str | None, Field(description="The service's web application, for links.")] = None
    error: Annotated[str | None, Field(description="Why the connection cannot be used.")] = None


class ConnectionsResponse(PageModel):
    """``GET /api/connections``: the connections the user may read, and the states the page knows."""

    refresh_seconds: Annotated[float, Field(description="How long a department's listing is shared.")]
    connections: list[ConnectionInfo]
    states: Annotated[list[State], Field(description="Every listed state, in the order rows are sorted.")]


class Connector(PageModel):
    """The system that feeds a connector table, and whether it does now."""

    source: str
    status: str | None = None


class ImportedBy(PageModel):
    """The Airflow task instance that last imported or replaced a table, with links into the Airflow UI."""

    dag_id: str
    task_id: str
    run_id: str
    map_index: Annotated[int, Field(description="-1 for an unmapped task.")]
    at: Annotated[datetime, Field(description="When its asset event was recorded.")]
    run_link: str
    task_link: str


class TableRow(PageModel):
    """One table: what the service says of it, its state in words, and Airflow's last import of it."""

    card_id: str
    name: str | None = None
    rows: int | None = None
    state: TableStatus
    state_label: Annotated[str, Field(description="The state in words (TableStatus.label).")]
    completed: Annotated[str | None, Field(description="The service's completion time of the last read.")] = None
    locked: Annotated[bool, Field(description="Locked from delete.")] = False
    connector: Connector | None = None
    app_link: Annotated[str | None, Field(description="The table in the service's web application.")] = None
    last: Annotated[ImportedBy | None, Field(description="None: not imported by Airflow.")] = None


class StateCounts(PageModel):
    """How many of a department's tables are in each state."""

    being_read: int = 0
    failed: int = 0
    ready: int = 0


class Credits(PageModel):
    """Credits that Airflow's recorded imports spent in the department (summed by :mod:`.events`)."""

    today: Annotated[int, Field(description="Since midnight UTC.")]
    last_7_days: int


class TablesPage(PageModel):
    """``GET /api/tables``: one department of one connection, filtered, one page of rows."""

    conn_id: str
    project_id: str
    service: str | None = None
    error: Annotated[str | None, Field(description="Why the department could not be listed.")] = None
    as_of: Annotated[float, Field(description="When the listing was taken (seconds since the epoch).")]
    refresh_seconds: float
    counts: StateCounts
    credits: Credits | None = None
    being_read: Annotated[bool, Field(description="Whether any table is being read (the page then refreshes).")]
    total: Annotated[int, Field(description="Tables in the department.")]
    matching: Annotated[int, Field(description="Tables that match the filters.")]
    offset: int
    limit: int
    rows: list[TableRow]


class TaskTable(PageModel):
    """``GET /api/task``: the table of one import or replace task instance, when one is found."""

    card_id: Annotated[str | None, Field(description="The task's card_id XCom.")] = None
    project_id: str | None = None
    conn_id: Annotated[str | None, Field(description="The connection that lists the table.")] = None
    table: TableRow | None = None
    message: Annotated[str | None, Field(description="Why no table is shown.")] = None
    refresh_seconds: float
