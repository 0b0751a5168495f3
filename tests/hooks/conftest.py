"""Connections for the hook tests: the JSON env form, as users write it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Backoff in tests: short enough to keep the suite fast, long enough to be a real wait.
BACKOFF = 0.01


@pytest.fixture
def make_hook(monkeypatch):
    """Build a hook on a ``AIRFLOW_CONN_<ID>`` JSON env connection; extras as keyword arguments."""
    from airflow_tables.hooks.tables import DataTablesHook

    def make(host: str, key: str, *, conn_id: str = "datatables_default", **extra) -> DataTablesHook:
        conn = {"conn_type": "datatables", "host": host, "password": key}
        if extra:
            conn["extra"] = extra
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))
        return DataTablesHook(conn_id, backoff_base=BACKOFF)

    return make


@pytest.fixture
def csv_path(tmp_path):
    """A small CSV the service reads as 3 rows of 3 columns."""
    path = tmp_path / "sales.csv"
    path.write_text("id,region,amount\n1,north,10\n2,south,20\n3,east,30\n")
    return path


@pytest.fixture
def hook(emulator, make_hook):
    """A hook with manage rights on ``emulator.project_id`` (its default department)."""
    return make_hook(emulator.base_url, emulator.api_key, project_id=emulator.project_id)


def run_airflow(*args: str, **env: str) -> subprocess.CompletedProcess:
    """Run the ``airflow`` CLI of this environment with extra environment variables."""
    airflow = str(Path(sys.executable).with_name("airflow"))
    return subprocess.run(
        [airflow, *args], capture_output=True, text=True, timeout=60, env={**os.environ, **env}, check=False
    )


@pytest.fixture
def airflow_cli():
    return run_airflow
