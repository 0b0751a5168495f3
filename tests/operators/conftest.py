"""Run real DAGs with dag.test() against the emulator, on a migrated SQLite metadata DB."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="airflow-tables-home-"))

import pytest  # noqa: E402

HERE = Path(__file__).parent
APP_URL = "http://app.tables.test"


@pytest.fixture(scope="session")
def dags_module():
    """The test DAGs, installed in Airflow's dags folder (dag.test() needs them there) and imported."""
    home = Path(os.environ["AIRFLOW_HOME"])
    dags = home / "dags"
    dags.mkdir(parents=True, exist_ok=True)
    for source in (HERE / "dags").iterdir():
        shutil.copy(source, dags / source.name)
    env = {**os.environ, "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    migrate = subprocess.run(
        [str(Path(sys.executable).with_name("airflow")), "db", "migrate"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert migrate.returncode == 0, migrate.stderr[-3000:]
    spec = importlib.util.spec_from_file_location("datatables_test_dags", dags / "datatables_test_dags.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def datatables_conn(emulator, monkeypatch):
    """``datatables_default`` pointing at the shared emulator, as users write it (JSON env form)."""
    conn = {
        "conn_type": "datatables",
        "host": emulator.base_url,
        "password": emulator.api_key,
        "extra": {"project_id": emulator.project_id, "app_url": APP_URL, "max_retries": 2},
    }
    monkeypatch.setenv("AIRFLOW_CONN_DATATABLES_DEFAULT", json.dumps(conn))
    return emulator
