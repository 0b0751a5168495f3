"""The plugin as Airflow loads it: registered once, cheap to import, the app built on first request."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from airflow_tables import get_provider_info


def test_provider_info_and_entry_point_name_the_same_plugin_class():
    from importlib.metadata import entry_points

    (listed,) = get_provider_info()["plugins"]
    (entry,) = [ep for ep in entry_points(group="airflow.plugins") if ep.name == "datatables"]
    assert listed["plugin-class"] == entry.value.replace(":", ".")
    assert listed["name"] == entry.load().name == "datatables"


def test_airflow_loads_the_plugin_once_without_import_errors():
    """With the provider installed editable, as make setup and scripts/matrix.py install it (issue 38).

    setuptools used to write ``airflow_tables.egg-info`` into ``src/``, which the editable install
    puts on ``sys.path``: Airflow found the distribution twice ("already registered").
    """
    from importlib.metadata import distributions
    from pathlib import Path

    from airflow import plugins_manager

    src = Path(__file__).resolve().parents[2] / "src"
    assert not list(src.glob("*.egg-info")), "build metadata beside the package, on sys.path"
    assert [d.metadata["Name"] for d in distributions()].count("airflow-tables") == 1

    if hasattr(plugins_manager, "_get_plugins"):  # Airflow 3.2+
        plugins, errors = plugins_manager._get_plugins()
    else:  # Airflow 3.1: module globals, filled once
        plugins_manager.ensure_plugins_loaded()
        plugins, errors = plugins_manager.plugins or [], plugins_manager.import_errors
    assert [p.name for p in plugins].count("datatables") == 1
    assert not [source for source in errors if "datatables" in source or "airflow_tables" in source], errors


def test_importing_the_plugin_builds_nothing():
    """Every Airflow component imports plugins: no FastAPI, no hook, no app until a request comes."""
    code = (
        "import sys, json; import airflow.plugins_manager; before = set(sys.modules);"
        "from airflow_tables.plugins.plugin import DataTablesPlugin as P;"
        "new = set(sys.modules) - before;"
        "print(json.dumps({'new': sorted(new), 'built': P.fastapi_apps[0]['app']._app is not None}))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert not report["built"]
    heavy_packages = ("fastapi", "starlette", "requests", "httpx", "pandas", "great_expectations")
    heavy = [m for m in report["new"] if m.split(".")[0] in heavy_packages]
    assert not heavy, heavy
    built_later = ("airflow_tables.hooks", "airflow_tables.plugins.app", "airflow_tables.plugins.models")
    assert not [m for m in report["new"] if m.startswith(built_later)]


def test_views_name_the_nav_entry_and_the_task_instance_tab():
    from airflow_tables.plugins.plugin import DataTablesPlugin

    views = {view["destination"]: view for view in DataTablesPlugin.external_views}
    assert views["nav"]["name"] == "Data Tables" and views["nav"]["href"].endswith("/datatables/")
    task = views["task_instance"]
    assert task["name"] == "Table"
    for placeholder in ("{DAG_ID}", "{RUN_ID}", "{TASK_ID}", "{MAP_INDEX}"):
        assert placeholder in task["href"]
    assert DataTablesPlugin.fastapi_apps[0]["url_prefix"] == "/datatables"


def test_the_lazy_app_builds_the_real_one_on_its_first_request():
    """Through the ASGI interface, as the api-server mounts it: the icon needs no login."""
    from airflow_tables.plugins.plugin import APP_FACTORY, LazyApp

    lazy = LazyApp(APP_FACTORY)
    sent: list[dict] = []
    asked: list[int] = []

    async def receive() -> dict:
        # The request's (empty) body first; after that the client stays until the response ends.
        asked.append(1)
        if len(asked) == 1:
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()
        raise AssertionError("unreachable: the server stops listening when its response is sent")

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {
        "type": "http", "http_version": "1.1", "method": "GET", "scheme": "http", "path": "/static/icon.svg",
        "raw_path": b"/static/icon.svg", "root_path": "", "query_string": b"", "headers": [],
        "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1),
    }  # fmt: skip
    assert lazy._app is None
    asyncio.run(lazy(dict(scope), receive, send))  # routing writes into the scope: a fresh one each time
    app = lazy._app
    asked.clear()
    asyncio.run(lazy(dict(scope), receive, send))
    assert lazy._app is app, "built once"
    starts = [m for m in sent if m["type"] == "http.response.start"]
    assert [m["status"] for m in starts] == [200, 200]
    assert b"<svg" in b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
