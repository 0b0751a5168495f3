"""What Airflow recorded about a department's tables: the asset events of its import and replace tasks.

Every successful import or replace records an event on the table's asset
(``datatables://<service>/<ProjectID>/<CardID>``, see :mod:`airflow_tables.assets`) with the
DAG, task and run that did it, and flat extras (``credits`` among them). The page reads the
latest such event per table, and the events of the last seven days for the credits line.
Events without a source task (a table refreshed outside Airflow, seen by a watcher) are not
Airflow's doing and are left out.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, NamedTuple
from urllib.parse import unquote

from airflow_tables.assets import TableRef, parse_table_uri
from airflow_tables.plugins.models import Credits

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

CREDIT_WINDOW = timedelta(days=7)


class LastImport(NamedTuple):
    """The task instance that last imported or replaced a table (a tuple: there are thousands)."""

    dag_id: str
    task_id: str
    run_id: str
    map_index: int
    timestamp: datetime


def department_prefix(service: str, project_id: str) -> str:
    """The URI prefix of every asset of a department's tables: ``datatables://<service>/<ProjectID>/``."""
    return TableRef(service, project_id, "").uri  # an empty CardID leaves the trailing slash


def last_imports(session: Session, service: str, project_id: str) -> dict[str, LastImport]:
    """CardID -> the task instance behind the latest Airflow event on that table's asset."""
    from airflow.models.asset import AssetEvent, AssetModel
    from sqlalchemy import func, select

    ours = AssetModel.uri.startswith(department_prefix(service, project_id), autoescape=True)
    latest = (
        select(func.max(AssetEvent.id))
        .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
        .where(ours, AssetEvent.source_dag_id.is_not(None))
        .group_by(AssetEvent.asset_id)
    )
    query = (
        select(
            AssetModel.uri,
            AssetEvent.source_dag_id,
            AssetEvent.source_task_id,
            AssetEvent.source_run_id,
            AssetEvent.source_map_index,
            AssetEvent.timestamp,
        )
        .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
        .where(AssetEvent.id.in_(latest.scalar_subquery()))
    )
    found: dict[str, LastImport] = {}
    prefix = department_prefix(service, project_id)
    for uri, dag_id, task_id, run_id, map_index, timestamp in session.execute(query):
        # Every URI starts with the department's prefix (the query says so); the rest is the CardID.
        card_id = uri[len(prefix) :]
        if "%" in card_id:
            card_id = unquote(card_id)
        found[card_id] = LastImport(
            dag_id or "", task_id or "", run_id or "", -1 if map_index is None else map_index, timestamp
        )
    return found


def credits_spent(session: Session, service: str, project_id: str, *, now: datetime | None = None) -> Credits:
    """Credits that Airflow's recorded imports spent in the department, today (UTC) and over the last 7 days.

    Summed by the database (one row back, whatever the number of events): an event's
    ``credits`` extra, or 1 for an event recorded before imports carried one.
    """
    from airflow.models.asset import AssetEvent, AssetModel
    from sqlalchemy import JSON, case, func, select, type_coerce

    now = now or datetime.now(timezone.utc)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    # Read as JSON whatever the column's declared type (Airflow 3.1 declares a JSONField, 3.2+ sa.JSON).
    spent = func.coalesce(type_coerce(AssetEvent.extra, JSON)["credits"].as_integer(), 1)
    query = (
        select(func.sum(case((AssetEvent.timestamp >= midnight, spent), else_=0)), func.sum(spent))
        .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
        .where(
            AssetModel.uri.startswith(department_prefix(service, project_id), autoescape=True),
            AssetEvent.source_dag_id.is_not(None),
            AssetEvent.timestamp >= now - CREDIT_WINDOW,
        )
    )
    today, week = session.execute(query).one()
    return Credits(today=int(today or 0), last_7_days=int(week or 0))


def task_event_ref(session: Session, dag_id: str, run_id: str, task_id: str, map_index: int) -> TableRef | None:
    """The table a task instance recorded an event on (its latest), or ``None``."""
    from airflow.models.asset import AssetEvent, AssetModel
    from sqlalchemy import select

    uri = session.scalar(
        select(AssetModel.uri)
        .join(AssetEvent, AssetModel.id == AssetEvent.asset_id)
        .where(
            AssetModel.uri.startswith("datatables://"),
            AssetEvent.source_dag_id == dag_id,
            AssetEvent.source_run_id == run_id,
            AssetEvent.source_task_id == task_id,
            AssetEvent.source_map_index == map_index,
        )
        .order_by(AssetEvent.id.desc())
        .limit(1)
    )
    if uri is None:
        return None
    try:
        return parse_table_uri(uri)
    except ValueError:
        return None
