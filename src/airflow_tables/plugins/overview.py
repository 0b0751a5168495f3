"""A department as the page shows it: one row per table, a summary line, and the page of rows asked for.

A view is built once per listing (the listing is cached and shared, see :mod:`.cache`):
each table's state, its last import and the order are worked out then. A request only
filters and slices, and only the rows it returns are turned into JSON, so a department of
10,000 tables costs a viewer one page of rows, not 10,000. Each table is read through
:class:`~airflow_tables.model.TableSummary` (the only reader of the service's field names);
its state, the state's words and the order come from :class:`~airflow_tables.model.TableStatus`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import quote, urlencode

from airflow_tables.links import table_url
from airflow_tables.model import TableDetail, TableStatus, TableSummary
from airflow_tables.plugins.events import Import, Schedule, size_of
from airflow_tables.plugins.models import (
    LISTED,
    ColumnInfo,
    Connector,
    Freshness,
    ImportedBy,
    StateCounts,
    TableRow,
    TablesPage,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from typing import Any

    from airflow_tables.plugins.models import ConnectionInfo, Credits

DEFAULT_REFRESH_SECONDS = 30.0
DEFAULT_UI_TIMEOUT = 2.0
MAX_PAGE = 500
#: A table is stale once older than this many intervals of its importing DAG's schedule.
STALE_INTERVALS = 2
PAGE_PATH = "/datatables/"


class Details:
    """Tables' fetched details (description, columns) by connection, department and CardID, shared.

    Filled by the table pages people open and, a few per listing, in the background (fetches
    are free): column search and the reasons of failed reads come from here. A detail is
    replaced when its table's completion time moves (a new read may change the columns).
    """

    def __init__(self, max_entries: int = 200_000) -> None:
        self._by_card: dict[tuple[str, str, str], TableDetail] = {}
        self._counts: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self.max_entries = max_entries

    def get(self, conn_id: str, project_id: str, card_id: str) -> TableDetail | None:
        return self._by_card.get((conn_id, project_id, card_id))

    def put(self, conn_id: str, project_id: str, detail: TableDetail) -> None:
        with self._lock:
            if len(self._by_card) >= self.max_entries:
                self._by_card.clear()  # rare: many departments for a long time; refilled as pages are read
                self._counts.clear()
            key = (conn_id, project_id, detail.card_id)
            if key not in self._by_card:
                self._counts[(conn_id, project_id)] = self._counts.get((conn_id, project_id), 0) + 1
            self._by_card[key] = detail

    def current(self, conn_id: str, project_id: str, summary: TableSummary) -> TableDetail | None:
        """The detail held for a table, if it was fetched after its latest read."""
        detail = self.get(conn_id, project_id, summary.card_id)
        if detail is None or detail.completion_time != summary.completion_time:
            return None
        return detail

    def count(self, conn_id: str, project_id: str) -> int:
        return self._counts.get((conn_id, project_id), 0)


class ListedTable(NamedTuple):
    """One table of a listing, read once (its summary, hence its state) with Airflow's last import of it."""

    summary: TableSummary
    state: TableStatus
    last: Import | None
    freshness: Freshness = Freshness()

    def matches(self, needle: str, columns: str = "") -> bool:
        """Whether a case-folded text is in the CardID, the name, the importing DAG's id or a column's name."""
        return (
            needle in self.summary.card_id.casefold()
            or needle in (self.summary.name or "").casefold()
            or (self.last is not None and needle in self.last.dag_id.casefold())
            or needle in columns
        )


def _sort_text(value: str | None) -> tuple[bool, str]:
    return (value is None or value == "", (value or "").casefold())


#: How each sortable column orders tables (a missing value last, in either direction of the text).
SORT_KEYS: dict[str, Callable[[ListedTable], Any]] = {
    "card_id": lambda t: t.summary.card_id,
    "name": lambda t: _sort_text(t.summary.name),
    "rows": lambda t: -1 if t.summary.rows is None else t.summary.rows,
    "state": lambda t: t.state.rank,
    "completed": lambda t: t.summary.completion_time or "",
    "last_import": lambda t: float("-inf") if t.last is None else t.last.at.timestamp(),
    "domain": lambda t: _sort_text(t.summary.domain),
}


@dataclass(frozen=True)
class DepartmentView:
    """One department of one connection, built from one listing; ``error`` when it could not be listed.

    After a failed listing the view keeps the last listing's tables (``built_at`` its time)
    with the error and when it happened (``error_at``): the page shows both.
    """

    conn_id: str
    project_id: str
    tables: tuple[ListedTable, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)
    credits: Credits | None = None
    error: str | None = None
    service: str | None = None
    app_url: str | None = None
    base_path: str = ""
    built_at: float = field(default_factory=time.time)
    error_at: float | None = None
    listed: bool = False
    details: Details | None = None
    _orders: dict[str, tuple[ListedTable, ...]] = field(default_factory=dict, compare=False, repr=False)

    @property
    def being_read(self) -> bool:
        return self.counts.get(TableStatus.BEING_READ.value, 0) > 0

    def detail(self, table: ListedTable) -> TableDetail | None:
        return None if self.details is None else self.details.current(self.conn_id, self.project_id, table.summary)

    def columns_text(self, table: ListedTable) -> str:
        detail = self.detail(table)
        return "" if detail is None else "\n".join((c.name or "").casefold() for c in detail.columns)

    def row(self, table: ListedTable) -> TableRow:
        detail = self.detail(table)
        reason = detail.description or "" if detail is not None and table.state is TableStatus.FAILED else ""
        return table_row(
            table,
            project_id=self.project_id,
            conn_id=self.conn_id,
            app_url=self.app_url,
            base_path=self.base_path,
            reason=reason,
        )

    def table(self, card_id: str) -> ListedTable | None:
        return next((table for table in self.tables if table.summary.card_id == card_id), None)

    def find(self, card_id: str) -> TableRow | None:
        """The row of one table, or ``None`` when the listing does not hold it."""
        found = self.table(card_id)
        return None if found is None else self.row(found)

    def ordered(self, sort: str, desc: bool) -> Sequence[ListedTable]:
        """The tables in a column's order, sorted once per listing (a stable sort: ties keep attention order)."""
        if sort not in SORT_KEYS:
            return tuple(reversed(self.tables)) if desc else self.tables
        name = f"{sort}:{desc}"
        if name not in self._orders:
            self._orders[name] = tuple(sorted(self.tables, key=SORT_KEYS[sort], reverse=desc))
        return self._orders[name]

    def version(self) -> str:
        """Changes when what a viewer sees may change: a new listing, an error, more details read."""
        known = 0 if self.details is None else self.details.count(self.conn_id, self.project_id)
        return f"{self.built_at:.6f}-{self.error_at or 0:.6f}-{known}"


def imported_by(base_path: str, found: Import) -> ImportedBy:
    """A task instance that imported a table, with the Airflow UI's pages of its run and of itself."""
    run = f"{base_path}/dags/{quote(found.dag_id, safe='')}/runs/{quote(found.run_id, safe='')}"
    task = f"{run}/tasks/{quote(found.task_id, safe='')}"
    if found.map_index >= 0:
        task += f"/mapped/{found.map_index}"
    return ImportedBy(
        dag_id=found.dag_id,
        task_id=found.task_id,
        run_id=found.run_id,
        map_index=found.map_index,
        at=found.at,
        run_link=run,
        task_link=task,
        outcome=found.outcome,  # type: ignore[arg-type]  # one of models.Outcome, set in events.py
        task_state=found.task_state,
        credits=found.credits,
        fingerprint=found.fingerprint,
        size=size_of(found.fingerprint),
        bad_rows=found.bad_rows,
        rejects=found.rejects,
    )


def page_link(base_path: str, conn_id: str, project_id: str, card_id: str) -> str:
    """The table's page on this api-server."""
    query = urlencode({"conn_id": conn_id, "project_id": project_id, "card_id": card_id})
    return f"{base_path}{PAGE_PATH}?{query}"


def table_row(
    table: ListedTable,
    *,
    project_id: str,
    conn_id: str,
    app_url: str | None,
    base_path: str,
    reason: str = "",
) -> TableRow:
    """One table as the page shows it: what the service says of it, its state in words, and Airflow's last import."""
    summary, state = table.summary, table.state
    source = summary.connector_source
    return TableRow(
        card_id=summary.card_id,
        name=summary.name,
        rows=summary.rows,
        state=state,
        state_label=state.label,
        completed=summary.completion_time,
        locked=summary.locked_from_delete is True,
        connector=Connector(source=source, status=summary.connector_status) if source else None,
        app_link=table_url(app_url, project_id, summary.card_id),
        last=None if table.last is None else imported_by(base_path, table.last),
        domain=summary.domain or "",
        reason=reason,
        freshness=table.freshness,
        page_link=page_link(base_path, conn_id, project_id, summary.card_id),
    )


def _completed_at(summary: TableSummary) -> datetime | None:
    text = summary.completion_time
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}".replace(".0 ", " ")
    return f"{seconds:.0f} s"


def freshness_of(summary: TableSummary, last: Import | None, schedule: Schedule | None, now: datetime) -> Freshness:
    """Stale: the importing DAG runs on a schedule and the table's last read is older than two of its intervals."""
    if last is None or schedule is None or schedule.interval is None:
        return Freshness()
    completed = _completed_at(summary)
    if completed is None:
        return Freshness(interval_seconds=schedule.interval)
    age = (now - completed).total_seconds()
    if age <= STALE_INTERVALS * schedule.interval:
        return Freshness(interval_seconds=schedule.interval)
    reason = (
        f"last read {_duration(age)} ago; DAG {last.dag_id} is scheduled every {_duration(schedule.interval)} "
        f"({schedule.summary}), so a read was expected within {_duration(STALE_INTERVALS * schedule.interval)}"
    )
    return Freshness(stale=True, reason=reason, interval_seconds=schedule.interval)


def latest(*imports: Import | None) -> Import | None:
    """The newest of some imports (``None`` when there is none)."""
    present = [found for found in imports if found is not None]
    return max(present, key=lambda found: found.at) if present else None


def build_view(
    info: ConnectionInfo,
    project_id: str,
    summaries: Iterable[TableSummary],
    last_imports: Mapping[str, Import],
    credits: Credits | None,
    *,
    base_path: str,
    schedules: Mapping[str, Schedule] | None = None,
    details: Details | None = None,
    now: datetime | None = None,
) -> DepartmentView:
    """Tables read once, sorted for attention (by :attr:`TableStatus.rank`, newest first within each), and counted."""
    now = now or datetime.now(UTC)
    schedules = schedules or {}
    tables = []
    for summary in summaries:
        last = last_imports.get(summary.card_id)
        schedule = None if last is None else schedules.get(last.dag_id)
        tables.append(ListedTable(summary, summary.status, last, freshness_of(summary, last, schedule, now)))
    tables.sort(key=lambda table: table.summary.completion_time or "", reverse=True)
    tables.sort(key=lambda table: table.state.rank)
    counts = dict.fromkeys((status.value for status in LISTED), 0)
    for table in tables:
        counts[table.state.value] += 1
    return DepartmentView(
        info.conn_id,
        project_id,
        tuple(tables),
        counts,
        credits,
        service=info.service,
        app_url=info.app_url,
        base_path=base_path,
        listed=True,
        details=details,
    )


def page_of(
    view: DepartmentView,
    *,
    state: str | None = None,
    text: str | None = None,
    offset: int = 0,
    limit: int = 100,
    sort: str = "attention",
    desc: bool = False,
    refresh_seconds: float = DEFAULT_REFRESH_SECONDS,
    pending: bool = False,
) -> TablesPage:
    """The part of a department one request asks for: filtered by state and text, sorted, one page of rows."""
    matching: Sequence[ListedTable] = view.ordered(sort, desc)
    if state:
        matching = [table for table in matching if table.state.value == state]
    if text:
        needle = text.casefold()
        matching = [table for table in matching if table.matches(needle, view.columns_text(table))]
    offset = max(0, offset)
    limit = min(max(1, limit), MAX_PAGE)
    return TablesPage(
        conn_id=view.conn_id,
        project_id=view.project_id,
        service=view.service,
        error=view.error,
        as_of=view.built_at,
        refresh_seconds=refresh_seconds,
        version=view.version(),
        error_at=view.error_at,
        pending=pending,
        columns_known=0 if view.details is None else view.details.count(view.conn_id, view.project_id),
        counts=StateCounts(**view.counts),
        credits=view.credits,
        being_read=view.being_read,
        total=len(view.tables),
        matching=len(matching),
        offset=offset,
        limit=limit,
        sort=sort,  # type: ignore[arg-type]  # checked by the route (models.SortKey)
        desc=desc,
        rows=[view.row(table) for table in matching[offset : offset + limit]],
    )


def column_infos(detail: TableDetail) -> list[ColumnInfo]:
    """A fetched table's columns as the page shows them (no ``None``: an absent text is empty)."""
    return [
        ColumnInfo(name=c.name or "", data_type=c.data_type or "", description=c.description or "")
        for c in detail.columns
    ]


def describe_failure(err: BaseException, project_id: str) -> str:
    """Why a department could not be listed, in a sentence for the page (the hook already scrubbed the key)."""
    from airflow_tables.exceptions import DataTablesError

    if not isinstance(err, DataTablesError):
        if isinstance(err, ValueError):
            return str(err)
        return f"listing department {project_id} failed ({type(err).__name__})"
    status, msg = err.status_code, err.msg or "no message"
    if status is None:
        return f"the service did not answer: {msg}"
    if status == 401:
        return f"the service refused the connection's API key (HTTP 401): {msg}"
    if status == 403:
        return f"the API key may not read department {project_id} (HTTP 403): {msg}"
    if status == 404:
        return f"the service knows no department {project_id} (HTTP 404): {msg}"
    return f"the service answered HTTP {status}: {msg}"
