"""A department as the page shows it: one row per table, a summary line, and the page of rows asked for.

A view is built once per listing (the listing is cached and shared, see :mod:`.cache`):
each table's state, its last import and the order are worked out then. A request only
filters and slices, and only the rows it returns are turned into JSON, so a department of
10,000 tables costs a viewer one page of rows, not 10,000. A table's state in words comes
from :class:`~airflow_tables.model.TableStatus`, nowhere else.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import quote

from airflow_tables.links import table_url
from airflow_tables.model import TableStatus

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from airflow_tables.plugins.connections import ConnectionInfo
    from airflow_tables.plugins.events import Credits, LastImport

STATE_LABELS = {"being_read": "Being read", "failed": "Failed", "ready": "Ready"}
#: Tables that need attention first.
STATE_ORDER = {"being_read": 0, "failed": 1, "ready": 2}
MAX_PAGE = 500


class ListedTable(NamedTuple):
    """One table of a listing, with its state (worked out once) and Airflow's last import of it."""

    card: Mapping[str, Any]
    state: str
    last: LastImport | None

    def matches(self, needle: str) -> bool:
        """Whether a case-folded text is in the CardID, the name or the importing DAG's id."""
        return (
            needle in str(self.card["CardID"]).casefold()
            or needle in str(self.card.get("CardName") or "").casefold()
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
    app_url: str | None = None
    base_path: str = ""
    built_at: float = field(default_factory=time.time)

    @property
    def being_read(self) -> bool:
        return self.counts.get("being_read", 0) > 0

    def row(self, table: ListedTable) -> dict[str, Any]:
        return table_row(
            table.card, table.last, project_id=self.project_id, app_url=self.app_url, base_path=self.base_path
        )

    def find(self, card_id: str) -> dict[str, Any] | None:
        """The row of one table, or ``None`` when the listing does not hold it."""
        found = next((table for table in self.tables if table.card["CardID"] == card_id), None)
        return None if found is None else self.row(found)


def airflow_links(base_path: str, last: LastImport) -> dict[str, str]:
    """The Airflow UI's pages of the run and the task instance that last imported a table."""
    run = f"{base_path}/dags/{quote(last.dag_id, safe='')}/runs/{quote(last.run_id, safe='')}"
    task = f"{run}/tasks/{quote(last.task_id, safe='')}"
    if last.map_index >= 0:
        task += f"/mapped/{last.map_index}"
    return {"run_link": run, "task_link": task}


def table_row(
    card: Mapping[str, Any], last: LastImport | None, *, project_id: str, app_url: str | None, base_path: str
) -> dict[str, Any]:
    """One table, JSON-ready: what the service says of it, its state in words, and Airflow's last import."""
    state = TableStatus.from_summary(card).value
    card_id = str(card["CardID"])
    source = card.get("ConnectorSource")
    row: dict[str, Any] = {
        "card_id": card_id,
        "name": card.get("CardName"),
        "rows": card.get("Rows"),
        "state": state,
        "state_label": STATE_LABELS.get(state, state),
        "completed": card.get("UploadCompletionTime"),
        "locked": card.get("LockedFromDelete") is True,
        "connector": {"source": source, "status": card.get("ConnectorStatus")} if source else None,
        "app_link": table_url(app_url, project_id, card_id),
        "last": None,
    }
    if last is not None:
        row["last"] = {
            "dag_id": last.dag_id,
            "task_id": last.task_id,
            "run_id": last.run_id,
            "map_index": last.map_index,
            "at": last.timestamp.isoformat(),
            **airflow_links(base_path, last),
        }
    return row


def build_view(
    info: ConnectionInfo,
    project_id: str,
    cards: Iterable[Mapping[str, Any]],
    last_imports: Mapping[str, LastImport],
    credits: Credits | None,
    *,
    base_path: str,
) -> DepartmentView:
    """Tables sorted for attention (being read, failed, ready; newest first within each) and the counts."""
    tables = [
        ListedTable(card, TableStatus.from_summary(card).value, last_imports.get(str(card["CardID"]))) for card in cards
    ]
    tables.sort(key=lambda table: str(table.card.get("UploadCompletionTime") or ""), reverse=True)
    tables.sort(key=lambda table: STATE_ORDER.get(table.state, len(STATE_ORDER)))
    counts = dict.fromkeys(STATE_LABELS, 0)
    for table in tables:
        counts[table.state] = counts.get(table.state, 0) + 1
    return DepartmentView(
        info.conn_id, project_id, tuple(tables), counts, credits, app_url=info.app_url, base_path=base_path
    )


def page_of(
    view: DepartmentView, *, state: str | None = None, text: str | None = None, offset: int = 0, limit: int = 100
) -> dict[str, Any]:
    """The part of a department one request asks for: filtered by state and text, then one page of rows."""
    matching: Sequence[ListedTable] = view.tables
    if state:
        matching = [table for table in matching if table.state == state]
    if text:
        needle = text.casefold()
        matching = [table for table in matching if table.matches(needle)]
    offset = max(0, offset)
    limit = min(max(1, limit), MAX_PAGE)
    credits = view.credits
    return {
        "conn_id": view.conn_id,
        "project_id": view.project_id,
        "error": view.error,
        "as_of": view.built_at,
        "counts": view.counts,
        "credits": None if credits is None else {"today": credits.today, "last_7_days": credits.last_7_days},
        "being_read": view.being_read,
        "total": len(view.tables),
        "matching": len(matching),
        "offset": offset,
        "limit": limit,
        "rows": [view.row(table) for table in matching[offset : offset + limit]],
    }


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
