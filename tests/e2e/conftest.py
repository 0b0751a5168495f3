"""Session fixtures for the end-to-end tests: one real Airflow stack on PostgreSQL per session.

* ``system_deps``: ``scripts/system-deps.sh`` (PostgreSQL, Chromium); skips the e2e tests
  with the reason when it cannot install them, except on CI (``CI`` set), where it fails.
* ``postgres``: a throwaway server on 127.0.0.1.
* ``datatables_emulator``: the Data Tables emulator (3 s of reading per table), or
  ``None`` while ``airflow_tables.emulator.testing`` does not exist.
* ``airflow_stack``: scheduler, dag-processor, triggerer and api-server; the repo's
  ``dags/`` is the DAGs folder and ``tests/e2e/dags/`` a second bundle; the connection
  ``datatables_default`` points at the emulator (``AIRFLOW_CONN_DATATABLES_DEFAULT``).
* ``airflow_api``: the REST API client (as the admin user); ``browser``: headless Chromium,
  logged in as the admin.

Every test here is marked ``e2e``. Logs: ``artifacts/e2e/logs/``; a failing test's
report carries the tail of every component's log.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .harness import (
    ARTIFACTS,
    LOGS,
    REPO,
    AirflowApi,
    AirflowStack,
    Browser,
    Postgres,
    StackError,
    kill_marked,
    new_marker,
)

HERE = Path(__file__).resolve().parent
SMOKE_DAGS = HERE / "dags"
# Long enough that the trigger cannot fire before the executor has reported the deferring
# workload: on a loaded 2-core machine Airflow 3.3 can take seconds to do that, and a trigger
# that fires first races it (the scheduler then fails the try as "state changed externally").
EMULATOR_PROCESSING_DELAY = 10.0
APP_URL = "http://app.example.test"
UI_REFRESH_SECONDS = 2

_stack: AirflowStack | None = None  # for the failure report


def _is_e2e(item) -> bool:
    return HERE in Path(str(item.fspath)).resolve().parents


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if _is_e2e(item):
            item.add_marker(pytest.mark.e2e)

    # The e2e tests after the rest of the suite. The distributed run first: it brings a stack
    # of its own and has the 2 cores to itself before the session's stack starts. Then the
    # smoke tests: when the session's stack itself is broken, those say so most plainly. Then
    # the refresh watcher's test: example_datatables_cleanup (pattern "*") deletes every table
    # of the department, the watched one included. Otherwise the order is kept.
    def rank(item) -> int:
        if not _is_e2e(item):
            return 0
        if "test_distributed_e2e" in item.nodeid:
            return 1
        if "test_smoke_stack" in item.nodeid:
            return 2
        return 3 if "test_refresh_watcher" in item.nodeid else 4

    items.sort(key=rank)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
    if report.failed and _stack is not None and _is_e2e(item):
        report.sections.append(("e2e component logs", _stack.log_tails()))
    # The distributed run's own stack (test_distributed_e2e.py): where its logs are kept, and their tails.
    distributed = getattr(item, "funcargs", {}).get("distributed")
    if report.failed and distributed is not None:
        stack = distributed.stack
        report.sections.append(("distributed e2e logs", f"kept in {stack.log_dir}\n{stack.log_tails()}"))


@pytest.fixture(scope="session")
def system_deps():
    """Install (or find) PostgreSQL and Chromium; skip with the reason if impossible, fail on CI."""
    script = REPO / "scripts" / "system-deps.sh"
    result = subprocess.run(
        ["bash", str(script)], capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL
    )
    if result.returncode != 0:
        reason = f"scripts/system-deps.sh failed: {(result.stderr or result.stdout).strip()[-500:]}"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def e2e_marker():
    """A token in every started process's environment; whatever still has it at the end is killed."""
    marker = new_marker()
    # This session's artefacts only: logs and screenshots of an earlier run are removed.
    shutil.rmtree(LOGS, ignore_errors=True)
    for old in ARTIFACTS.glob("*.png"):
        old.unlink()
    LOGS.mkdir(parents=True, exist_ok=True)
    yield marker
    left = kill_marked(marker)
    if left:
        print(f"\ne2e: killed {len(left)} leftover process(es): {left}")


@pytest.fixture(scope="session")
def postgres(system_deps, e2e_marker):
    server = Postgres(e2e_marker)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def datatables_emulator():
    """The emulator the stack's ``datatables_default`` connection points at; None if not written yet."""
    if importlib.util.find_spec("airflow_tables.emulator.testing") is None:
        yield None
        return
    from airflow_tables.emulator.testing import EmulatorProcess

    data_dir = ARTIFACTS / "emulator"
    shutil.rmtree(data_dir, ignore_errors=True)
    emulator = EmulatorProcess(data_dir, processing_delay=EMULATOR_PROCESSING_DELAY)
    try:
        emulator.start()
        yield emulator
    finally:
        emulator.stop()


def datatables_connection(emulator) -> dict:
    return {
        "conn_type": "datatables",
        "host": emulator.base_url,
        "password": emulator.api_key,
        "extra": {"project_id": emulator.project_id, "app_url": APP_URL},
    }


@pytest.fixture(scope="session")
def watched_table(datatables_emulator) -> str | None:
    """A table made before the stack starts, whose CardID ``example_datatables_watch_refresh`` watches."""
    if datatables_emulator is None:
        return None
    import requests

    resp = requests.post(
        f"{datatables_emulator.base_url}/v1.0/data/import",
        headers={"X-API-Key": datatables_emulator.api_key},
        data={"ProjectID": datatables_emulator.project_id},
        files={"File": ("watched.csv", b"id,region\n1,North\n", "text/csv")},
        timeout=30,
    )
    resp.raise_for_status()
    return resp.json()["CardID"]


#: The stack's department's credit budget: more than its tests spend in a day.
BUDGET = 1000


@pytest.fixture(scope="session")
def airflow_stack(postgres, datatables_emulator, watched_table, e2e_marker):
    global _stack
    # The Data Tables page shares a department's listing for this long (docs/ui.md): short here.
    extra_env = {"AIRFLOW__DATATABLES__UI_REFRESH_SECONDS": str(UI_REFRESH_SECONDS)}
    if datatables_emulator is not None:
        extra_env["AIRFLOW_CONN_DATATABLES_DEFAULT"] = json.dumps(datatables_connection(datatables_emulator))
        extra_env["DATATABLES_PROJECT_ID"] = datatables_emulator.project_id
        extra_env["DATATABLES_SERVICE"] = datatables_emulator.base_url
        extra_env["DATATABLES_WATCHED_CARD_ID"] = watched_table
        extra_env["DATATABLES_POLL_INTERVAL"] = "1"
        # Every import of the stack's tasks claims a credit of this budget through the api-server (the
        # workers have no database); the page shows what was claimed (tests/e2e/test_ui_e2e.py).
        extra_env["AIRFLOW__DATATABLES__CREDIT_BUDGET"] = json.dumps({datatables_emulator.project_id: BUDGET})
    stack = AirflowStack(
        postgres,
        REPO / "dags",
        marker=e2e_marker,
        extra_bundles={"e2e-smoke": SMOKE_DAGS},
        extra_env=extra_env,
    )
    _stack = stack
    try:
        try:
            stack.start()
        except StackError as err:
            raise StackError(f"{err}\n{stack.log_tails()}") from err
        yield stack
    finally:
        stack.stop()
        _stack = None


@pytest.fixture(scope="session")
def airflow_api(airflow_stack):
    """The REST API as the admin user."""
    return AirflowApi(airflow_stack.base_url, token=airflow_stack.token)


@pytest.fixture(scope="session")
def browser(system_deps, airflow_stack):
    b = Browser()
    try:
        b.start()
        b.login(airflow_stack.base_url, airflow_stack.token("admin"))
        yield b
    finally:
        b.stop()


@pytest.fixture
def page(browser, request):
    """The browser's page; when the test fails, what it showed is saved as ``<test>-failed.png``."""
    yield browser.page
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        with contextlib.suppress(Exception):
            browser.screenshot(f"{request.node.name}-failed.png")
