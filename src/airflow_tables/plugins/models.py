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
#: The columns the page sorts by (``attention``: failed first, then being read, newest first in each).
SortKey = Literal["attention", "card_id", "name", "rows", "state", "completed", "last_import", "domain"]


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


#: What became of an import an Airflow task made: ``recorded`` (read, its asset event recorded),
#: ``failed`` (the task failed after the service accepted the file: a failed read, or an error
#: while waiting), ``running`` (the task still runs or will retry), ``unchanged`` (nothing was
#: sent: the file was what the table held; no credit).
Outcome = Literal["recorded", "failed", "running", "unchanged"]


class ImportedBy(PageModel):
    """An Airflow task instance that imported or replaced a table, with links into the Airflow UI."""

    dag_id: str
    task_id: str
    run_id: str
    map_index: Annotated[int, Field(description="-1 for an unmapped task.")]
    at: Annotated[datetime, Field(description="When its asset event was recorded, or its card_id XCom pushed.")]
    run_link: str
    task_link: str
    outcome: Outcome = "recorded"
    task_state: Annotated[str, Field(description="The task instance's state ('' when unknown).")] = ""
    credits: Annotated[int, Field(description="Credits the import used (0: nothing was sent).")] = 1
    fingerprint: Annotated[str, Field(description="The file's fingerprint ('' when not computed).")] = ""
    size: Annotated[int | None, Field(description="The file's size in bytes, from its fingerprint.")] = None
    bad_rows: Annotated[
        int | None,
        Field(description="Rows on_bad_rows='quarantine' set aside (0: none was bad; None: no quarantine ran)."),
    ] = None
    rejects: Annotated[
        str | None,
        Field(description="Where the rows set aside were written: a local path or a URI, as the task wrote it."),
    ] = None


class Freshness(PageModel):
    """How old a table's data is, and whether that is older than its importing DAG's schedule allows."""

    stale: bool = False
    reason: Annotated[str, Field(description="Why it is stale, or why it cannot be ('' when fresh).")] = ""
    interval_seconds: Annotated[
        float | None, Field(description="The importing DAG's schedule interval, when it has one.")
    ] = None


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
    domain: Annotated[str, Field(description="The service's Domain ('' when it gives none).")] = ""
    reason: Annotated[str, Field(description="The service's Description of a failed read, when read.")] = ""
    freshness: Freshness = Freshness()
    page_link: Annotated[str, Field(description="The table's page here.")] = ""


class StateCounts(PageModel):
    """How many of a department's tables are in each state."""

    being_read: int = 0
    failed: int = 0
    ready: int = 0


class DayCredits(PageModel):
    """Credits Airflow's imports used on one day (UTC)."""

    day: str
    credits: int


class Credits(PageModel):
    """Credits that Airflow's imports spent in the department: every import a task made, read well or not."""

    today: Annotated[int, Field(description="Since midnight UTC.")]
    last_7_days: int
    by_day: Annotated[list[DayCredits], Field(description="The last 7 days (UTC), newest first.")] = []
    budget: Annotated[int | None, Field(description="[datatables] credit_budget for the department, a UTC day.")] = None
    budget_spent: Annotated[
        int | None, Field(description="Credits claimed against the budget today (UTC): the count the budget checks.")
    ] = None
    budget_left: Annotated[int | None, Field(description="What today's budget still allows.")] = None
    budget_error: Annotated[str | None, Field(description="Why today's claims could not be counted.")] = None


class TablesPage(PageModel):
    """``GET /api/tables``: one department of one connection, filtered, one page of rows."""

    conn_id: str
    project_id: str
    service: str | None = None
    error: Annotated[str | None, Field(description="Why the department could not be listed.")] = None
    as_of: Annotated[float, Field(description="When the listing was taken (seconds since the epoch).")]
    refresh_seconds: float
    version: Annotated[str, Field(description="Changes when the listing does (the page's cheap poll).")] = ""
    error_at: Annotated[
        float | None, Field(description="When the service last failed to list (the rows are the last listing).")
    ] = None
    pending: Annotated[bool, Field(description="A listing is being taken in the background.")] = False
    columns_known: Annotated[int, Field(description="Tables whose columns were read (for column search).")] = 0
    counts: StateCounts
    credits: Credits | None = None
    being_read: Annotated[bool, Field(description="Whether any table is being read (the page then refreshes).")]
    total: Annotated[int, Field(description="Tables in the department.")]
    matching: Annotated[int, Field(description="Tables that match the filters.")]
    offset: int
    limit: int
    sort: SortKey = "attention"
    desc: bool = False
    rows: list[TableRow]


class ColumnInfo(PageModel):
    """One column of a table, as the service described it when it read the file."""

    name: str
    data_type: str
    description: str


class TableDetailPage(PageModel):
    """``GET /api/table``: one table, its columns and description, and every import Airflow made of it."""

    conn_id: str
    project_id: str
    card_id: str
    service: str | None = None
    table: Annotated[TableRow | None, Field(description="None when the listing does not hold it.")] = None
    description: str = ""
    columns: list[ColumnInfo] = []
    imports: Annotated[list[ImportedBy], Field(description="Airflow's imports of it, newest first.")] = []
    detail_error: Annotated[str, Field(description="Why the table's details could not be fetched.")] = ""
    as_of: float
    refresh_seconds: float
    message: str = ""


class TaskTable(PageModel):
    """``GET /api/task``: the table of one import or replace task instance, when one is found."""

    card_id: Annotated[str | None, Field(description="The task's card_id XCom.")] = None
    project_id: str | None = None
    conn_id: Annotated[str | None, Field(description="The connection that lists the table.")] = None
    table: TableRow | None = None
    message: Annotated[str | None, Field(description="Why no table is shown.")] = None
    refresh_seconds: float
