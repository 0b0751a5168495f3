"""Never pay twice for the same data (issue 14): skip_if_unchanged, against the emulator's credits."""

from __future__ import annotations

import pytest
from tests.operators._runs import run, state, xcom
from tests.operators.test_operators import import_table, orders_csv


@pytest.fixture
def table(datatables_conn, tmp_path):
    """A ready table made outside Airflow, so no upload of it is recorded yet."""
    card_id = import_table(datatables_conn, orders_csv(tmp_path, "daily.csv", rows=2))
    datatables_conn.wait_until_processed(datatables_conn.project_id, card_id)
    return card_id


def replace(dags_module, emulator, card_id: str, path, dag_id: str = "dt_replace_skip") -> tuple[int, object]:
    """Run a skip_if_unchanged replacement; return the credits it cost and the run."""
    before = emulator.credits()
    dag_run = run(dags_module, dag_id, card_id=card_id, file_path=str(path))
    assert state(dag_run, "replace") == "success"
    assert xcom(dag_run, "replace") == card_id
    return before - emulator.credits(), dag_run


def asset_events(emulator, card_id: str) -> list[dict]:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    from airflow_tables.assets import table_asset

    uri = table_asset(emulator.project_id, card_id).uri
    with create_session() as session:
        query = (
            select(AssetEvent)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .where(AssetModel.uri == uri)
            .order_by(AssetEvent.id)
        )
        return [dict(e.extra) for e in session.scalars(query)]


def test_the_same_file_twice_costs_one_credit_and_one_event(dags_module, datatables_conn, table, tmp_path, capfd):
    path = orders_csv(tmp_path, rows=5)
    assert replace(dags_module, datatables_conn, table, path)[0] == 1
    capfd.readouterr()
    assert replace(dags_module, datatables_conn, table, path)[0] == 0
    log = "".join(capfd.readouterr())
    assert "Skipped:" in log and "no credit spent" in log
    events = asset_events(datatables_conn, table)
    assert len(events) == 1  # the skip records none: asset-scheduled DAGs do not run for nothing
    assert events[0]["credits"] == 1 and events[0]["fingerprint"].startswith("xxh3-128:")
    assert events[0]["rows"] == 5 and events[0]["card_id"] == table


def test_a_changed_file_is_sent(dags_module, datatables_conn, table, tmp_path):
    assert replace(dags_module, datatables_conn, table, orders_csv(tmp_path, rows=5))[0] == 1
    assert replace(dags_module, datatables_conn, table, orders_csv(tmp_path, rows=5, amount=11))[0] == 1


def test_a_table_refreshed_outside_airflow_is_sent_again(dags_module, datatables_conn, table, tmp_path):
    from airflow_tables.hooks.tables import DataTablesHook

    path = orders_csv(tmp_path, rows=5)
    assert replace(dags_module, datatables_conn, table, path)[0] == 1
    hook = DataTablesHook()  # someone replaces it straight through the service
    hook.send_when_idle(
        None, table, lambda look: hook.import_csv(None, orders_csv(tmp_path, "other.csv", rows=9), card_id=table)
    )
    hook.wait_for_table(None, table, poll_interval=0.05, timeout=30)
    assert replace(dags_module, datatables_conn, table, path)[0] == 1
    assert next(c for c in datatables_conn.list_cards() if c["CardID"] == table)["Rows"] == 5


def test_a_failed_read_is_sent_again(dags_module, datatables_conn, table, tmp_path):
    path = orders_csv(tmp_path, rows=5)
    datatables_conn.set_fail_readings(1)
    before = datatables_conn.credits()
    dag_run = run(dags_module, "dt_replace_skip", card_id=table, file_path=str(path))
    assert state(dag_run, "replace") == "failed"  # read badly: fails without retry
    assert replace(dags_module, datatables_conn, table, path)[0] == 1
    assert before - datatables_conn.credits() == 2


def test_two_dags_feeding_one_table_share_the_record(dags_module, datatables_conn, table, tmp_path):
    path = orders_csv(tmp_path, rows=5)
    assert replace(dags_module, datatables_conn, table, path, "dt_replace_skip")[0] == 1
    assert replace(dags_module, datatables_conn, table, path, "dt_replace_skip_other")[0] == 0


def test_a_retry_after_a_lost_answer_still_imports_exactly_once(dags_module, datatables_conn, table, tmp_path):
    path = orders_csv(tmp_path, rows=6)
    datatables_conn.set_faults([{"methods": ["POST"], "path": "/data/import", "drop": "after", "times": 1}])
    credits, dag_run = replace(dags_module, datatables_conn, table, path)
    assert credits == 1 and dag_run.get_task_instance("replace").try_number == 2
    assert replace(dags_module, datatables_conn, table, path)[0] == 0  # and its record holds


def test_skip_if_unchanged_needs_a_card_id():
    from airflow_tables.operators.tables import DataTablesImportOperator

    with pytest.raises(ValueError, match="skip_if_unchanged needs a card_id"):
        DataTablesImportOperator(task_id="i", file_path="x.csv", skip_if_unchanged=True)
