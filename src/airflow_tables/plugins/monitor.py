"""Everything the page reads, through caches that every viewer of this api-server shares.

* the ``datatables`` connections (discovered and resolved once per interval);
* each department's view (one list request, two queries of Airflow's asset events, then
  rows built once), per connection and department, once per interval.

The interval is ``[datatables] ui_refresh_seconds`` (default 30, the operators' default
poll interval), so twenty people watching a department cost the service one list request
per interval, as one waiting task does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow_tables.plugins.cache import SharedCache
from airflow_tables.plugins.connections import describe, discover
from airflow_tables.plugins.models import ConnectionInfo, TaskTable
from airflow_tables.plugins.overview import DepartmentView, build_view, describe_failure

#: The page must answer while a service hangs or refuses: short waits between retries.
LIST_BACKOFF_BASE = 0.2
LIST_BACKOFF_MAX = 2.0

ListCards = Callable[[str, str], list[dict[str, Any]]]


def list_cards(conn_id: str, project_id: str) -> list[dict[str, Any]]:
    """One list request through the hook (its retries, its timeout, its key scrubbing)."""
    from airflow_tables.hooks.tables import DataTablesHook

    hook = DataTablesHook(conn_id, backoff_base=LIST_BACKOFF_BASE, backoff_max=LIST_BACKOFF_MAX)
    return hook.list_cards(project_id)


class Monitor:
    """The page's data source: connections, department views and task tables, cached for ``ttl`` seconds.

    :param base_path: the api-server's URL path prefix, for links to runs and tasks.
    :param list_cards: how a department is listed (the benchmark counts calls through it).
    """

    def __init__(self, ttl: float, *, base_path: str = "", list_cards: ListCards = list_cards) -> None:
        self.ttl = ttl
        self.base_path = base_path.rstrip("/")
        self._list_cards = list_cards
        self._connections: SharedCache[list[ConnectionInfo]] = SharedCache(ttl)
        self._departments: SharedCache[DepartmentView] = SharedCache(ttl)

    @property
    def list_requests(self) -> int:
        """How many departments were listed (each a request to the service, retries aside)."""
        return self._departments.loads

    def connections(self) -> list[ConnectionInfo]:
        return self._connections.get("all", lambda: [describe(conn_id) for conn_id in discover()]).value

    def connection(self, conn_id: str) -> ConnectionInfo | None:
        return next((info for info in self.connections() if info.conn_id == conn_id), None)

    def department(self, info: ConnectionInfo, project_id: str, *, newer_than: float | None = None) -> DepartmentView:
        """The department's view, listed at most once per interval (or again if older than ``newer_than``)."""
        entry = self._departments.get(
            (info.conn_id, project_id), lambda: self._load(info, project_id), newer_than=newer_than
        )
        return entry.value

    def _load(self, info: ConnectionInfo, project_id: str) -> DepartmentView:
        if info.error is not None or info.service is None:
            error = info.error or "the connection has no service URL"
            return DepartmentView(info.conn_id, project_id, error=error, service=info.service)
        try:
            cards = self._list_cards(info.conn_id, project_id)
        except Exception as err:  # noqa: BLE001 - a service that is down or refuses is shown, not raised
            error = describe_failure(err, project_id)
            return DepartmentView(info.conn_id, project_id, error=error, service=info.service)
        from airflow.utils.session import create_session

        from airflow_tables.plugins.events import credits_spent, last_imports

        with create_session() as session:
            last = last_imports(session, info.service, project_id)
            credits = credits_spent(session, info.service, project_id)
        return build_view(info, project_id, cards, last, credits, base_path=self.base_path)

    def task_table(
        self, dag_id: str, run_id: str, task_id: str, map_index: int, *, readable: Callable[[str], bool]
    ) -> TaskTable:
        """The table of one import/replace task instance and its state, looked up in the cached listings.

        :param readable: whether the viewer may read a connection (by id).
        """
        from airflow.utils.session import create_session

        from airflow_tables.plugins.taskview import task_facts

        with create_session() as session:
            facts = task_facts(session, dag_id, run_id, task_id, map_index)
        if facts.card_id is None:
            message = "This task has not imported or replaced a Data Tables table (no card_id in its XCom)."
            return TaskTable(message=message, refresh_seconds=self.ttl)
        newer_than = facts.pushed_at.timestamp() if facts.pushed_at is not None else None
        ref = facts.event_ref
        for info in self.connections():
            if info.error is not None or not readable(info.conn_id):
                continue
            if ref is not None and ref.service != info.service:
                continue
            project = ref.project_id if ref is not None else (facts.project_id or info.project_id)
            if not project:
                continue
            row = self.department(info, project, newer_than=newer_than).find(facts.card_id)
            if row is not None:
                return TaskTable(
                    card_id=facts.card_id, project_id=project, conn_id=info.conn_id, table=row, refresh_seconds=self.ttl
                )
        return TaskTable(
            card_id=facts.card_id,
            project_id=ref.project_id if ref is not None else facts.project_id,
            message=(
                f"Table {facts.card_id} is not listed by any Data Tables connection you may read "
                "(deleted since, or in a department no connection here can list)."
            ),
            refresh_seconds=self.ttl,
        )
