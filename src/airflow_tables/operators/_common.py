"""What every Data Tables task has: a connection, a department and a lazily built hook."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from airflow_tables.version_compat import AirflowFailException

if TYPE_CHECKING:
    from airflow_tables.hooks.tables import DataTablesHook


class DataTablesTaskMixin:
    """Gives an operator or sensor ``hook`` and ``department`` from ``datatables_conn_id``/``project_id``."""

    datatables_conn_id: str
    project_id: str | None
    task_id: str

    @cached_property
    def hook(self) -> DataTablesHook:
        from airflow_tables.hooks.tables import DataTablesHook  # not at DAG parse time

        return DataTablesHook(self.datatables_conn_id)

    @property
    def department(self) -> str:
        """The ProjectID: the task's, else the connection's ``project_id`` extra."""
        project = self.project_id or self.hook.settings.project_id
        if not project:
            raise AirflowFailException(
                f"{self.task_id}: no project_id given, and connection {self.datatables_conn_id!r} "
                "has no project_id extra"
            )
        return project
