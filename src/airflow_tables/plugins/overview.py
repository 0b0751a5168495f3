"""A department as the page shows it: one row per table, a summary line, and the page of rows asked for.

Rows are built once per listing (the listing is cached and shared, see :mod:`.cache`) and
then only filtered and sliced per request, so a department of 10,000 tables costs a viewer
a slice, not a rebuild. A table's state in words comes from
:class:`~airflow_tables.hooks.status.TableStatus`, nowhere else.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from airflow_tables.hooks.status import TableStatus
from airflow_tables.links import table_url

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from airflow_tables.plugins.connections import ConnectionInfo
    from airflow_tables.plugins.events import Credits, LastImport

STATE_LABELS = {"being_read": "Being read", "failed": "Failed", "ready": "Ready"}
#: Tables that need attention first.
STATE_ORDER = {"being_read": 0, "failed": 1, "ready": 2}
MAX_PAGE = 500


@dataclass(frozen=True)
class DepartmentView:
    """One department of one connection, built from one listing; ``error`` when it could not be listed."""

    conn_id: str
    project_id: str
    rows: tuple[dict[str, Any], ...] = ()
    counts: dict[str, int] = field(default_factory=dict)
    credits: Credits | None = None
    error: str | None = None
    built_at: float = field(default_factory=time.time)

    @property
    def being_read(self) -> bool:
        return self.counts.get("being_read", 0) > 0

    def find(self, card_id: str) -> dict[str, Any] | None:
        return next((row for row in self.rows if row["card_id"] == card_id), None)


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
    """Rows sorted for attention (being read, failed, ready; newest first within each) and the counts."""
    rows = [
        table_row(
            card,
            last_imports.get(str(card["CardID"])),
            project_id=project_id,
            app_url=info.app_url,
            base_path=base_path,
        )
        for card in cards
    ]
    rows.sort(key=lambda row: row["completed"] or "", reverse=True)
    rows.sort(key=lambda row: STATE_ORDER.get(row["state"], len(STATE_ORDER)))
    counts = dict.fromkeys(STATE_LABELS, 0)
    for row in rows:
        counts[row["state"]] = counts.get(row["state"], 0) + 1
    return DepartmentView(info.conn_id, project_id, tuple(rows), counts, credits)


def page_of(
    view: DepartmentView, *, state: str | None = None, text: str | None = None, offset: int = 0, limit: int = 100
) -> dict[str, Any]:
    """The part of a department one request asks for: filtered by state and text, then one page of rows."""
    matching = list(view.rows)
    if state:
        matching = [row for row in matching if row["state"] == state]
    if text:
        needle = text.casefold()
        matching = [
            row
            for row in matching
            if needle in row["card_id"].casefold()
            or needle in str(row["name"] or "").casefold()
            or (row["last"] is not None and needle in row["last"]["dag_id"].casefold())
        ]
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
        "total": len(view.rows),
        "matching": len(matching),
        "offset": offset,
        "limit": limit,
        "rows": matching[offset : offset + limit],
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
