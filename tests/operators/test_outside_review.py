"""What the outside review of the third release found (issue 36), through real DAG runs against the emulator.

A paid import is sent once per task instance for ``import_csv`` in a ``@task`` too, keyed by
the source (not its base name) and kept once answered; a lost answer adopts only a table that
holds what the file holds (column names and types, not only its shape); the series of tries is
the database's, not the DAG file's (test_safe_writes.py); a record the provider trusts verifies or is ignored.
"""

from __future__ import annotations

import csv
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tests.operators._runs import imports_since, orders_csv, run, xcom

LOST = [{"methods": ["POST"], "path": "/data/import", "drop": "after", "times": 1}]  # handled, answer lost
NEVER_HANDLED = [{"methods": ["POST"], "path": "/data/import", "drop": "before", "times": 1}]


def _ti(dag_run, task_id: str):
    return dag_run.get_task_instance(task_id)


def _tables(emulator) -> dict[str, dict]:
    return {c["CardID"]: c for c in emulator.list_cards()}


def _write(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


# -- point 2: import_csv inside a @task ---------------------------------------------------------------------


def test_an_answered_import_is_not_sent_again_when_a_later_step_fails(dags_module, datatables_conn, stats, tmp_path):
    emulator = datatables_conn
    known = set(_tables(emulator))
    dag_run = run(dags_module, "dt_hook_then_fails", file_path=str(orders_csv(tmp_path, "answered.csv", rows=4)))

    ti = _ti(dag_run, "hook_import_then_fail")
    assert str(ti.state) == "success" and ti.try_number == 2
    assert imports_since(emulator, stats) == 1 and stats["credits"] - emulator.credits() == 1
    new = [card for card in _tables(emulator) if card not in known]
    assert new == [xcom(dag_run, "hook_import_then_fail")]


def test_two_files_of_one_name_in_one_task_are_two_imports_each_sent_once(
    dags_module, datatables_conn, stats, tmp_path
):
    emulator = datatables_conn
    (tmp_path / "d1").mkdir()
    (tmp_path / "d2").mkdir()
    first = orders_csv(tmp_path / "d1", "orders.csv", rows=3)
    second = orders_csv(tmp_path / "d2", "orders.csv", rows=7)
    dag_run = run(dags_module, "dt_hook_two_files", file_path=str(first), sibling=str(second))

    ti = _ti(dag_run, "hook_import_two")
    assert str(ti.state) == "success" and ti.try_number == 2
    assert imports_since(emulator, stats) == 2 and stats["credits"] - emulator.credits() == 2
    first_id, second_id = xcom(dag_run, "hook_import_two")
    tables = _tables(emulator)
    assert first_id != second_id
    assert (tables[first_id]["Rows"], tables[second_id]["Rows"]) == (3, 7)  # each holds its own file


# -- point 3: a same-shape sibling is not ours --------------------------------------------------------------


def _sibling_pair(tmp_path: Path, differ: str) -> tuple[Path, Path]:
    """Two exports called orders.csv with the same rows and columns: other headings, or other kinds of values."""
    rows = [[i, "North", 10 + i] for i in range(5)]
    mine = _write(tmp_path / "d1" / "orders.csv", ["order_id", "region", "amount"], rows)
    if differ == "names":
        theirs = _write(tmp_path / "d2" / "orders.csv", ["order_id", "region", "units"], rows)
    else:
        theirs = _write(
            tmp_path / "d2" / "orders.csv", ["order_id", "region", "amount"], [r[:2] + ["n/a"] for r in rows]
        )
    return mine, theirs


@pytest.mark.parametrize("differ", ["names", "types"])
def test_a_lost_import_in_a_task_never_adopts_a_same_shape_sibling(
    dags_module, datatables_conn, stats, tmp_path, differ
):
    emulator = datatables_conn
    mine, theirs = _sibling_pair(tmp_path, differ)
    known = set(_tables(emulator))
    emulator.set_faults(NEVER_HANDLED)
    dag_run = run(dags_module, "dt_hook_task_sibling", file_path=str(mine), sibling=str(theirs))

    ti = _ti(dag_run, "hook_import_sibling")
    assert str(ti.state) == "failed"  # the evidence is not conclusive: a person decides, nothing is sent
    others = [c for card, c in _tables(emulator).items() if card not in known]
    assert [(c["CardName"], c["Rows"]) for c in others] == [("orders", 5)]  # the sibling's table only
    assert imports_since(emulator, stats) == 1 and stats["credits"] - emulator.credits() == 1  # the sibling's
    assert xcom(dag_run, "hook_import_sibling") is None


def test_the_operator_never_adopts_a_sibling_with_the_same_shape_and_other_headings(
    dags_module, datatables_conn, stats, tmp_path
):
    emulator = datatables_conn
    mine, theirs = _sibling_pair(tmp_path, "names")
    known = set(_tables(emulator))
    emulator.set_faults(NEVER_HANDLED)
    dag_run = run(dags_module, "dt_import_sibling", file_path=str(mine), sibling=str(theirs))

    ti = _ti(dag_run, "import")
    assert str(ti.state) == "failed" and ti.try_number == 2  # refused at the retry, not retried again
    others = [c for card, c in _tables(emulator).items() if card not in known]
    assert [c["CardName"] for c in others] == ["orders"]
    assert imports_since(emulator, stats) == 1 and stats["credits"] - emulator.credits() == 1
    assert xcom(dag_run, "import") is None


# -- point 6: a failed read, as the hook says it ----------------------------------------------------------------


def test_wait_for_processed_quotes_the_services_reason_for_a_failed_read(datatables_conn, tmp_path):
    from airflow_tables.exceptions import DataTablesUploadFailedError
    from airflow_tables.hooks.tables import DataTablesHook

    emulator = datatables_conn
    hook = DataTablesHook()
    emulator.set_fail_readings(1, reason="line 3 has 5 fields, the header 4")
    card_id = hook.import_csv(None, orders_csv(tmp_path, "failing.csv"))
    with pytest.raises(DataTablesUploadFailedError) as err:
        hook.wait_for_processed(None, card_id, poll_interval=0.05, timeout=30)
    message = str(err.value)
    assert message.startswith(f"the service could not read the file of table {card_id}")
    assert 'its explanation: "' in message and 'line 3 has 5 fields, the header 4."' in message
    assert "no response" not in message


# -- point 7: records the provider trusts ------------------------------------------------------------------------


def test_a_forged_job_in_a_variable_is_ignored_and_the_file_imported(dags_module, datatables_conn, stats, tmp_path):
    """A Variable writer puts another team's table where the import keeps its job: it does not verify."""
    from airflow.models import Variable

    emulator = datatables_conn
    theirs = next(iter(_tables(emulator)))
    when = datetime.now(UTC)
    run_id = f"manual__{when.isoformat()}"
    key = f"airflow_tables.state.dt_import_retry_legacy.{run_id}.import.-1.datatables_table"
    Variable.set(key, f'{{"project_id": "{emulator.project_id}", "card_id": "{theirs}"}}')
    try:
        dag_run = run(dags_module, "dt_import_retry_legacy", logical_date=when, file_path=str(orders_csv(tmp_path)))
    finally:
        Variable.delete(key)

    assert dag_run.run_id == run_id
    ti = _ti(dag_run, "import")
    assert str(ti.state) == "success" and ti.try_number == 1
    card_id = xcom(dag_run, "import")
    assert card_id != theirs and _tables(emulator)[card_id]["CardName"] == "orders"
    assert imports_since(emulator, stats) == 1 and stats["credits"] - emulator.credits() == 1


def test_a_note_signed_for_another_task_instance_does_not_verify(datatables_conn):
    from airflow_tables._durable import SignedStore

    class Memory(dict):
        def set(self, key, value):
            self[key] = value

        def delete(self, key):
            self.pop(key, None)

    memory = Memory()
    ours = SignedStore(memory, "dtk_key", "dag\0run\0task\0-1")
    ours.set("note", {"card_id": "CRD-1"})
    assert ours.get("note") == {"card_id": "CRD-1"}
    assert SignedStore(memory, "dtk_key", "dag\0run\0other\0-1").get("note") is None  # another task instance
    ours.set("note", {"card_id": "CRD-1"})
    assert SignedStore(memory, "dtk_other", "dag\0run\0task\0-1").get("note") is None  # another key
    ours.set("edited", {"card_id": "CRD-1"})
    memory["edited"]["value"] = {"card_id": "CRD-2"}
    assert ours.get("edited") is None and "edited" not in memory  # edited: ignored and removed


# -- point 9: skip_if_unchanged trusts only its own records -----------------------------------------------------


def test_another_dags_event_with_a_fingerprint_does_not_skip_a_real_refresh(dags_module, datatables_conn, tmp_path):
    from tests.operators.test_recovery import asset_events

    from airflow_tables.sources.fingerprint import fingerprint_file

    emulator = datatables_conn
    card_id = _write_table(emulator, tmp_path)
    ours = orders_csv(tmp_path, "ours.csv", rows=5)
    first = run(dags_module, "dt_replace_skip", card_id=card_id, file_path=str(ours))
    assert str(_ti(first, "replace").state) == "success"
    recorded = asset_events(emulator, card_id)[-1]
    assert recorded["fingerprint"] == fingerprint_file(ours) and recorded["signature"]

    theirs = orders_csv(tmp_path, "theirs.csv", rows=5, amount=99)  # the same shape, other values
    forged = {**recorded, "fingerprint": fingerprint_file(theirs)}  # claims the table holds their file
    run(dags_module, "dt_forge_upload_record", card_id=card_id, extra=forged)
    assert asset_events(emulator, card_id)[-1]["fingerprint"] == forged["fingerprint"]

    credits = emulator.credits()
    again = run(dags_module, "dt_replace_skip", card_id=card_id, file_path=str(theirs))
    assert str(_ti(again, "replace").state) == "success"
    assert credits - emulator.credits() == 1  # sent: the forged record is no record of ours
    emulator.wait_until_processed(emulator.project_id, card_id)


def _write_table(emulator, tmp_path: Path) -> str:
    from tests.operators._runs import import_table

    card_id = import_table(emulator, orders_csv(tmp_path, "start.csv", rows=2))
    emulator.wait_until_processed(emulator.project_id, card_id)
    return card_id


def test_a_tasks_own_notes_are_gone_once_its_task_instance_has_ended(dags_module, datatables_conn, tmp_path):
    """Point 2's notes outlive each try; below Airflow 3.3 they are Variables, deleted by the provider's listener.

    On 3.3 they are in the task state store (its rows expire with the run) and no Variable is
    written; the matrix runs this on 3.1 and 3.2, where the listener deletes them.
    """
    from tests.operators.test_recovery import durable_variables

    dag_run = run(dags_module, "dt_hook_then_fails", file_path=str(orders_csv(tmp_path, "ended.csv", rows=3)))
    assert str(_ti(dag_run, "hook_import_then_fail").state) == "success"
    assert durable_variables("dt_hook_then_fails") == []
    mine, theirs = _sibling_pair(tmp_path, "names")
    datatables_conn.set_faults(NEVER_HANDLED)  # the note of a lost import, then a refusal at the last try
    failed = run(dags_module, "dt_hook_task_sibling", file_path=str(mine), sibling=str(theirs))
    assert str(_ti(failed, "hook_import_sibling").state) == "failed"
    assert durable_variables("dt_hook_task_sibling") == []
