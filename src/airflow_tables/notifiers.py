"""A notifier that says why a table is not fresh: for Airflow's deadline alerts ("orders is read by 07:00").

:class:`DataTablesFreshnessNotifier` looks at the table once (one fetch, no credit) when it is
called and words its state: still being read, read badly with the service's own reason (the
table's ``Description``), stale since its last read, gone, or read in time (the run is late for
another reason). The message is logged as a warning and returned, so a deadline's callback
keeps it as its output (Airflow 3.3 stores an ``AsyncCallback``'s result); subclass it and
override :meth:`~DataTablesFreshnessNotifier.send` to pass the message on (chat, mail).

It runs in the triggerer as an ``AsyncCallback`` (``async_notify``: the request does not block
the event loop) and on a worker or the DAG processor as a ``SyncCallback`` or an
``on_failure_callback`` (``notify``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseNotifier

from airflow_tables.exceptions import DataTablesError, DataTablesNotFoundError
from airflow_tables.model import TableDetail, TableStatus, service_time

if TYPE_CHECKING:
    from airflow.sdk import Context


class DataTablesFreshnessNotifier(BaseNotifier):
    """Say what state a table is in when it should have been fresh: being read, failed (and why), or stale since when.

    :param card_id: the table (templated).
    :param project_id: the department (templated); defaults to the connection's ``project_id``.
    :param completed_after: the instant after which a read counts as fresh (templated; a datetime
        or ISO 8601 text, e.g. ``{{ dag_run.data_interval_end }}``); ``None``: any good read is
        fresh. Compared with ``UploadCompletionTime`` as the sensor's ``completed_after`` is (UTC).
    :param datatables_conn_id: the ``datatables`` connection.
    """

    template_fields: Sequence[str] = ("card_id", "project_id", "completed_after")

    def __init__(
        self,
        *,
        card_id: str,
        project_id: str | None = None,
        completed_after: Any = None,
        datatables_conn_id: str = "datatables_default",
        context: Context | None = None,
    ) -> None:
        super().__init__(context=context)
        self.card_id = card_id
        self.project_id = project_id
        self.completed_after = completed_after
        self.datatables_conn_id = datatables_conn_id
        #: Why the arguments could not be rendered (Airflow renders them before it calls): said, not raised.
        self.unrendered: str | None = None

    def render_template_fields(self, context: Context, jinja_env: Any = None) -> None:
        """Render the arguments; one that cannot be rendered is named in the message, never failing the callback."""
        try:
            super().render_template_fields(context, jinja_env)
        except Exception as err:  # a notifier says what it could not learn; it never fails the callback
            self.unrendered = f"{type(err).__name__}: {err}"

    def notify(self, context: Context) -> None:
        """Look at the table (blocking) and send the message."""
        from airflow_tables.hooks.tables import DataTablesHook

        if self.unrendered is not None:
            self.send(self.message(context, None), context)
            return
        hook = DataTablesHook(datatables_conn_id=self.datatables_conn_id)
        try:
            detail: TableDetail | Exception = hook.table(self.project_id, self.card_id)
        except Exception as err:  # a notifier says what it could not learn; it never fails the callback
            detail = err
        self.send(self.message(context, detail), context)

    async def async_notify(self, context: Context) -> str:  # type: ignore[override]  # the callback keeps the result
        """Look at the table without blocking the event loop, send the message and return it."""
        from airflow_tables.hooks.tables import DataTablesHook

        if self.unrendered is not None:
            message = self.message(context, None)
            self.send(message, context)
            return message
        hook = DataTablesHook(datatables_conn_id=self.datatables_conn_id)
        try:
            detail: TableDetail | Exception = await hook.a_table(self.project_id, self.card_id)
        except Exception as err:  # a notifier says what it could not learn; it never fails the callback
            detail = err
        message = self.message(context, detail)
        self.send(message, context)
        return message

    def send(self, message: str, context: Context) -> None:
        """Pass the message on: here, a warning in the log of whatever runs the callback; override to send it on."""
        self.log.warning("%s", message)

    def message(self, context: Context, table: TableDetail | Exception | None) -> str:
        """The sentence for the table as fetched (its detail, or the error the fetch raised; ``None``: not fetched)."""
        where = f"department {self.project_id}" if self.project_id else "the connection's department"
        head = f"{_late(context)}: table {self.card_id}"
        if self.unrendered is not None:
            return f"{head}: the notifier's arguments could not be rendered ({self.unrendered}); look at it."
        if isinstance(table, DataTablesNotFoundError):
            return f"{head} is not (or no longer) in {where}."
        if isinstance(table, Exception):
            why = table if isinstance(table, DataTablesError) else f"{type(table).__name__}: {table}"
            return f"{head}: its state could not be read ({why}); look at it in the service."
        if table is None:
            return f"{head}: it was not looked at; look at it in the service."
        named = f"{head} ({table.name})" if table.name else head
        last = table.completion_time
        if table.status is TableStatus.BEING_READ:
            since = f"; its last read ended at {last} UTC" if last else ""
            return f"{named} is still being read{since}."
        if table.status is TableStatus.FAILED:
            why = f': "{table.description}"' if table.description else " (it gave no explanation)"
            at = f" at {last} UTC" if last else ""
            return f"{named}: the service could not read its file{at}{why}."
        try:
            after = self._after()
        except ValueError as err:
            return f"{named} was last read at {last or 'an unknown time'} UTC; freshness was not judged: {err}."
        if after is not None and (last is None or not last > after):
            return f"{named} is stale: not read since {last or 'an unknown time'} UTC, which is not after {after} UTC."
        return f"{named} was read at {last} UTC ({table.rows} rows): the table is fresh; the run is late elsewhere."

    def _after(self) -> str | None:
        if self.completed_after in (None, ""):
            return None
        try:
            return service_time(self.completed_after)
        except (TypeError, ValueError):
            raise ValueError(
                f"completed_after={self.completed_after!r} is not a date-time; "
                "give a datetime or ISO 8601 text (e.g. '{{ dag_run.data_interval_end }}')"
            ) from None


def _late(context: Mapping[str, Any]) -> str:
    """What is late: the DAG run, and the deadline it missed when a deadline alert calls (a task's has none)."""
    run = context.get("dag_run")
    if isinstance(run, Mapping):  # a deadline callback's context carries the run as JSON
        dag_id, run_id = run.get("dag_id"), run.get("dag_run_id") or run.get("run_id")
    else:
        dag_id, run_id = getattr(run, "dag_id", None), getattr(run, "run_id", None)
    what = f"DAG {dag_id} run {run_id}" if dag_id else "A DAG run"
    deadline = context.get("deadline")
    if not isinstance(deadline, Mapping):
        return what
    when = deadline.get("deadline_time")
    when = when.isoformat() if isinstance(when, datetime) else when
    return f"{what} missed its deadline{f' of {when}' if when else ''}"
