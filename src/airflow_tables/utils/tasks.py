"""What every Data Tables task has: a connection, a department and a lazily built hook."""

from __future__ import annotations

import logging
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow_tables.utils.openlineage import OpenLineageMixin
from airflow_tables.version_compat import AirflowFailException

if TYPE_CHECKING:
    from airflow_tables.assets import TableRef
    from airflow_tables.hooks.tables import DataTablesHook

log = logging.getLogger(__name__)


class DataTablesTaskMixin(OpenLineageMixin):
    """Gives an operator or sensor ``hook`` and ``department`` from ``datatables_conn_id``/``project_id``.

    The connection is read when the task's templates are rendered, in the task's own process:
    that is before the OpenLineage provider forks to ask for the START event's datasets, and a
    forked child cannot read a connection (:mod:`airflow_tables.utils.openlineage`). The task reads
    it then anyway; a connection that cannot be read fails the task in ``execute``, saying why.
    """

    datatables_conn_id: str
    project_id: str | None
    task_id: str

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        super().render_template_fields(context, jinja_env)  # type: ignore[misc]
        try:
            self.hook.settings  # noqa: B018 - resolved now, in this process, for the lineage's START event
        except Exception as err:  # said again, with its reason, by the first request in execute
            log.debug("connection %r not read while rendering: %s", self.datatables_conn_id, err)

    @cached_property
    def hook(self) -> DataTablesHook:
        from airflow_tables.hooks.tables import DataTablesHook  # not at DAG parse time

        return DataTablesHook(self.datatables_conn_id)

    @property
    def department(self) -> str:
        """The ProjectID: the task's, else (when it was left out) the connection's ``project_id`` extra.

        An explicit value that names nothing (``""``, white space, ``"None"``: a template that
        rendered nothing) fails without retry: falling back would import into another department.
        The check is the hook's own (:func:`~airflow_tables.hooks._ids.checked_project_id`).
        """
        if self.project_id is not None:
            from airflow_tables.hooks._ids import checked_project_id

            try:
                return checked_project_id(self.project_id)
            except ValueError as err:
                raise refusal(self.task_id, str(err)) from None
        default = self.hook.settings.project_id
        if not default:
            raise AirflowFailException(
                f"{self.task_id}: no project_id given, and connection {self.datatables_conn_id!r} "
                "has no project_id extra"
            )
        return default

    def known_table(self, card_id: object) -> TableRef | None:
        """The identity of table ``card_id`` when the connection was read already; ``None`` rather than a lookup.

        What lineage names a table by before the task has run (``lineage_at_start``): no I/O, so
        that it works in the OpenLineage provider's forked child.
        """
        hook = self.__dict__.get("hook")
        settings = hook.known_settings if hook is not None else None
        if settings is None or not isinstance(card_id, str) or not card_id:
            return None
        try:
            project = self.department
        except AirflowFailException:  # said by execute, with its reason
            return None
        from airflow_tables.assets import table_ref

        return table_ref(project, card_id, service=settings.base_url)

    @property
    def department_origin(self) -> str:
        """Where :attr:`department` came from, for messages that say which department was looked at."""
        if self.project_id is not None:
            return "the task's project_id"
        return f"the project_id extra of connection {self.datatables_conn_id!r}"


def refusal(task_id: str, problem: str) -> AirflowFailException:
    """The one sentence a task fails with, without retry, for an argument that rendered wrong (before any request)."""
    return AirflowFailException(f"{task_id}: {problem}; nothing was sent.")


def check_card_id(task_id: str, card_id: object) -> str:
    """``card_id`` when it has a CardID's shape; else the task's :func:`refusal` naming what is wrong."""
    from airflow_tables.hooks._ids import card_id_problem

    problem = card_id_problem(card_id)
    if problem is not None:
        raise refusal(task_id, problem)
    return str(card_id)
