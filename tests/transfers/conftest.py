"""Fixtures of the transfer's tests: a throwaway PostgreSQL, a SQLite file, their connections, the DAGs.

PostgreSQL is the end-to-end stack's (``tests/e2e/harness.py``'s ``Postgres``: ``initdb`` in a
temporary directory, 127.0.0.1, trust auth), started once for the session. Without its binaries
(scripts/system-deps.sh installs them) the PostgreSQL tests are skipped, saying so, except in CI
(``CI`` set), where a missing server is a failure.
"""

from __future__ import annotations

import json
import os
import sqlite3
import uuid
from pathlib import Path

import pytest
from tests._dag_files import install

DAG_FILE = Path(__file__).with_name("dag_transfers.py")
PG_CONN_ID = "transfer_pg"
SQLITE_CONN_ID = "transfer_sqlite"


@pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL server for the session, with a database ``transfers``."""
    from tests.e2e.harness import Postgres, StackError, new_marker, postgres_bin_dir

    if postgres_bin_dir() is None and not os.environ.get("CI"):
        pytest.skip("PostgreSQL is not installed here (scripts/system-deps.sh installs it)")
    try:
        server = Postgres(new_marker(), database="transfers").start()
    except StackError as err:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"PostgreSQL could not be started: {err}")
    yield server
    server.stop()


@pytest.fixture
def pg(postgres_server, monkeypatch):
    """The ``transfer_pg`` connection (JSON env form) and a function that runs SQL on the database."""
    conn = {
        "conn_type": "postgres",
        "host": "127.0.0.1",
        "port": postgres_server.port,
        "login": postgres_server.user,
        "schema": postgres_server.database,
    }
    monkeypatch.setenv(f"AIRFLOW_CONN_{PG_CONN_ID.upper()}", json.dumps(conn))
    return Database(postgres_server)


class Database:
    """Statements on the test database, committed; ``table()`` a name of the test's own."""

    def __init__(self, server) -> None:
        self.server = server

    def run(self, *statements: str) -> None:
        with self.server._connect(self.server.database) as conn, conn.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)

    @staticmethod
    def table() -> str:
        return f"t_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def sqlite_db(tmp_path, monkeypatch) -> sqlite3.Connection:
    """A SQLite file behind the ``transfer_sqlite`` connection; the test fills it through the returned connection."""
    path = tmp_path / "transfer.db"
    monkeypatch.setenv(f"AIRFLOW_CONN_{SQLITE_CONN_ID.upper()}", json.dumps({"conn_type": "sqlite", "host": str(path)}))
    conn = sqlite3.connect(path, isolation_level=None)
    yield conn
    conn.close()


@pytest.fixture(scope="session")
def transfer_dags(dags_module):
    """``dag_transfers.py``, installed in the dags folder (after the metadata database is migrated)."""
    return install(DAG_FILE)
