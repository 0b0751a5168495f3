"""Wait until the service has read a table's file (``Processed`` is true)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue

from airflow_tables.model import TableStatus, TableWatch, check_wait
from airflow_tables.utils import waiting
from airflow_tables.utils.tasks import DataTablesTaskMixin
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
    """

    template_fields: Sequence[str] = ("project_id", "card_id")
    ui_color = "#e0f2fe"

    def __init__(
        self,
        *,
        card_id: str,
        project_id: str | None = None,
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
        self.datatables_conn_id = datatables_conn_id
        self.deferrable = deferrable

    def poke(self, context: Context) -> PokeReturnValue:
        from airflow_tables.hooks._http import card_id_problem

        problem = card_id_problem(self.card_id)
        if problem is not None:
            raise AirflowFailException(f"{self.task_id}: {problem}; nothing was sent.")
        department = self.department
        look = self.hook.look(department, self.card_id)
        if look.status is TableStatus.BEING_READ:
            self.log.info("Table %s is being read", self.card_id)
            return PokeReturnValue(is_done=False)
        with self._skipped_when_soft():
            return PokeReturnValue(is_done=True, xcom_value=waiting.finished(look, department))

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        result = self.poke(context)  # a table already read never defers
        if result.is_done:
            return result.xcom_value
        waiting.defer(
            self,
            conn_id=self.datatables_conn_id,
            project_id=self.department,
            watch=TableWatch(self.card_id),
            poll_interval=float(self.poke_interval),
            timeout=self.timeout,
        )

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

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict:
        """Resume after the trigger: the summary, or fail closed."""
        with self._skipped_when_soft():
            summary = waiting.resolve_event(event, card_id=self.card_id)
        table = waiting.table_of(summary)
        self.log.info("Table %s is ready: %s rows", self.card_id, table.rows if table else None)
        return summary
