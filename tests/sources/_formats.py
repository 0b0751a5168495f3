"""Running ``dag_formats.py`` (compressed, Parquet and JSON Lines imports) and reading the tables it makes."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from tests._dag_files import install

DAG_FILE = Path(__file__).with_name("dag_formats.py")


def run_formats(**files: str):
    """One ``dag.test()`` run of ``dt_formats`` with these tasks' files (params); the DagRun."""
    dag = install(DAG_FILE).formats
    when = datetime.now(UTC)
    return dag.test(run_conf=files, logical_date=when, run_after=when)


def table_of(card_id: str):
    """The table's summary as the hook reads it from the emulator (its name, rows)."""
    from airflow_tables.hooks.tables import DataTablesHook

    return DataTablesHook().table(None, card_id)
