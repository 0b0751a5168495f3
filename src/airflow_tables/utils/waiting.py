"""Waiting for a table, shared by the import/replace operators and the sensor.

Both wait the same three ways (poke on the worker, reschedule, defer to the one
trigger) and must read the trigger's answer the same way, so that logic lives here
once. What a look at a table means is decided in :mod:`airflow_tables.model`;
this module only turns its answers into a task's outcome. Reading the trigger's answer
fails closed: anything but a well-formed event about the table we asked for fails the task.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from airflow_tables.model import TableStatus, TableSummary
from airflow_tables.triggers.tables import ERROR, TIMEOUT, DataTablesProcessedTrigger
from airflow_tables.version_compat import AirflowException, AirflowFailException

if TYPE_CHECKING:
    from airflow_tables.model import Look, TableWatch

_EVENT_STATUSES = {s.value for s in TableStatus if s is not TableStatus.BEING_READ} | {TIMEOUT, ERROR}


def finished(look: Look, department: str) -> TableSummary | None:
    """The table that was read well, as the look saw it; fail the task (no retry) for any other end."""
    if look.status is TableStatus.READY:
        return look.table
    raise AirflowFailException(look.status.describe(look.watch.card_id, department))


class _Deferrable(Protocol):
    """What :func:`defer` needs of a task: its execution timeout, its log, and ``defer`` (which raises)."""

    execution_timeout: timedelta | None

    @property
    def log(self) -> Any: ...

    def defer(
        self,
        *,
        trigger: Any,
        method_name: str,
        kwargs: dict[str, Any] | None = None,
        timeout: timedelta | None = None,
    ) -> NoReturn: ...


def defer(
    task: _Deferrable,
    *,
    conn_id: str,
    project_id: str,
    watch: TableWatch,
    poll_interval: float,
    timeout: float | timedelta | None,
    deadline: float | None = None,
    resume_kwargs: dict[str, Any] | None = None,
) -> NoReturn:
    """Defer ``task``'s wait for the table to the trigger, bounded even when no triggerer runs.

    The wait ends at the first of the wait's ``timeout`` and the task's ``execution_timeout``
    (which Airflow does not apply to a deferred task by itself), and no later than ``deadline``
    (a Unix time) when the wait already began before: a wait deferred again keeps the end it
    was given, rather than a fresh ``timeout``. Both the trigger's deadline (a clean ``timeout``
    event, also under ``dag.test()``) and ``defer(timeout=)`` (enforced by the scheduler, when
    no triggerer picks the trigger up) are set to it. ``resume_kwargs`` reach ``execute_complete``,
    with the wait's ``deadline`` added, to be given back here when the task defers again.
    """
    if deadline is None:
        limit, why = _wait_limit(timeout, task.execution_timeout)
        deadline = None if limit is None else time.time() + limit
    else:
        limit, why = max(deadline - time.time(), 0.0), "the end this wait was given when it began"
    if limit is None:
        task.log.info("Waiting for table %s in the triggerer with no deadline (%s)", watch.card_id, why)
    else:
        task.log.info("Waiting for table %s in the triggerer for at most %g s: %s", watch.card_id, limit, why)
    task.defer(
        trigger=DataTablesProcessedTrigger(
            project_id=project_id,
            card_id=watch.card_id,
            datatables_conn_id=conn_id,
            poll_interval=poll_interval,
            deadline=deadline,
            replaced_after=watch.replaced_after,
        ),
        method_name="execute_complete",
        kwargs=None if resume_kwargs is None else {**resume_kwargs, "deadline": deadline},
        timeout=None if limit is None else timedelta(seconds=limit),
    )


def _wait_limit(timeout: float | timedelta | None, execution_timeout: timedelta | None) -> tuple[float | None, str]:
    """Seconds the deferred wait may last, and which setting ends it (for the log)."""
    wait = _seconds(timeout)
    task = _seconds(execution_timeout)
    if task is not None and (wait is None or task < wait):
        shown = "none" if wait is None else f"{wait:g} s"
        return task, f"the task's execution_timeout ({task:g} s) ends it, before the wait's timeout ({shown})"
    if wait is not None:
        return wait, f"the wait's timeout ({wait:g} s) ends it"
    return None, "timeout=None and no execution_timeout"


def _seconds(value: float | timedelta | None) -> float | None:
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    return None if seconds is None or not math.isfinite(seconds) else float(seconds)


def resolve_event(event: Any, card_id: str | None = None) -> TableSummary | None:
    """The table the trigger's event reports ready (``None`` when its summary names none), or the task's failure.

    ``timeout`` and ``error`` fail the try (a retry re-attaches to the same table);
    a table read badly or gone fails the task without retry; anything malformed or
    about another table fails closed.
    """
    if not isinstance(event, dict) or event.get("status") not in _EVENT_STATUSES:
        raise AirflowException(f"unexpected event from DataTablesProcessedTrigger: {event!r}")
    if card_id is not None and event.get("card_id") != card_id:
        raise AirflowException(f"the trigger answered for {event.get('card_id')!r}, not {card_id!r}")
    status, message = event["status"], event.get("message") or ""
    if status in (TIMEOUT, ERROR):
        raise AirflowException(message or f"waiting for {event.get('card_id')} ended: {status}")
    if status == TableStatus.READY.value:
        return _table_of(event.get("summary"))
    raise AirflowFailException(message or TableStatus(status).describe(event["card_id"], event.get("project_id")))


def _table_of(summary: object) -> TableSummary | None:
    """An event's summary (the trigger's ``to_json()``) typed again; ``None`` when it names no table."""
    if not isinstance(summary, Mapping) or not summary:
        return None
    try:
        return TableSummary.from_json(summary)
    except ValueError:
        return None


def log_ready(log: Any, card_id: str, table: TableSummary | None) -> None:
    """Log that an import's table is ready, with what its last look showed."""
    log.info(
        "Table %s (%s) is ready: %s rows, read at %s",
        table.card_id if table else card_id,
        table.name if table else None,
        table.rows if table else None,
        table.completion_time if table else None,
    )
