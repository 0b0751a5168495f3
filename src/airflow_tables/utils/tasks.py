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
        """The ProjectID: the task's, else (when it was left out) the connection's ``project_id`` extra.

        An explicit empty value (a template that rendered ``""``) fails: it is a mistake, and
        falling back would import into another department.
        """
        if self.project_id is not None:
            project = str(self.project_id).strip()
            if not project or project == "None":
                raise AirflowFailException(
                    f"{self.task_id}: project_id is {self.project_id!r}: name a department, or leave project_id "
                    f"out to use connection {self.datatables_conn_id!r}'s; nothing was sent."
                )
            return project
        default = self.hook.settings.project_id
        if not default:
            raise AirflowFailException(
                f"{self.task_id}: no project_id given, and connection {self.datatables_conn_id!r} "
                "has no project_id extra"
            )
        return default

    @property
    def department_origin(self) -> str:
        """Where :attr:`department` came from, for messages that say which department was looked at."""
        if self.project_id is not None:
            return "the task's project_id"
        return f"the project_id extra of connection {self.datatables_conn_id!r}"
