"""Triggers: the one behind every deferred wait, and the one that turns refreshes into asset events.

:class:`DataTablesProcessedTrigger` serves the import and replace operators and the sensor.
:class:`DataTablesTableRefreshedTrigger` is an event trigger for ``AssetWatcher``: it fires
each time a table finishes a successful read, whoever refreshed it. Both share the
department poller: one listing per department per interval, however many of either wait.

It only reads (GET requests); the paid import always happens on the worker, so a
triggerer restart that re-runs :meth:`run` can never import twice. Its kwargs are
plain JSON, it never calls the synchronous ``get_connection`` on the event loop (the
hook resolves the connection asynchronously), and its deadline is wall-clock: it
ends in a ``timeout`` event rather than relying on ``defer(timeout=)``, which skips
clean-up and is not enforced by ``dag.test()``. (The task passes the same deadline to
``defer(timeout=)`` as well, for the case where no triggerer runs the trigger at all.)

Arguments are checked when a trigger is built, in the task before it defers: a wait
that could never succeed fails there, not in the triggerer's shared poller.
"""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, BaseTrigger, TriggerEvent

from airflow_tables.model import RefreshWatch, TableSummary, TableWatch
from airflow_tables.triggers._department_poller import watch

#: Event statuses besides the table statuses ("ready", "failed", "gone").
TIMEOUT = "timeout"
ERROR = "error"


class DataTablesProcessedTrigger(BaseTrigger):
    """Wait until a table's ``Processed`` is true, sharing the department's polling with other waits.

    :param project_id: the department (ProjectID).
    :param card_id: the table (CardID).
    :param datatables_conn_id: the ``datatables`` connection.
    :param poll_interval: seconds between listings of the department (> 0); the shared poller
        lists no more often than ``[datatables] min_poll_interval`` (1 s by default), whoever asks.
    :param deadline: wall-clock end of the wait (Unix time); ``None`` waits for ever.
    :param replaced_after: for a replacement, the table's ``UploadCompletionTime`` before it,
        so that the previous file's "ready" is not taken for the new one's.
    """

    def __init__(
        self,
        *,
        project_id: str,
        card_id: str,
        datatables_conn_id: str = "datatables_default",
        poll_interval: float = 30.0,
        deadline: float | None = None,
        replaced_after: str | None = None,
    ) -> None:
        super().__init__()
        self.project_id, self.card_id, self.poll_interval = _checked(project_id, card_id, poll_interval)
        if deadline is not None and (
            isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or math.isnan(deadline)
        ):
            raise ValueError(f"deadline must be a Unix time (a number) or None, not {deadline!r}")
        self.datatables_conn_id = datatables_conn_id
        self.deadline = deadline
        self.replaced_after = replaced_after

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return _serialized(
            self, "project_id", "card_id", "datatables_conn_id", "poll_interval", "deadline", "replaced_after"
        )

    def _event(self, status: str, summary: dict | None = None, message: str = "") -> TriggerEvent:
        return TriggerEvent(
            {
                "status": status,
                "project_id": self.project_id,
                "card_id": self.card_id,
                "summary": summary,
                "message": message,
            }
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        table = TableWatch(self.card_id, self.replaced_after)
        async with watch(self.datatables_conn_id, self.project_id, self.card_id, self.poll_interval) as subscription:
            while True:
                left = None if self.deadline is None else self.deadline - time.time()
                snapshot = None if left is not None and left <= 0 else await subscription.next(timeout=left)
                if snapshot is None:
                    yield self._event(TIMEOUT, message=f"table {self.card_id} was still being read at the deadline")
                    return
                error = snapshot.error_for(self.card_id)
                if error is not None:
                    yield self._event(ERROR, message=error)
                    return
                if snapshot.stale_for(self.card_id):
                    continue  # the look failed for now: nothing new about this table
                look = table.observe(snapshot.cards.get(self.card_id))
                if look.status.is_terminal:
                    message = look.status.describe(self.card_id, self.project_id)
                    yield self._event(look.status.value, look.summary, message)
                    return
                table = look.watch  # a replacement seen being read: its next "processed" is the new file's
                self.log.info("%s; next look in %g s", look.message, self.poll_interval)


class DataTablesTableRefreshedTrigger(BaseEventTrigger):
    """Fire an event each time a table finishes a successful read after watching started.

    For ``Asset(..., watchers=[AssetWatcher(name=..., trigger=DataTablesTableRefreshedTrigger(...))])``:
    whoever refreshed the table (an Airflow task, a person in the application, a connector),
    a DAG scheduled on that asset runs. What counts as a refresh is decided by
    :class:`~airflow_tables.model.RefreshWatch`. The event's payload carries
    ``card_id``, ``project_id``, ``completion_time``, ``rows`` and the table's ``summary``.
    Errors (a refused key, a department gone, a connection missing on the triggerer, an
    answer no one can read) fire nothing: they are logged and the watch goes on, since an
    event would start the DAG for nothing and the watch has no task to fail.

    :param project_id: the department (ProjectID).
    :param card_id: the table (CardID).
    :param datatables_conn_id: the ``datatables`` connection.
    :param poll_interval: seconds between listings of the department (shared with other waits).
    """

    def __init__(
        self,
        *,
        project_id: str,
        card_id: str,
        datatables_conn_id: str = "datatables_default",
        poll_interval: float = 60.0,
    ) -> None:
        super().__init__()
        self.project_id, self.card_id, self.poll_interval = _checked(project_id, card_id, poll_interval)
        self.datatables_conn_id = datatables_conn_id

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return _serialized(self, "project_id", "card_id", "datatables_conn_id", "poll_interval")

    async def run(self) -> AsyncIterator[TriggerEvent]:
        table = RefreshWatch(self.card_id)
        async with watch(self.datatables_conn_id, self.project_id, self.card_id, self.poll_interval) as subscription:
            while True:
                snapshot = await subscription.next()
                if snapshot is None:
                    continue
                error = snapshot.error_for(self.card_id)
                if error is not None:  # the poller goes on, and so does the watch: the asset has no one else
                    self.log.warning("watching %s: %s; still watching", self.card_id, error)
                    continue
                if snapshot.stale_for(self.card_id):
                    continue
                summary = snapshot.cards.get(self.card_id)
                table, refreshed = table.observe(summary)
                if refreshed and summary is not None:
                    self.log.info("table %s was refreshed (read at %s)", self.card_id, table.baseline)
                    yield TriggerEvent(
                        {
                            "card_id": self.card_id,
                            "project_id": self.project_id,
                            "completion_time": table.baseline,
                            "rows": _rows(summary),
                            "summary": summary,
                        }
                    )


def _rows(summary: dict) -> int | None:
    """The table's ``Rows``; ``None`` when it is not a number or a fetched table's answer does not name it."""
    try:
        return TableSummary.from_json(summary).rows
    except ValueError:
        return None


def _checked(project_id: object, card_id: object, poll_interval: object) -> tuple[str, str, float]:
    """The arguments every wait shares, checked where the trigger is built (in the task, before it defers).

    A trigger that could never look (a malformed CardID, no department, an interval of 0)
    fails its task at once, instead of becoming a waiter that no listing answers.
    """
    from airflow_tables.hooks._http import card_id_problem

    problem = card_id_problem(card_id)
    if problem is not None:
        raise ValueError(problem)
    if not isinstance(project_id, str) or not project_id.strip():
        raise ValueError(f"project_id must be a department's ProjectID (a non-empty string), not {project_id!r}")
    try:
        interval = float(poll_interval)  # type: ignore[arg-type]  # anything else is what the check refuses
    except (TypeError, ValueError):
        interval = math.nan
    if isinstance(poll_interval, bool) or not 0 < interval < math.inf:
        raise ValueError(f"poll_interval must be a number of seconds greater than 0, not {poll_interval!r}")
    return project_id, card_id, interval  # type: ignore[return-value]  # card_id_problem checked it is a str


def _serialized(trigger: BaseTrigger, *names: str) -> tuple[str, dict[str, Any]]:
    """A trigger's class path and its kwargs: plain JSON, the constructor's own names."""
    return f"{type(trigger).__module__}.{type(trigger).__qualname__}", {name: getattr(trigger, name) for name in names}
