"""``if_older`` in real DAG runs (dag.test()) against the emulator: a backfill never overwrites newer data.

Two DAGs feed one table. Whichever replaced it last, a run of either with an older logical date
is held back: skipped (the default) or failed, with nothing sent, no credit spent, the table as
it was and no retry; ``if_older="replace"`` sends it; a run without a logical date is never held.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tests.operators import test_schema_change
from tests.operators._runs import import_table, orders_csv, run, state

NOW = datetime.now(UTC).replace(microsecond=0)
OLD, NEW, NEWER = NOW - timedelta(days=30), NOW - timedelta(days=20), NOW - timedelta(days=10)
sw_dags = test_schema_change.sw_dags  # the fixture: both files run tests/operators/dags/safe_writes_test_dags.py


@pytest.fixture
def table(datatables_conn, tmp_path):
    emulator = datatables_conn
    card_id = import_table(emulator, orders_csv(tmp_path, "orders.csv", rows=20))
    emulator.wait_until_processed(emulator.project_id, card_id)
    return card_id


def imports(emulator) -> int:
    return len([r for r in emulator.stats()["requests"] if r["method"] == "POST"])


def rows_of(emulator, card_id: str) -> int:
    emulator.wait_until_processed(emulator.project_id, card_id)
    return next(c["Rows"] for c in emulator.list_cards() if c["CardID"] == card_id)


def replace(sw_dags, dag_id: str, card_id: str, path: Path, when: datetime | None):
    if when is not None:
        return run(sw_dags, dag_id, logical_date=when, file_path=str(path), card_id=card_id)
    at = datetime.now(UTC)
    return sw_dags.DAGS[dag_id].test(
        run_conf={"file_path": str(path), "card_id": card_id}, logical_date=None, run_after=at
    )


def test_an_older_run_of_another_dag_is_skipped(sw_dags, datatables_conn, table, tmp_path, caplog, capfd):
    emulator, card_id = datatables_conn, table
    newer = replace(sw_dags, "sw_backfill_a", card_id, orders_csv(tmp_path, "a.csv", rows=7), NEW)
    assert state(newer, "replace") == "success" and rows_of(emulator, card_id) == 7

    emulator.reset_stats()
    credits = emulator.credits()
    with caplog.at_level(logging.INFO):
        older = replace(sw_dags, "sw_backfill_b", card_id, orders_csv(tmp_path, "b.csv", rows=3), OLD)
    ti = older.get_task_instance("replace")
    assert str(ti.state) == "skipped" and ti.try_number == 1
    assert imports(emulator) == 0 and emulator.credits() == credits and rows_of(emulator, card_id) == 7
    text = caplog.text + "".join(capfd.readouterr())
    assert f"run {newer.run_id} of DAG sw_backfill_a" in text and "nothing was sent" in text

    later = replace(sw_dags, "sw_backfill_b", card_id, orders_csv(tmp_path, "b.csv", rows=4), NEWER)
    assert state(later, "replace") == "success" and rows_of(emulator, card_id) == 4
    # Now sw_backfill_b's later run holds the table: sw_backfill_a's earlier date is older than it.
    again = replace(sw_dags, "sw_backfill_a", card_id, orders_csv(tmp_path, "a.csv", rows=9), NEW)
    assert state(again, "replace") == "skipped" and rows_of(emulator, card_id) == 4


def test_the_same_date_again_is_not_older(sw_dags, datatables_conn, table, tmp_path):
    emulator, card_id = datatables_conn, table
    assert state(replace(sw_dags, "sw_backfill_a", card_id, orders_csv(tmp_path, rows=5), NEW), "replace") == "success"
    other = replace(sw_dags, "sw_backfill_b", card_id, orders_csv(tmp_path, rows=6), NEW)
    assert state(other, "replace") == "success" and rows_of(emulator, card_id) == 6


def test_fail_fails_without_sending(sw_dags, datatables_conn, table, tmp_path, caplog, capfd):
    emulator, card_id = datatables_conn, table
    assert state(replace(sw_dags, "sw_backfill_a", card_id, orders_csv(tmp_path, rows=5), NEW), "replace") == "success"
    emulator.reset_stats()
    credits = emulator.credits()
    with caplog.at_level(logging.INFO):
        older = replace(sw_dags, "sw_backfill_fail", card_id, orders_csv(tmp_path, rows=3), OLD)
    ti = older.get_task_instance("replace")
    assert str(ti.state) == "failed" and ti.try_number == 1
    assert imports(emulator) == 0 and emulator.credits() == credits and rows_of(emulator, card_id) == 5
    assert "if_older='replace'" in caplog.text + "".join(capfd.readouterr())


def test_replace_sends_an_older_run_and_keeps_the_newer_date(sw_dags, datatables_conn, table, tmp_path):
    emulator, card_id = datatables_conn, table
    assert state(replace(sw_dags, "sw_backfill_a", card_id, orders_csv(tmp_path, rows=5), NEW), "replace") == "success"
    older = replace(sw_dags, "sw_backfill_replace", card_id, orders_csv(tmp_path, rows=3), OLD)
    assert state(older, "replace") == "success" and rows_of(emulator, card_id) == 3
    # The record still holds NEW: a run between OLD and NEW is still older than the newest data seen.
    between = replace(sw_dags, "sw_backfill_b", card_id, orders_csv(tmp_path, rows=8), OLD + timedelta(days=1))
    assert state(between, "replace") == "skipped" and rows_of(emulator, card_id) == 3


def test_a_run_without_a_logical_date_is_never_held_back(sw_dags, datatables_conn, table, tmp_path):
    emulator, card_id = datatables_conn, table
    assert state(replace(sw_dags, "sw_backfill_a", card_id, orders_csv(tmp_path, rows=5), NEW), "replace") == "success"
    dateless = replace(sw_dags, "sw_backfill_b", card_id, orders_csv(tmp_path, rows=2), None)
    assert state(dateless, "replace") == "success" and rows_of(emulator, card_id) == 2


# -- records a Variable writer may have written (issue 36 point 8) -----------------------------------------


def _record_name(emulator, card_id: str) -> str:
    from airflow_tables.assets import table_ref
    from airflow_tables.operators._backfill import PREFIX

    return PREFIX + table_ref(emulator.project_id, card_id, service=emulator.base_url).name


@pytest.mark.parametrize(
    "forged",
    [
        '{"logical_date": "2099-01-01T00:00:00+00:00", "dag_id": "x", "run_id": "x", "task_id": "x"}',
        '{"logical_date": "2026-01-01T00:00:00", "dag_id": "x", "run_id": "x", "task_id": "x"}',  # no zone
    ],
    ids=["a date in the future", "a date without a zone"],
)
def test_a_record_written_by_hand_holds_no_replace_back(
    sw_dags, datatables_conn, table, tmp_path, caplog, capfd, forged
):
    from airflow.models import Variable

    emulator, card_id = datatables_conn, table
    name = _record_name(emulator, card_id)
    Variable.set(name, forged)
    try:
        emulator.reset_stats()
        credits = emulator.credits()
        with caplog.at_level(logging.WARNING):
            dag_run = replace(sw_dags, "sw_backfill_a", card_id, orders_csv(tmp_path, "a.csv", rows=7), NEW)
        assert state(dag_run, "replace") == "success"
        assert imports(emulator) == 1 and credits - emulator.credits() == 1 and rows_of(emulator, card_id) == 7
        logged = caplog.text + "".join(capfd.readouterr())
        assert f"The stored record {name!r} was not written by airflow-tables for this table" in logged
        stored = Variable.get(name)
        assert NEW.isoformat() in stored and "2099" not in stored  # replaced by this run's signed record
    finally:
        Variable.delete(name)


def test_a_signed_record_dated_in_the_future_holds_no_replace_back(sw_dags, datatables_conn, table, tmp_path):
    """Even a record the provider signed is checked: a date later than now names no run that replaced anything."""
    from airflow.models import Variable

    from airflow_tables._durable import shared_records
    from airflow_tables.operators._backfill import PREFIX

    emulator, card_id = datatables_conn, table
    name = _record_name(emulator, card_id)
    record = {"logical_date": "2099-01-01T00:00:00+00:00", "dag_id": "x", "run_id": "x", "task_id": "x"}
    signed = shared_records(PREFIX, emulator.api_key, "").signed(name[len(PREFIX) :], record)
    Variable.set(name, json.dumps(signed))
    try:
        emulator.reset_stats()
        dag_run = replace(sw_dags, "sw_backfill_a", card_id, orders_csv(tmp_path, "a.csv", rows=7), NEW)
        assert state(dag_run, "replace") == "success" and imports(emulator) == 1 and rows_of(emulator, card_id) == 7
    finally:
        Variable.delete(name)
