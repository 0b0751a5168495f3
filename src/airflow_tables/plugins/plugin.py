"""The Airflow plugin: a "Data Tables" navigation entry and a "Table" tab on task instances.

Every Airflow component (scheduler, workers, triggerer, dag-processor) imports the plugins
the provider registers, so this module only declares: it imports no FastAPI, no hook and
builds nothing. The FastAPI app is an ASGI stand-in that builds the real one
(:func:`airflow_tables.plugins.app.create_app`) on its first request, which only the
api-server ever serves. ``external_views`` exist from Airflow 3.1 (``fastapi_apps`` from 3.0);
an Airflow that does not know an attribute ignores it, and the rest of the provider loads as before.
"""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import urlsplit

try:
    from airflow.plugins_manager import AirflowPlugin
except ImportError:  # a worker with the Task SDK only
    from airflow.sdk.plugins_manager import AirflowPlugin  # type: ignore[assignment]  # the SDK's copy of the class

URL_PREFIX = "/datatables"
APP_FACTORY = "airflow_tables.plugins.app:create_app"


def base_path() -> str:
    """The api-server's URL path prefix (``[api] base_url``'s path), without a trailing slash."""
    try:
        from airflow.configuration import conf
    except ImportError:  # a worker with the Task SDK only: nothing here is served there
        return ""
    base_url = conf.get("api", "base_url", fallback="") or ""
    path = urlsplit(base_url).path if "://" in base_url else base_url
    return path.rstrip("/")


Scope = dict[str, Any]


class LazyApp:
    """An ASGI app that imports and builds the real one when the first request arrives."""

    def __init__(self, factory: str) -> None:
        self.factory = factory
        self._app: Any = None
        self._lock = threading.Lock()

    def build(self) -> Any:
        with self._lock:
            if self._app is None:
                module, _, name = self.factory.partition(":")
                from importlib import import_module

                self._app = getattr(import_module(module), name)()
            return self._app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        app = self._app if self._app is not None else self.build()
        await app(scope, receive, send)


def _external_views(prefix: str) -> list[dict[str, str]]:
    return [
        {
            "name": "Data Tables",
            "href": f"{prefix}{URL_PREFIX}/",
            "destination": "nav",
            "category": "browse",
            "url_route": "datatables",
            "icon": f"{prefix}{URL_PREFIX}/static/icon.svg",
        },
        {
            "name": "Table",
            "href": (
                f"{prefix}{URL_PREFIX}/task?dag_id={{DAG_ID}}&run_id={{RUN_ID}}"
                "&task_id={TASK_ID}&map_index={MAP_INDEX}"
            ),
            "destination": "task_instance",
            "url_route": "datatables-task-table",
        },
    ]


def _listener() -> Any:
    """The provider's task-instance listener (plugins/listener.py): it deletes a ``@task``'s notes when it ends."""
    from airflow_tables.plugins import listener

    return listener


class DataTablesPlugin(AirflowPlugin):
    """Monitor Data Tables departments from the Airflow UI (served by the api-server under ``/datatables/``)."""

    name = "datatables"
    fastapi_apps = [{"app": LazyApp(APP_FACTORY), "url_prefix": URL_PREFIX, "name": "Data Tables"}]
    listeners = [_listener()]
    external_views = _external_views(base_path())
