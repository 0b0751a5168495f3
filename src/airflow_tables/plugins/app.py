"""The FastAPI app behind ``/datatables/``: two pages and the JSON routes they render from.

Built by :class:`~airflow_tables.plugins.plugin.LazyApp` on the api-server's first request.
Every page and JSON route sits behind Airflow's own authentication and authorisation
dependencies: reading connections and assets (and, for a task's table, the DAG's XComs); the
credit claims of :mod:`.budget` are signed by workers with the connection's key instead.
Unauthenticated requests get 401, unauthorised ones 403, pages and JSON alike. What is sent
holds no API key: connections are described by :class:`.models.ConnectionInfo`, errors
by the hook's scrubbed messages. Every JSON route declares its answer's model (:mod:`.models`);
the OpenAPI document (``/openapi.json``) sits behind the same dependencies as the routes. The
pages are static files that build their DOM with ``textContent`` (ids and names are never
parsed as HTML) under a strict Content-Security-Policy.
"""

from __future__ import annotations

import html
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.resource_details import ConnectionDetails, DagAccessEntity
from airflow.api_fastapi.core_api.security import (
    GetUserDep,
    requires_access_asset,
    requires_access_connection,
    requires_access_dag,
)
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from airflow_tables.plugins.budget import add_routes as add_budget_routes
from airflow_tables.plugins.models import (
    LISTED,
    ConnectionInfo,
    ConnectionsResponse,
    ListedState,
    SortKey,
    State,
    TableDetailPage,
    TablesPage,
    TaskTable,
)
from airflow_tables.plugins.monitor import Monitor
from airflow_tables.plugins.overview import DEFAULT_REFRESH_SECONDS, DEFAULT_UI_TIMEOUT, page_of
from airflow_tables.plugins.plugin import base_path

STATIC = Path(__file__).with_name("static")
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'self'"
)
NO_STORE = {"Cache-Control": "no-store"}
OPENAPI = "/openapi.json"

#: Reading this page means reading connections (which tables a key sees) and assets (who imported them).
READERS = [Depends(requires_access_connection("GET")), Depends(requires_access_asset("GET"))]
#: A task's table also needs the task's XComs (its CardID).
XCOM_READER = Depends(requires_access_dag("GET", DagAccessEntity.XCOM))


def refresh_seconds() -> float:
    """``[datatables] ui_refresh_seconds``: how long a listing is shared before the service is asked again."""
    from airflow.configuration import conf

    value = conf.getfloat("datatables", "ui_refresh_seconds", fallback=DEFAULT_REFRESH_SECONDS)
    return value if value > 0 else DEFAULT_REFRESH_SECONDS


def ui_timeout() -> float:
    """``[datatables] ui_timeout_seconds``: the longest a page request waits for the service."""
    from airflow.configuration import conf

    value = conf.getfloat("datatables", "ui_timeout_seconds", fallback=DEFAULT_UI_TIMEOUT)
    return value if value > 0 else DEFAULT_UI_TIMEOUT


def connection_reader(user: GetUserDep) -> Callable[[str], bool]:
    """Whether the user may read a connection, by id (fine-grained auth managers decide per connection)."""
    auth_manager = get_auth_manager()

    def readable(conn_id: str) -> bool:
        return auth_manager.is_authorized_connection(
            method="GET", details=ConnectionDetails(conn_id=conn_id), user=user
        )

    return readable


Readable = Annotated[Callable[[str], bool], Depends(connection_reader)]


def _page(name: str) -> FileResponse:
    return FileResponse(STATIC / name, media_type="text/html", headers={"Content-Security-Policy": CSP, **NO_STORE})


def _map_index(text: str | None) -> int:
    """The UI fills ``{MAP_INDEX}`` only for mapped tasks; anything else is an unmapped task (-1)."""
    try:
        return int(text) if text is not None else -1
    except ValueError:
        return -1


def create_app(monitor: Monitor | None = None) -> FastAPI:
    """The app served under ``/datatables``; ``monitor`` defaults to one configured from Airflow's settings."""
    monitor = monitor or Monitor(refresh_seconds(), base_path=base_path(), ui_timeout=ui_timeout())
    # The interactive docs would need scripts from a CDN, which the page's CSP refuses: the document only.
    app = FastAPI(title="Data Tables", docs_url=None, redoc_url=None, openapi_url=None)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.exception_handler(HTTPException)
    async def refused(request: Request, exc: HTTPException) -> Response:
        # The JSON routes answer as Airflow's API does; a page answers with a sentence, not JSON.
        if "/api/" in request.url.path or request.url.path.endswith(OPENAPI):
            return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)
        words = {401: "Log in to Airflow to see this page.", 403: "You may not read connections and assets."}
        text = html.escape(words.get(exc.status_code, str(exc.detail)))
        body = f"<!doctype html><title>Data Tables</title><p>{text}</p>"
        return HTMLResponse(body, status_code=exc.status_code, headers={"Content-Security-Policy": CSP})

    @app.get("/", dependencies=READERS, include_in_schema=False)
    def index() -> FileResponse:
        return _page("index.html")

    @app.get("/task", dependencies=READERS, include_in_schema=False)
    def task_page() -> FileResponse:
        return _page("task.html")

    @app.get(OPENAPI, dependencies=READERS, include_in_schema=False)
    def openapi(request: Request) -> JSONResponse:
        document = dict(app.openapi())
        root = request.scope.get("root_path", "").rstrip("/")
        if root:  # where the api-server mounts the app, so the paths resolve
            document["servers"] = [{"url": root}]
        return JSONResponse(document, headers=NO_STORE)

    @app.get("/api/connections", dependencies=READERS, response_model=ConnectionsResponse)
    def connections(readable: Readable, response: Response) -> ConnectionsResponse:
        response.headers.update(NO_STORE)
        return ConnectionsResponse(
            refresh_seconds=monitor.ttl,
            connections=[info for info in monitor.connections() if readable(info.conn_id)],
            states=[State(state=status, label=status.label) for status in LISTED],
        )

    def department_of(
        conn_id: str, project_id: str | None, readable: Callable[[str], bool]
    ) -> tuple[ConnectionInfo, str]:
        info = monitor.connection(conn_id)
        if info is None or not readable(conn_id):
            raise HTTPException(404, f"no datatables connection {conn_id!r} that you may read")
        project = (project_id or "").strip() or info.project_id
        if not project:
            raise HTTPException(400, f"connection {conn_id!r} has no project_id extra: name a department")
        return info, project

    @app.get(
        "/api/tables",
        dependencies=READERS,
        response_model=TablesPage,
        responses={304: {"description": "Unchanged since the ETag sent in If-None-Match (the page's poll)."}},
    )
    def tables(
        request: Request,
        readable: Readable,
        response: Response,
        conn_id: str = Query(min_length=1, max_length=250),
        project_id: str | None = Query(default=None, max_length=250),
        state: ListedState | None = None,
        q: str | None = Query(default=None, max_length=200),
        offset: int = Query(default=0, ge=0),
        limit: int = Query(default=100, ge=1, le=500),
        sort: SortKey = "attention",
        desc: bool = False,
    ) -> TablesPage | Response:
        info, project = department_of(conn_id, project_id, readable)
        view, pending = monitor.department_state(info, project)
        # The page polls every interval: an unchanged listing costs one header, not a page of rows.
        query = request.url.query.encode("utf-8", "replace")
        etag = f'"{view.version()}-{int(pending)}-{zlib.crc32(query):08x}"'
        headers = {**NO_STORE, "ETag": etag}
        if request.headers.get("if-none-match") == etag:
            return Response(status_code=304, headers=headers)
        response.headers.update(headers)
        return page_of(
            view,
            state=state,
            text=q,
            offset=offset,
            limit=limit,
            sort=sort,
            desc=desc,
            refresh_seconds=monitor.ttl,
            pending=pending,
        )

    @app.get("/api/table", dependencies=READERS, response_model=TableDetailPage)
    def table(
        readable: Readable,
        response: Response,
        conn_id: str = Query(min_length=1, max_length=250),
        card_id: str = Query(min_length=1, max_length=250),
        project_id: str | None = Query(default=None, max_length=250),
    ) -> TableDetailPage:
        info, project = department_of(conn_id, project_id, readable)
        response.headers.update(NO_STORE)
        return monitor.table_page(info, project, card_id)

    @app.get("/api/task", dependencies=[*READERS, XCOM_READER], response_model=TaskTable)
    def task_table(
        readable: Readable,
        response: Response,
        dag_id: str = Query(min_length=1, max_length=250),
        run_id: str = Query(min_length=1, max_length=250),
        task_id: str = Query(min_length=1, max_length=250),
        map_index: str | None = None,
    ) -> TaskTable:
        response.headers.update(NO_STORE)
        return monitor.task_table(dag_id, run_id, task_id, _map_index(map_index), readable=readable)

    add_budget_routes(app)  # workers' credit claims: signed with the connection's key, not a user's session
    return app
