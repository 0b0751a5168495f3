"""Fixtures shared by every test: the local emulator of the Data Tables Service, over real HTTP.

* ``emulator``: one server for the whole session (test controls on), started once.
  Tests share it, so they make their own tables and never assume an empty list.
  After each test that used it, its faults are cleared and its settings reset.
* ``fresh_emulator``: a server of the test's own, on its own temporary data
  directory, for tests that restart it, kill it or spend all its credits.

For Airflow (hooks, operators, triggers, DAG runs): AIRFLOW_HOME is a fresh temporary
directory, set before anything imports Airflow; ``datatables_conn`` points the default
connection at the shared emulator; ``dags_module`` installs the test DAGs and migrates the
SQLite metadata DB once. No Airflow import here at module level: the emulator's tests
must run without it.
"""

from __future__ import annotations

import atexit
import base64
import functools
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Airflow reads AIRFLOW_HOME when it is first imported: keep every test away from ~/airflow, in a
# directory of this session's own that goes with it (one per run, or /tmp fills run after run).
if "AIRFLOW_HOME" not in os.environ:
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="airflow-tables-home-")
    atexit.register(shutil.rmtree, os.environ["AIRFLOW_HOME"], ignore_errors=True)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
# Airflow 3.2's dag.test() runs the execution API in process, whose start-up fails without a JWT
# secret (then every task fails with "'State' object has no attribute 'svcs_registry'").
os.environ.setdefault("AIRFLOW__API_AUTH__JWT_SECRET", secrets.token_hex(32))
# One Fernet key for every process of the session, as a deployment's components share one: a
# test's subprocess (a first try killed mid-task) and its retry here must read each other's
# Variables; without a key Airflow 3.2 makes one per process and the retry reads ciphertext.
os.environ.setdefault("AIRFLOW__CORE__FERNET_KEY", base64.urlsafe_b64encode(os.urandom(32)).decode())
# Deferred waits in tests poll the emulator every fraction of a second; the triggerer's floor
# ([datatables] min_poll_interval, 1 s for deployments) would add most of a second to each.
os.environ.setdefault("AIRFLOW__DATATABLES__MIN_POLL_INTERVAL", "0.1")

import pytest  # noqa: E402
from tests._dag_files import copy_to_dags_folder, imported  # noqa: E402
from tests._uv import uv_command  # noqa: E402

from airflow_tables.emulator.testing import EmulatorProcess  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def _one_execution_api_per_process():
    """Build ``dag.test()``'s in-process execution API once per process, as Airflow 3.3 and later do.

    Below 3.3, ``airflow.sdk.execution_time.supervisor.in_process_api_server`` makes a new
    one for every task ``dag.test()`` runs, and the first request to each builds its versioned
    routes (Cadwyn): seconds of CPU per task, most of the matrix's time on 3.1 and 3.2 (a
    profile of the 3.2 run: 88% of its samples). 3.3 caches it with ``functools.lru_cache``;
    the same cache here makes the older minors' runs behave as 3.3's do, nothing else.
    """
    try:
        from airflow.sdk.execution_time import supervisor
    except ImportError:  # the emulator's and the validator's tests run without Airflow
        return
    build = supervisor.in_process_api_server
    if not hasattr(build, "cache_info"):  # 3.3+ caches it already
        supervisor.in_process_api_server = functools.lru_cache(maxsize=1)(build)


@pytest.fixture(scope="session")
def emulator():
    """The session's shared emulator (see :class:`EmulatorProcess` for its keys and departments)."""
    process = EmulatorProcess().start()
    yield process
    process.stop()


@pytest.fixture
def fresh_emulator():
    """An emulator of the test's own, with a fresh data directory removed afterwards."""
    process = EmulatorProcess().start()
    yield process
    process.stop()


@pytest.fixture(autouse=True)
def _reset_shared_emulator(request):
    """Clear the faults and settings a test left on the shared emulator, so the next test starts clean."""
    yield
    if "emulator" in request.fixturenames:
        process = request.getfixturevalue("emulator")
        if process.process is not None and process.process.poll() is None:
            process.clear_faults()
            process.reset_settings()


TEST_DAGS = Path(__file__).parent / "operators" / "dags"
APP_URL = "http://app.tables.test"


@pytest.fixture(scope="session")
def dags_module():
    """The test DAGs, installed in Airflow's dags folder (dag.test() needs them there) and imported."""
    for source in TEST_DAGS.iterdir():
        copy_to_dags_folder(source)
    env = {**os.environ, "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    migrate = subprocess.run(
        [str(Path(sys.executable).with_name("airflow")), "db", "migrate"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    return imported("datatables_test_dags.py")


@pytest.fixture
def datatables_conn(emulator, monkeypatch):
    """``datatables_default`` pointing at the shared emulator, as users write it (JSON env form)."""
    conn = {
        "conn_type": "datatables",
        "host": emulator.base_url,
        "password": emulator.api_key,
        "extra": {"project_id": emulator.project_id, "app_url": APP_URL, "max_retries": 3, "retry_backoff": 0.02},
    }
    monkeypatch.setenv("AIRFLOW_CONN_DATATABLES_DEFAULT", json.dumps(conn))
    return emulator


@pytest.fixture(scope="session")
def distributions(tmp_path_factory) -> Path:
    """A directory with the sdist and the wheel that ``uv build`` makes of the source tree, built once."""
    tool = uv_command()
    if tool is None:
        pytest.fail("uv is not installed (scripts/setup.sh installs it)")
    root = Path(__file__).resolve().parents[1]
    out = tmp_path_factory.mktemp("dist")
    build = subprocess.run(
        [tool, "build", "--quiet", "--out-dir", str(out), str(root)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=root,
        env={**os.environ, "UV_NO_PROGRESS": "1"},
    )
    assert build.returncode == 0, f"uv build exited {build.returncode}:\n{build.stdout[-3000:]}\n{build.stderr[-3000:]}"
    return out
