"""What Airflow recorded about a department's tables: its import and replace tasks' events and XComs.

Every successful import or replace records an event on the table's asset
(``datatables://<service>/<ProjectID>/<CardID>``, see :mod:`airflow_tables.assets`) with the
DAG, task and run that did it, and flat extras (``credits`` and ``fingerprint`` among them),
signed with the connection's key (:func:`airflow_tables.assets.signed_record`). Only
events whose signature verifies with the key of the connection the page lists the department
through count: any DAG can record an event with the same extras on a table's asset, and the
page must not credit it with an import nor count its credits. Events without a source task (a
table refreshed outside Airflow, seen by a watcher) are not Airflow's doing and are left out.
So are events recorded before records were signed (provider 0.2 and earlier).

A task whose table was accepted but then read badly (or that failed or still waits) records
no event; it did push its ``card_id`` XCom before waiting (the operators' ``_publish``), and
the service charged the import. Those XComs, with their task instance's state, are the
imports no event records (:func:`unrecorded_imports`): every import a task made is then
attributed and its credit counted, whether its read succeeded or not. A task that ended well
without an event sent nothing (the file was unchanged): no credit.

The importing DAGs' schedules (:func:`schedules`) say when a table is stale.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import unquote

from airflow_tables.assets import TableRef, UploadRecord, parse_table_uri, signed_record
from airflow_tables.links import CARD_ID_XCOM_KEY
from airflow_tables.plugins.models import Credits, DayCredits

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Iterator

    from sqlalchemy.orm import Session

CREDIT_WINDOW = timedelta(days=7)
#: Task states in which an accepted import without an event is still on its way.
WAITING_STATES = frozenset(
    {"running", "deferred", "up_for_retry", "up_for_reschedule", "queued", "scheduled", "restarting", ""}
)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Import(NamedTuple):
    """One import or replace an Airflow task made of a table (a tuple: there are thousands).

    ``outcome`` is a :data:`.models.Outcome`: ``recorded`` by an asset event, or known only
    from the task's ``card_id`` XCom (``failed``, ``running``, ``unchanged``). ``bad_rows`` and
    ``rejects`` are the event's when ``on_bad_rows="quarantine"`` ran (``None`` otherwise, and
    for the imports only an XCom knows of: their rows set aside are in the task's log and XCom).
    """

    card_id: str
    dag_id: str
    task_id: str
    run_id: str
    map_index: int
    at: datetime
    outcome: str
    task_state: str
    credits: int
    fingerprint: str
    bad_rows: int | None = None
    rejects: str | None = None


def department_prefix(service: str, project_id: str) -> str:
    """The URI prefix of every asset of a department's tables: ``datatables://<service>/<ProjectID>/``."""
    return TableRef(service, project_id, "").uri  # an empty CardID leaves the trailing slash


def _state(value: object) -> str:
    return str(getattr(value, "value", value) or "")


def recorded_import(
    ref: TableRef,
    dag_id: str | None,
    task_id: str | None,
    run_id: str | None,
    map_index: int | None,
    timestamp: datetime,
    extra: object,
    task_state: object = "",
) -> Import:
    """An import its asset event records: credits, fingerprint and rows set aside as its upload record says them."""
    record = UploadRecord.from_extra(extra, ref=ref) or UploadRecord(ref.service, ref.project_id, ref.card_id)
    return Import(
        ref.card_id,
        dag_id or "",
        task_id or "",
        run_id or "",
        -1 if map_index is None else map_index,
        timestamp,
        "recorded",
        _state(task_state),
        record.credits,
        record.fingerprint or "",
        record.bad_rows,
        record.rejects,
    )


def _department_events(
    session: Session, service: str, project_id: str, secret: str, since: datetime | None = None
) -> Iterator[tuple[str, Import]]:
    """``(CardID, Import)`` for each signed Airflow event on the department's tables, newest first.

    The signature covers the whole of an event's extras, so they are read whole and checked
    here (an HMAC per event: microseconds), not summed or picked by the database. The unkeyed
    twin of a keyed event (``partition_twin``, :func:`airflow_tables.utils.events.record_upload`)
    is the same import: it is left out.
    """
    from airflow.models.asset import AssetEvent, AssetModel
    from sqlalchemy import select

    prefix = department_prefix(service, project_id)
    query = (
        select(
            AssetModel.uri,
            AssetEvent.source_dag_id,
            AssetEvent.source_task_id,
            AssetEvent.source_run_id,
            AssetEvent.source_map_index,
            AssetEvent.timestamp,
            AssetEvent.extra,
        )
        .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
        .where(AssetModel.uri.startswith(prefix, autoescape=True), AssetEvent.source_dag_id.is_not(None))
        .order_by(AssetEvent.id.desc())
    )
    if since is not None:
        query = query.where(AssetEvent.timestamp >= since)
    for uri, dag_id, task_id, run_id, map_index, timestamp, extra in session.execute(
        query.execution_options(yield_per=1000)
    ):
        extras = _decoded(extra)
        if not signed_record(secret, extras, dag_id, task_id, run_id):
            continue
        if isinstance(extras, dict) and extras.get("partition_twin"):  # the keyed event is the import
            continue
        # Every URI starts with the department's prefix (the query says so); the rest is the CardID.
        card_id = uri[len(prefix) :]
        if "%" in card_id:
            card_id = unquote(card_id)
        ref = TableRef(service, project_id, card_id)
        yield card_id, recorded_import(ref, dag_id, task_id, run_id, map_index, timestamp, extras)


def _decoded(extra: object) -> object:
    """An event's extras as a dict, whether the column gives them decoded or as JSON text (Airflow 3.1)."""
    if isinstance(extra, str):
        try:
            return json.loads(extra)
        except ValueError:
            return None
    return extra


def last_imports(session: Session, service: str, project_id: str, secret: str) -> dict[str, Import]:
    """CardID -> the latest signed Airflow event on that table's asset (its task instance, credits, fingerprint).

    :param secret: the API key of the connection the department is listed through.
    """
    found: dict[str, Import] = {}
    for card_id, each in _department_events(session, service, project_id, secret):
        found.setdefault(card_id, each)  # newest first: the first signed one is the latest
    return found


def outcome_of(task_state: str) -> tuple[str, int]:
    """What became of an accepted import that recorded no event, from its task's state, and its credits."""
    if task_state in ("success", "skipped"):
        return "unchanged", 0  # the task ended well without recording: nothing was sent
    if task_state in WAITING_STATES:
        return "running", 1
    return "failed", 1


def xcom_text(value: object) -> str | None:
    """A string XCom or rendered field, whether stored as JSON text or already decoded; ``None`` if empty."""
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return value or None
        return decoded if isinstance(decoded, str) and decoded else None
    return None


def same_task(task_instance: Any, dag_id: Any, run_id: Any, task_id: Any, map_index: Any) -> Any:
    """The join condition of a task instance with the task columns of an XCom or an asset event."""
    from sqlalchemy import and_

    return and_(
        task_instance.dag_id == dag_id,
        task_instance.run_id == run_id,
        task_instance.task_id == task_id,
        task_instance.map_index == map_index,
    )


def unrecorded_imports(
    session: Session, card_ids: Collection[str] | None, *, since: datetime, card_id: str | None = None
) -> list[Import]:
    """Imports whose task pushed a ``card_id`` XCom since ``since`` but recorded no table event.

    :param card_ids: the department's tables (an XCom names a CardID, not its department);
        ``None`` with ``card_id`` for one table.
    """
    from airflow.models.asset import AssetEvent
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from sqlalchemy import exists, select

    columns = (XComModel.dag_id, XComModel.run_id, XComModel.task_id, XComModel.map_index)
    recorded = exists().where(
        AssetEvent.source_dag_id == columns[0],
        AssetEvent.source_run_id == columns[1],
        AssetEvent.source_task_id == columns[2],
        AssetEvent.source_map_index == columns[3],
    )
    query = (
        select(
            XComModel.value,
            XComModel.dag_id,
            XComModel.task_id,
            XComModel.run_id,
            XComModel.map_index,
            XComModel.timestamp,
            TaskInstance.state,
        )
        .join(TaskInstance, same_task(TaskInstance, *columns))
        .where(XComModel.key == CARD_ID_XCOM_KEY, XComModel.timestamp >= since, ~recorded)
    )
    found = []
    for value, dag_id, task_id, run_id, map_index, timestamp, state in session.execute(query):
        card = xcom_text(value)
        if card is None or (card_id is not None and card != card_id) or (card_ids is not None and card not in card_ids):
            continue
        task_state = _state(state)
        outcome, spent = outcome_of(task_state)
        found.append(Import(card, dag_id, task_id, run_id, map_index, timestamp, outcome, task_state, spent, ""))
    return found


def table_imports(session: Session, ref: TableRef, secret: str, *, limit: int = 50) -> list[Import]:
    """Every import of one table Airflow made (newest first): its signed events and its unrecorded XComs."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.models.taskinstance import TaskInstance
    from sqlalchemy import select

    query = (
        select(
            AssetEvent.source_dag_id,
            AssetEvent.source_task_id,
            AssetEvent.source_run_id,
            AssetEvent.source_map_index,
            AssetEvent.timestamp,
            AssetEvent.extra,
            TaskInstance.state,
        )
        .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
        .outerjoin(
            TaskInstance,
            same_task(
                TaskInstance,
                AssetEvent.source_dag_id,
                AssetEvent.source_run_id,
                AssetEvent.source_task_id,
                AssetEvent.source_map_index,
            ),
        )
        .where(AssetModel.uri == ref.uri, AssetEvent.source_dag_id.is_not(None))
        .order_by(AssetEvent.id.desc())
    )
    found = []
    for dag_id, task_id, run_id, map_index, timestamp, extra, state in session.execute(query):
        extras = _decoded(extra)
        if signed_record(secret, extras, dag_id, task_id, run_id):
            found.append(recorded_import(ref, dag_id, task_id, run_id, map_index, timestamp, extras, state))
            if len(found) == limit:
                break
    found += unrecorded_imports(session, None, since=EPOCH, card_id=ref.card_id)
    found.sort(key=lambda each: each.at, reverse=True)
    return found[:limit]


def size_of(fingerprint: str) -> int | None:
    """The file's size in bytes: the last part of a fingerprint (``xxh3-128:<hex>:<size>``)."""
    parts = fingerprint.split(":")
    return int(parts[-1]) if len(parts) >= 3 and parts[-1].isdigit() else None


def credits_spent(
    session: Session,
    service: str,
    project_id: str,
    secret: str,
    *,
    unrecorded: Iterable[Import] = (),
    now: datetime | None = None,
) -> Credits:
    """Credits that Airflow's imports spent in the department, per day (UTC) over the last 7 days.

    The recorded imports are the signed events of the window: each its ``credits`` extra. The
    ``unrecorded`` imports (:func:`unrecorded_imports`) add theirs.
    """
    now = now or datetime.now(UTC)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    days = [midnight - timedelta(days=back) for back in range(CREDIT_WINDOW.days)]
    per_day = [0] * len(days)
    recorded = [each for _, each in _department_events(session, service, project_id, secret, since=days[-1])]
    for each in (*recorded, *unrecorded):
        at = each.at if each.at.tzinfo else each.at.replace(tzinfo=UTC)
        back = (midnight - at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)).days
        if 0 <= back < len(per_day):
            per_day[back] += each.credits
    return Credits(
        today=per_day[0],
        last_7_days=sum(per_day),
        by_day=[DayCredits(day=start.date().isoformat(), credits=n) for start, n in zip(days, per_day, strict=True)],
    )


PRESETS = {"@hourly": 3600.0, "@daily": 86400.0, "@weekly": 7 * 86400.0, "@monthly": 31 * 86400.0}
PRESETS |= {"@midnight": PRESETS["@daily"], "@yearly": 366 * 86400.0, "@annually": 366 * 86400.0}


class Schedule(NamedTuple):
    """A DAG's schedule as freshness is judged by: its interval (``None``: not time-based) and its summary."""

    interval: float | None
    summary: str


def interval_of(summary: str | None) -> float | None:
    """Seconds between two runs of a time-based schedule (Airflow's ``timetable_summary``), else ``None``.

    A preset (``@daily``), a cron expression (the longest gap between its next fire times,
    for expressions such as ``0 9 * * 1-5``) or a timedelta's text (``1 day, 0:00:00``).
    ``None``, ``@once``, ``@continuous`` and asset schedules have none.
    """
    text = (summary or "").strip()
    if text in PRESETS:
        return PRESETS[text]
    match = re.fullmatch(r"(?:(\d+) days?, )?(\d+):(\d{2}):(\d{2}(?:\.\d+)?)", text)
    if match is not None:
        days, hours, minutes, seconds = match.groups()
        return int(days or 0) * 86400 + int(hours) * 3600 + int(minutes) * 60 + float(seconds) or None
    try:
        from croniter import croniter

        if not croniter.is_valid(text):
            return None
        times = croniter(text, datetime(2026, 1, 5, tzinfo=UTC))
        fires = [times.get_next(float) for _ in range(8)]
    except (ImportError, ValueError, KeyError):
        return None
    return max(later - earlier for earlier, later in zip(fires, fires[1:], strict=False))


def schedules(session: Session, dag_ids: Collection[str]) -> dict[str, Schedule]:
    """The schedules of the DAGs that imported tables, by DAG id (a paused DAG is not expected to run)."""
    from airflow.models.dag import DagModel
    from sqlalchemy import select

    if not dag_ids:
        return {}
    query = select(DagModel.dag_id, DagModel.timetable_summary, DagModel.is_paused).where(
        DagModel.dag_id.in_(sorted(dag_ids))
    )
    return {
        dag_id: Schedule(None if paused else interval_of(summary), summary or "")
        for dag_id, summary, paused in session.execute(query)
    }


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
