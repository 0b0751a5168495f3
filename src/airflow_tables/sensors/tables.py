"""Wait until the service has read a table's file (``Processed`` is true)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from airflow.sdk import BaseSensorOperator, PokeReturnValue

from airflow_tables.assets import table_ref
from airflow_tables.model import TableStatus, TableSummary, TableWatch, check_wait, service_time
from airflow_tables.utils import openlineage, waiting
from airflow_tables.utils.tasks import DataTablesTaskMixin, check_card_id
from airflow_tables.version_compat import AirflowFailException, AirflowSkipException, conf

if TYPE_CHECKING:
    from airflow.sdk import Context


class DataTablesProcessedSensor(DataTablesTaskMixin, BaseSensorOperator):
    """Wait until a table has been read; return its summary (``CardID``, ``Rows``, ``Processed``...).

    Works in ``poke``, ``reschedule`` and deferrable modes; deferred waits in one triggerer
    share one listing of the department per interval. A table read badly
    (``SuccessfulUpload`` false) or missing fails the task without retry, naming it.

    :param card_id: the table (templated).
    :param project_id: the department (templated); defaults to the connection's ``project_id``.
    :param completed_after: a datetime or ISO 8601 text (templated, e.g. ``{{ data_interval_end }}``):
        succeed only once the table has finished a read after that instant, so yesterday's
        read does not count as today's. A naive value is UTC, as the service's times are read.
        The service's times have whole seconds: a read shown in the instant's own second counts
        only when it was seen in progress (deferrable mode). ``None``: any finished read.
        In deferrable mode the instant rendered when the wait began holds until it ends, as does
        its deadline (``timeout``): a template that reads the clock (``{{ macros.datetime.utcnow() }}``)
        is not rendered anew on each resume.
    """

    template_fields: Sequence[str] = ("project_id", "card_id", "completed_after")
    ui_color = "#e0f2fe"

    def __init__(
        self,
        *,
        card_id: str,
        project_id: str | None = None,
        completed_after: datetime | str | None = None,
        datatables_conn_id: str = "datatables_default",
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("poke_interval", 30)
        super().__init__(**kwargs)
        poke = self.poke_interval.total_seconds() if isinstance(self.poke_interval, timedelta) else self.poke_interval
        check_wait(poke, None, poll_name="poke_interval")
        self.card_id = card_id
        self.project_id = project_id
        self.completed_after = completed_after
        self.datatables_conn_id = datatables_conn_id
        self.deferrable = deferrable

    def poke(self, context: Context) -> PokeReturnValue:
        check_card_id(self.task_id, self.card_id)
        department = self.department
        look = self.hook.look(department, self._watch())
        if look.status is TableStatus.BEING_READ:
            if look.idle_before:
                self.log.info("Table %s has not finished a read after %s yet", self.card_id, look.watch.replaced_after)
            else:
                self.log.info("Table %s is being read", self.card_id)
            return PokeReturnValue(is_done=False)
        with self._skipped_when_soft():
            return PokeReturnValue(is_done=True, xcom_value=self._read(waiting.finished(look, department)))

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        result = self.poke(context)  # a table already read never defers
        if result.is_done:
            return result.xcom_value
        self._defer(self._watch(), deadline=None)

    def _defer(self, watch: TableWatch, deadline: float | None) -> NoReturn:
        """Hand the wait to the trigger; the instant and the deadline go with it, to hold across resumes.

        ``deadline``: the end an earlier deferral of this wait was given (``None`` when it begins).
        """
        waiting.defer(
            self,
            conn_id=self.datatables_conn_id,
            project_id=self.department,
            watch=watch,
            poll_interval=float(self.poke_interval),
            timeout=self.timeout,
            deadline=deadline,
            resume_kwargs={"after": watch.replaced_after},
        )

    def _watch(self) -> TableWatch:
        """A watch that counts only reads finished after ``completed_after`` (the model's replacement rule).

        Each poke looks afresh: only a completion time later than the instant counts. The
        trigger carries its watch between looks, so there a read seen in progress counts
        when it ends (it ended after the look, hence after the instant when that is past).
        """
        if self.completed_after is None or self.completed_after == "":
            return TableWatch(self.card_id)
        try:
            after = service_time(self.completed_after)
        except (TypeError, ValueError):
            raise AirflowFailException(
                f"{self.task_id}: completed_after={self.completed_after!r} is not a date-time; give a datetime "
                "or ISO 8601 text such as '2026-11-26T07:00:00+00:00' (e.g. '{{ data_interval_end }}')"
            ) from None
        return TableWatch(self.card_id, replaced_after=after)

    @contextmanager
    def _skipped_when_soft(self) -> Iterator[None]:
        """Skip, naming the table, where it is gone or was read badly and ``soft_fail``/``never_fail`` is set.

        The same in every mode: the deferrable path's first look and the trigger's answer do
        not pass through the poke loop that applies these flags, and its skip would not say why.
        """
        try:
            yield
        except AirflowFailException as err:
            flag = "soft_fail" if self.soft_fail else "never_fail" if getattr(self, "never_fail", False) else None
            if flag is None:
                raise
            raise AirflowSkipException(f"{self.task_id}: {err}; skipped ({flag} is set)") from err

    def execute_complete(
        self, context: Context, event: dict[str, Any], after: str | None = None, deadline: float | None = None
    ) -> dict:
        """Resume after the trigger: the summary, or fail closed.

        ``after`` and ``deadline`` are what the wait began with, from the deferral's kwargs or, when a
        resume brings the event alone, from the event (a wait deferred by an earlier release has
        neither: then the instant is rendered again, and the ``timeout`` starts again).
        """
        with self._skipped_when_soft():
            table = waiting.resolve_event(event, card_id=self.card_id)
        if after is None and deadline is None and "deadline" in event:
            # Resumed with the event alone (Airflow 3.2's dag.test() drops the deferral's kwargs): the trigger
            # carries what the wait began with too.
            after, deadline = event.get("replaced_after"), event.get("deadline")
        watch = self._watch() if after is None and deadline is None else TableWatch(self.card_id, replaced_after=after)
        after = watch.replaced_after
        if after is not None and table is not None and table.completion_time and table.completion_time < after:
            # Seen in progress before a future ``completed_after`` and ended before it: wait on.
            self.log.info(
                "Table %s finished a read at %s, before %s: waiting on", self.card_id, table.completion_time, after
            )
            self._defer(watch, deadline)
        self.log.info("Table %s is ready: %s rows", self.card_id, table.rows if table else None)
        return self._read(table)

    def lineage_at_start(self) -> openlineage.TaskLineage:
        """The table waited on, once the connection is read (while the templates were rendered)."""
        ref = self.known_table(self.card_id)
        return openlineage.TaskLineage([] if ref is None else [openlineage.table_dataset(ref)])

    def _read(self, table: TableSummary | None) -> dict[str, Any]:
        """The summary returned (XCom), the table's read kept for lineage (an input, with its rows)."""
        ref = table_ref(self.department, self.card_id, service=self.hook.settings.base_url)
        self.lineage.inputs = [openlineage.table_dataset(ref, **openlineage.read_table(table, None))]
        return _summary(table)


def _summary(table: TableSummary | None) -> dict[str, Any]:
    """The sensor's XCom: the table's summary as the service wrote it (empty when none was seen)."""
    return {} if table is None else table.to_json()
