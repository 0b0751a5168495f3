"""Everything the page reads, through caches that every viewer of this api-server shares.

* the ``datatables`` connections (discovered and resolved once per interval);
* each department's view (one list request, a few queries of Airflow's events, XComs and
  DAGs, then rows built once), per connection and department, once per interval;
* a table's details (description, columns), fetched when its page is open, and a few per
  listing in the background (fetches are free) for column search and the reasons of failed reads.

The interval is ``[datatables] ui_refresh_seconds`` (default 30, the operators' default
poll interval), so twenty people watching a department cost the service one list request
per interval, as one waiting task does.

Bounded cost: the service is asked from background threads (:class:`.cache.BackgroundCache`);
a page request waits for it at most ``[datatables] ui_timeout_seconds`` (default 2 s) and then
answers with the last listing, its age and the service's error. Requests are sent once, without
retries (the next interval is the retry) and with a timeout; a ``Retry-After`` is not slept out
but kept: the department is not listed again before it has passed. A department the service
does not know or the key may not read (404, 403) is remembered for :data:`NEGATIVE_SECONDS`.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from airflow_tables.model import TableDetail, TableSummary
from airflow_tables.plugins.cache import BackgroundCache, SharedCache
from airflow_tables.plugins.connections import describe, discover
from airflow_tables.plugins.models import ConnectionInfo, Credits, TableDetailPage, TaskTable
from airflow_tables.plugins.overview import (
    DEFAULT_UI_TIMEOUT,
    DepartmentView,
    Details,
    build_view,
    column_infos,
    describe_failure,
    imported_by,
    latest,
)

#: How long a department the service does not know (404) or the key may not read (403) is remembered.
NEGATIVE_SECONDS = 60.0
#: The longest a ``Retry-After`` keeps a department from being listed again.
MAX_HOLD_SECONDS = 600.0
#: Tables whose details are fetched in the background after each listing (failed ones first).
DETAIL_BUDGET = 20
#: Departments of one connection listed for the first time within one interval, at most: a viewer may
#: type any name, and each new one is a request to the service (200 typed names cost 219 requests).
NEW_DEPARTMENTS_PER_INTERVAL = 16
#: Background threads per connection for listings and fetches (a slow service delays only its own).
LANE_WORKERS = 2

ListCards = Callable[[str, str, float], list[TableSummary]]
GetCard = Callable[[str, str, str, float], TableDetail]


def ui_hook(conn_id: str, timeout: float) -> Any:
    """The connection's hook for the page: one attempt per request, within ``timeout`` seconds.

    The page's next refresh is its retry; a retry inside the api-server would hold a worker
    (and sleep out a ``Retry-After``), which is what the page must never do.
    """
    from airflow_tables.hooks.tables import DataTablesHook

    return DataTablesHook(conn_id, timeout=timeout, max_retries=0)


def record_secret(conn_id: str) -> str:
    """The connection's API key: what the provider signs its upload records with, so the page can check them.

    It stays in the api-server's process: the page shows what it verified, never the key.
    """
    from airflow_tables.hooks.tables import DataTablesHook

    return DataTablesHook(conn_id).settings.api_key


def budgeted(session: Any, credits: Credits, service: str, project_id: str, secret: str, now: datetime) -> Credits:
    """``credits`` with the department's budget for today, and what its ledger has claimed (the budget's own count)."""
    from airflow_tables import budget

    limit = budget.Budgets.from_conf().limit(project_id)
    if limit is None:
        return credits
    try:
        spent = len(budget.spent_in(session, service, project_id, budget.day_of(now), secret))
    except budget.LedgerError as err:
        return credits.model_copy(update={"budget": limit, "budget_error": str(err)})
    return credits.model_copy(update={"budget": limit, "budget_spent": spent, "budget_left": max(0, limit - spent)})


def list_cards(conn_id: str, project_id: str, timeout: float) -> list[TableSummary]:
    """One list request through the hook (its timeout, its key scrubbing), without retries."""
    return ui_hook(conn_id, timeout).tables(project_id)


def get_card(conn_id: str, project_id: str, card_id: str, timeout: float) -> TableDetail:
    """One fetch of a table's details (free), without retries."""
    return ui_hook(conn_id, timeout).table(project_id, card_id)


class Monitor:
    """The page's data source: connections, department views, tables and task tables, cached for ``ttl`` seconds.

    :param base_path: the api-server's URL path prefix, for links to runs and tasks.
    :param ui_timeout: the longest a request waits for the service (``[datatables] ui_timeout_seconds``).
    :param list_cards: how a department is listed (the benchmark counts calls through it).
    :param get_card: how a table's details are fetched.
    """

    def __init__(
        self,
        ttl: float,
        *,
        base_path: str = "",
        ui_timeout: float = DEFAULT_UI_TIMEOUT,
        list_cards: ListCards = list_cards,
        get_card: GetCard = get_card,
        detail_budget: int = DETAIL_BUDGET,
    ) -> None:
        self.ttl = ttl
        self.ui_timeout = ui_timeout
        self.base_path = base_path.rstrip("/")
        self._list_cards = list_cards
        self._get_card = get_card
        self.detail_budget = detail_budget
        self.details = Details()
        self._connections: SharedCache[list[ConnectionInfo]] = SharedCache(ttl)
        self._departments: BackgroundCache[DepartmentView] = BackgroundCache(ttl, wait=ui_timeout, workers=LANE_WORKERS)
        self._fetched: BackgroundCache[tuple[TableDetail | None, str]] = BackgroundCache(
            ttl, wait=ui_timeout, workers=LANE_WORKERS
        )
        self._new_departments: dict[str, list[float]] = {}  # per connection: when a department was first asked
        self._fillers: dict[str, ThreadPoolExecutor] = {}  # per connection, like the caches' lanes
        self._filling: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    @property
    def request_timeout(self) -> float:
        """A request to the service runs in the background for at most an interval (and at least the UI's wait)."""
        return max(self.ui_timeout, min(self.ttl, 30.0))

    @property
    def list_requests(self) -> int:
        """How many departments were listed (each one request to the service)."""
        return self._departments.loads

    def connections(self) -> list[ConnectionInfo]:
        return self._connections.get("all", lambda: [describe(conn_id) for conn_id in discover()]).value

    def connection(self, conn_id: str) -> ConnectionInfo | None:
        return next((info for info in self.connections() if info.conn_id == conn_id), None)

    # -- departments ----------------------------------------------------------------------------

    def department(self, info: ConnectionInfo, project_id: str, *, newer_than: float | None = None) -> DepartmentView:
        """The department's view (see :meth:`department_state`)."""
        return self.department_state(info, project_id, newer_than=newer_than)[0]

    def department_state(
        self, info: ConnectionInfo, project_id: str, *, newer_than: float | None = None
    ) -> tuple[DepartmentView, bool]:
        """The department's view, listed at most once per interval, and whether a listing is still under way.

        Waits at most ``ui_timeout`` for a listing; before the first one ends the view is empty.
        A department not listed yet counts against the connection's :data:`NEW_DEPARTMENTS_PER_INTERVAL`;
        past it, the view says so and nothing is asked of the service.
        """
        key = (info.conn_id, project_id)
        if self._departments.peek(key) is None and not self._may_list_new(info.conn_id):
            error = (
                f"more than {NEW_DEPARTMENTS_PER_INTERVAL} departments of this connection were asked for in the last "
                f"{self.ttl:g} s; {project_id} was not listed, to spare the service. Try again in a moment."
            )
            view = DepartmentView(info.conn_id, project_id, error=error, service=info.service, error_at=time.time())
            return view, False
        entry, pending = self._departments.get(
            key,
            lambda previous: self._load(info, project_id, previous),
            newer_than=newer_than,
            lane=info.conn_id,
        )
        if entry is None:
            return DepartmentView(info.conn_id, project_id, service=info.service, built_at=time.time()), True
        return entry.value, pending

    def _may_list_new(self, conn_id: str) -> bool:
        """Whether one more department of ``conn_id`` may be listed for the first time in this interval."""
        now = time.monotonic()
        with self._lock:
            recent = [at for at in self._new_departments.get(conn_id, []) if now - at < self.ttl]
            allowed = len(recent) < NEW_DEPARTMENTS_PER_INTERVAL
            if allowed:
                recent.append(now)
            self._new_departments[conn_id] = recent
        return allowed

    def _hold(self, err: BaseException) -> float:
        """How long a failed request's answer stands: its ``Retry-After``, a short negative cache, or an interval."""
        retry_after = getattr(err, "retry_after", None)
        if isinstance(retry_after, (int, float)) and retry_after > 0:
            return min(max(self.ttl, float(retry_after)), MAX_HOLD_SECONDS)
        if getattr(err, "status_code", None) in (403, 404):
            return max(self.ttl, NEGATIVE_SECONDS)
        return self.ttl

    def _load(
        self, info: ConnectionInfo, project_id: str, previous: DepartmentView | None
    ) -> tuple[DepartmentView, float]:
        if info.error is not None or info.service is None:
            error = info.error or "the connection has no service URL"
            return DepartmentView(info.conn_id, project_id, error=error, service=info.service), self.ttl
        try:
            tables = self._list_cards(info.conn_id, project_id, self.request_timeout)
        except Exception as err:  # noqa: BLE001 - a service that is down or refuses is shown, not raised
            error, now = describe_failure(err, project_id), time.time()
            if previous is not None and previous.listed:  # the last listing stands, with its age and the error
                return dataclasses.replace(previous, error=error, error_at=now, _orders={}), self._hold(err)
            return DepartmentView(
                info.conn_id, project_id, error=error, service=info.service, error_at=now
            ), self._hold(err)
        view = self._build(info, project_id, tables)
        self._fill_details(info, view)
        return view, self.ttl

    def _build(self, info: ConnectionInfo, project_id: str, tables: list[TableSummary]) -> DepartmentView:
        from airflow.utils.session import create_session

        from airflow_tables.plugins.events import (
            CREDIT_WINDOW,
            credits_spent,
            last_imports,
            schedules,
            unrecorded_imports,
        )

        service = info.service or ""
        now = datetime.now(UTC)
        secret = record_secret(info.conn_id)
        with create_session() as session:
            last = last_imports(session, service, project_id, secret)
            unrecorded = unrecorded_imports(session, {t.card_id for t in tables}, since=now - CREDIT_WINDOW)
            credits = credits_spent(session, service, project_id, secret, unrecorded=unrecorded, now=now)
            credits = budgeted(session, credits, service, project_id, secret, now)
            for each in unrecorded:
                last[each.card_id] = latest(last.get(each.card_id), each)  # type: ignore[assignment]  # never None
            dags = schedules(session, {each.dag_id for each in last.values()})
        return build_view(
            info, project_id, tables, last, credits, base_path=self.base_path, schedules=dags, details=self.details
        )

    def _fill_details(self, info: ConnectionInfo, view: DepartmentView) -> None:
        """Fetch, in the background, the details of a few tables read since their details were (failed first)."""
        missing = [t for t in view.tables if t.summary.processed and view.detail(t) is None][: self.detail_budget]
        key = (info.conn_id, view.project_id)
        with self._lock:
            if not missing or key in self._filling:
                return
            self._filling.add(key)

        def fill() -> None:
            try:
                for table in missing:
                    self._fetch(info, view.project_id, table.summary.card_id)
            except Exception:  # noqa: BLE001 - the next listing tries again; the page works without them
                pass
            finally:
                with self._lock:
                    self._filling.discard(key)

        with self._lock:
            filler = self._fillers.get(info.conn_id)
            if filler is None:
                filler = ThreadPoolExecutor(max_workers=1, thread_name_prefix="datatables-ui-details")
                self._fillers[info.conn_id] = filler
        filler.submit(fill)

    def _fetch(self, info: ConnectionInfo, project_id: str, card_id: str) -> TableDetail:
        detail = self._get_card(info.conn_id, project_id, card_id, self.request_timeout)
        self.details.put(info.conn_id, project_id, detail)
        return detail

    # -- one table -------------------------------------------------------------------------------

    def table_page(self, info: ConnectionInfo, project_id: str, card_id: str) -> TableDetailPage:
        """One table: its row in the shared listing, its details (fetched, cached), and Airflow's imports of it."""
        from airflow.utils.session import create_session

        from airflow_tables.assets import TableRef
        from airflow_tables.plugins.events import table_imports

        view, _ = self.department_state(info, project_id)
        entry, _ = self._fetched.get(
            (info.conn_id, project_id, card_id),
            lambda previous: self._load_detail(info, project_id, card_id, previous),
            lane=info.conn_id,
        )
        detail, detail_error = entry.value if entry is not None else (None, "the service has not answered yet")
        with create_session() as session:
            imports = table_imports(
                session, TableRef(info.service or "", project_id, card_id), record_secret(info.conn_id)
            )
        listed = view.table(card_id)
        return TableDetailPage(
            conn_id=info.conn_id,
            project_id=project_id,
            card_id=card_id,
            service=info.service,
            table=None if listed is None else view.row(listed),
            description=(detail.description or "") if detail is not None else "",
            columns=column_infos(detail) if detail is not None else [],
            imports=[imported_by(self.base_path, each) for each in imports],
            detail_error=detail_error,
            as_of=view.built_at,
            refresh_seconds=self.ttl,
            message=""
            if listed is not None or not view.listed
            else f"Table {card_id} is not in department {project_id}'s listing (deleted, or another department).",
        )

    def _load_detail(
        self, info: ConnectionInfo, project_id: str, card_id: str, previous: tuple[TableDetail | None, str] | None
    ) -> tuple[tuple[TableDetail | None, str], float]:
        try:
            return (self._fetch(info, project_id, card_id), ""), self.ttl
        except Exception as err:  # noqa: BLE001 - shown on the page, the last details kept
            kept = previous[0] if previous is not None else None
            return (kept, describe_failure(err, project_id)), self._hold(err)

    # -- a task's table --------------------------------------------------------------------------

    def task_table(
        self, dag_id: str, run_id: str, task_id: str, map_index: int, *, readable: Callable[[str], bool]
    ) -> TaskTable:
        """The table of one import/replace task instance and its state, through the connection the task used.

        The task's connection is the one its ``datatables_conn_id`` XCom names when there is one;
        otherwise the one whose link to the table equals the task's "Open table" link (its
        ``app_url``), else the one of the service its asset event names; never merely the first
        connection whose key can list the department.

        :param readable: whether the viewer may read a connection (by id).
        """
        from airflow.utils.session import create_session

        from airflow_tables.plugins.taskview import task_facts, used_connection

        with create_session() as session:
            facts = task_facts(session, dag_id, run_id, task_id, map_index)
        if facts.card_id is None:
            message = "This task has not imported or replaced a Data Tables table (no card_id in its XCom)."
            return TaskTable(message=message, refresh_seconds=self.ttl)
        newer_than = facts.pushed_at.timestamp() if facts.pushed_at is not None else None
        usable = [info for info in self.connections() if info.error is None]
        found = used_connection(facts, usable)
        if found is not None and readable(found[0].conn_id):
            info, project = found
            row = self.department(info, project, newer_than=newer_than).find(facts.card_id)
            if row is not None:
                return TaskTable(
                    card_id=facts.card_id, project_id=project, conn_id=info.conn_id, table=row, refresh_seconds=self.ttl
                )
        ref = facts.event_ref
        department = found[1] if found is not None else (ref.project_id if ref is not None else facts.project_id)
        return TaskTable(
            card_id=facts.card_id,
            project_id=department,
            conn_id=found[0].conn_id if found is not None and readable(found[0].conn_id) else None,
            message=(
                f"Table {facts.card_id} is not listed by the Data Tables connection this task used, or that "
                "connection is not one you may read (deleted since, or in another department)."
            ),
            refresh_seconds=self.ttl,
        )
