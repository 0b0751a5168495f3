"""A department as the page shows it: one row per table, a summary line, and the page of rows asked for.

A view is built once per listing (the listing is cached and shared, see :mod:`.cache`):
each table's state, its last import and the order are worked out then. A request only
filters and slices, and only the rows it returns are turned into JSON, so a department of
10,000 tables costs a viewer one page of rows, not 10,000. Each table is read through
:class:`~airflow_tables.model.TableSummary` (the only reader of the service's field names);
its state, the state's words and the order come from :class:`~airflow_tables.model.TableStatus`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import quote

from airflow_tables.links import table_url
from airflow_tables.model import TableStatus, TableSummary
from airflow_tables.plugins.models import LISTED, Connector, ImportedBy, StateCounts, TableRow, TablesPage

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence
    from typing import Any

    from airflow_tables.plugins.events import LastImport
    from airflow_tables.plugins.models import ConnectionInfo, Credits

DEFAULT_REFRESH_SECONDS = 30.0
MAX_PAGE = 500


class ListedTable(NamedTuple):
    """One table of a listing, read once (its summary, hence its state) with Airflow's last import of it."""

    summary: TableSummary
    state: TableStatus
    last: LastImport | None

    def matches(self, needle: str) -> bool:
        """Whether a case-folded text is in the CardID, the name or the importing DAG's id."""
        return (
            needle in self.summary.card_id.casefold()
            or needle in (self.summary.name or "").casefold()
            or (self.last is not None and needle in self.last.dag_id.casefold())
        )


@dataclass(frozen=True)
class DepartmentView:
    """One department of one connection, built from one listing; ``error`` when it could not be listed."""

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

    @property
    def being_read(self) -> bool:
        return self.counts.get(TableStatus.BEING_READ.value, 0) > 0

    def row(self, table: ListedTable) -> TableRow:
        return table_row(
            table.summary, table.last, project_id=self.project_id, app_url=self.app_url, base_path=self.base_path
        )

    def find(self, card_id: str) -> TableRow | None:
        """The row of one table, or ``None`` when the listing does not hold it."""
        found = next((table for table in self.tables if table.summary.card_id == card_id), None)
        return None if found is None else self.row(found)


def imported_by(base_path: str, last: LastImport) -> ImportedBy:
    """The task instance that last imported a table, with the Airflow UI's pages of its run and of itself."""
    run = f"{base_path}/dags/{quote(last.dag_id, safe='')}/runs/{quote(last.run_id, safe='')}"
    task = f"{run}/tasks/{quote(last.task_id, safe='')}"
    if last.map_index >= 0:
        task += f"/mapped/{last.map_index}"
    return ImportedBy(
        dag_id=last.dag_id,
        task_id=last.task_id,
        run_id=last.run_id,
        map_index=last.map_index,
        at=last.timestamp,
        run_link=run,
        task_link=task,
    )


def table_row(
    summary: TableSummary, last: LastImport | None, *, project_id: str, app_url: str | None, base_path: str
) -> TableRow:
    """One table as the page shows it: what the service says of it, its state in words, and Airflow's last import."""
    state, source = summary.status, summary.connector_source
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
        last=None if last is None else imported_by(base_path, last),
    )


def build_view(
    info: ConnectionInfo,
    project_id: str,
    cards: Iterable[Mapping[str, Any]],
    last_imports: Mapping[str, LastImport],
    credits: Credits | None,
    *,
    base_path: str,
) -> DepartmentView:
    """Tables read once, sorted for attention (by :attr:`TableStatus.rank`, newest first within each), and counted."""
    summaries = [TableSummary.from_json(card) for card in cards]
    tables = [ListedTable(s, s.status, last_imports.get(s.card_id)) for s in summaries]
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
    )


def page_of(
    view: DepartmentView,
    *,
    state: str | None = None,
    text: str | None = None,
    offset: int = 0,
    limit: int = 100,
    refresh_seconds: float = DEFAULT_REFRESH_SECONDS,
) -> TablesPage:
    """The part of a department one request asks for: filtered by state and text, then one page of rows."""
    matching: Sequence[ListedTable] = view.tables
    if state:
        matching = [table for table in matching if table.state.value == state]
    if text:
        needle = text.casefold()
        matching = [table for table in matching if table.matches(needle)]
    offset = max(0, offset)
    limit = min(max(1, limit), MAX_PAGE)
    return TablesPage(
        conn_id=view.conn_id,
        project_id=view.project_id,
        service=view.service,
        error=view.error,
        as_of=view.built_at,
        refresh_seconds=refresh_seconds,
        counts=StateCounts(**view.counts),
        credits=view.credits,
        being_read=view.being_read,
        total=len(view.tables),
        matching=len(matching),
        offset=offset,
        limit=limit,
        rows=[view.row(table) for table in matching[offset : offset + limit]],
    )


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
