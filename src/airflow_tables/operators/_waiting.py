"""Waiting for a table, shared by the import/replace operators and the sensor.

Both wait the same three ways (poke on the worker, reschedule, defer to the one
trigger) and must read the trigger's answer the same way, so that logic lives here
once. What a look at a table means is decided in :mod:`airflow_tables.hooks.status`;
this module only turns its answers into a task's outcome. Reading the trigger's answer
fails closed: anything but a well-formed event about the table we asked for fails the task.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from airflow_tables.hooks.status import TableStatus
from airflow_tables.triggers.tables import ERROR, TIMEOUT, DataTablesProcessedTrigger
from airflow_tables.version_compat import AirflowException, AirflowFailException

if TYPE_CHECKING:
    from airflow_tables.hooks.status import Look, TableWatch

_EVENT_STATUSES = {s.value for s in TableStatus if s is not TableStatus.BEING_READ} | {TIMEOUT, ERROR}


def finished(look: Look, department: str) -> dict[str, Any]:
    """The summary of a table that was read well; fail the task (no retry) for any other end."""
    if look.status is TableStatus.READY:
        return look.summary or {}
    raise AirflowFailException(look.status.describe(look.watch.card_id, department))


def trigger(
    *,
    conn_id: str,
    project_id: str,
    watch: TableWatch,
    poll_interval: float,
    timeout: float | None,
) -> DataTablesProcessedTrigger:
    """The trigger for a deferred wait, with a wall-clock deadline ``timeout`` seconds from now."""
    return DataTablesProcessedTrigger(
        project_id=project_id,
        card_id=watch.card_id,
        datatables_conn_id=conn_id,
        poll_interval=poll_interval,
        deadline=None if timeout is None else time.time() + timeout,
        replaced_after=watch.replaced_after,
    )


def resolve_event(event: Any, card_id: str | None = None) -> dict[str, Any]:
    """The table summary from the trigger's event, or the task's failure.

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
        summary = event.get("summary")
        return summary if isinstance(summary, dict) else {}
    raise AirflowFailException(message or TableStatus(status).describe(event["card_id"], event.get("project_id")))
