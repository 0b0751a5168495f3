"""Put the emulator together: storage, reader, the ``/v1.0`` routes and, on request, the test controls.

Starlette rather than FastAPI (on which FastAPI is built): every body must be the
seed's envelope, including the framework's own 404 and 405, and FastAPI adds its
own error bodies and imports to a server that should be ready
well within a second.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.exceptions import HTTPException

from airflow_tables.emulator.api import Api, json_response
from airflow_tables.emulator.profile import connector_columns
from airflow_tables.emulator.reader import Reader, ReadingControls
from airflow_tables.emulator.store import Store

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from airflow_tables.emulator.config import EmulatorConfig

log = logging.getLogger("airflow_tables.emulator")


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)  # registered for HTTPException only
    path = request.url.path
    if exc.status_code == 404 and len(path) > 1 and path.endswith("/"):
        msg = f"there is no endpoint {request.method} {path}; the service's paths have no trailing slash"
    elif exc.status_code == 404:
        msg = f"there is no endpoint {request.method} {path}; the service's endpoints are under /v1.0"
    elif exc.status_code == 405:
        msg = f"{request.method} is not allowed on {request.url.path}"
    else:
        msg = exc.detail
    return json_response(time.perf_counter(), exc.status_code, {"Msg": msg}, getattr(exc, "headers", None))


async def _server_error(request: Request, exc: Exception) -> Response:
    log.exception("internal error on %s %s", request.method, request.url.path, exc_info=exc)
    return json_response(time.perf_counter(), 500, {"Msg": f"internal error of the emulator: {type(exc).__name__}"})


def create_app(config: EmulatorConfig):
    """Open (or create) the data directory, sync the configuration and return the ASGI app.

    Readings a killed process left unfinished resume when the app starts (its
    lifespan), so they run in the serving process.
    """
    store = Store(config.data_dir)
    store.sync_config(config, connector_columns)
    removed = store.remove_orphan_files()
    if removed:
        log.info("removed %d file(s) of uploads that never finished", removed)
    controls = ReadingControls(config.processing_delay)
    reader = Reader(store, controls, config.limits)
    api = Api(config, store, reader)
    routes = api.routes()
    faults = None
    if config.test_controls:
        from airflow_tables.emulator.controls import Controls
        from airflow_tables.emulator.faults import Faults

        faults = Faults()
        routes += Controls(api, controls, faults).routes()

    @contextlib.asynccontextmanager
    async def lifespan(app):
        resumed = reader.resume()
        if resumed:
            log.info("resumed %d reading(s) an earlier process left unfinished", resumed)
        yield

    app = Starlette(
        routes=routes,
        exception_handlers={HTTPException: _http_error, Exception: _server_error},
        lifespan=lifespan,
    )
    # Starlette answers a path with a trailing slash with a bare 307 to the path without it; every
    # answer of the service carries Msg and ExecTime, so it is a 404 in the envelope instead.
    app.router.redirect_slashes = False
    app.state.api = api
    if faults is None:
        return app
    from airflow_tables.emulator.faults import FaultMiddleware

    return FaultMiddleware(app, faults)
