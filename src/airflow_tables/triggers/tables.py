"""The one trigger behind every deferred wait: the import and replace operators and the sensor.

It only reads (GET requests); the paid import always happens on the worker, so a
triggerer restart that re-runs :meth:`run` can never import twice. Its kwargs are
plain JSON, it never calls the synchronous ``get_connection`` on the event loop (the
hook resolves the connection asynchronously), and its deadline is wall-clock: it
ends in a ``timeout`` event rather than relying on ``defer(timeout=)``, which skips
clean-up and is not enforced by ``dag.test()``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_tables.hooks.status import TableWatch
from airflow_tables.triggers._department_poller import watch

#: Event statuses besides the table statuses ("ready", "failed", "gone").
TIMEOUT = "timeout"
ERROR = "error"


class DataTablesProcessedTrigger(BaseTrigger):
    """Wait until a table's ``Processed`` is true, sharing the department's polling with other waits.

    :param project_id: the department (ProjectID).
    :param card_id: the table (CardID).
    :param datatables_conn_id: the ``datatables`` connection.
    :param poll_interval: seconds between listings of the department.
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
        self.project_id = project_id
        self.card_id = card_id
        self.datatables_conn_id = datatables_conn_id
        self.poll_interval = float(poll_interval)
        self.deadline = deadline
        self.replaced_after = replaced_after

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "project_id": self.project_id,
                "card_id": self.card_id,
                "datatables_conn_id": self.datatables_conn_id,
                "poll_interval": self.poll_interval,
                "deadline": self.deadline,
                "replaced_after": self.replaced_after,
            },
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
        async with watch(self.datatables_conn_id, self.project_id, self.card_id, self.poll_interval) as department:
            while True:
                left = None if self.deadline is None else self.deadline - time.time()
                snapshot = None if left is not None and left <= 0 else await department.next(timeout=left)
                if snapshot is None:
                    yield self._event(TIMEOUT, message=f"table {self.card_id} was still being read at the deadline")
                    return
                if snapshot.error is not None:
                    yield self._event(ERROR, message=str(snapshot.error))
                    return
                if snapshot.stale:
                    continue  # the listing failed for now: nothing new about this table
                look = table.observe(snapshot.cards.get(self.card_id))
                if look.status.is_terminal:
                    message = look.status.describe(self.card_id, self.project_id)
                    yield self._event(look.status.value, look.summary, message)
                    return
                table = look.watch  # a replacement seen being read: its next "processed" is the new file's
                self.log.info("%s; next look in %g s", look.message, self.poll_interval)
