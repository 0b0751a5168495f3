"""operators/_recovery.py: never pay twice. A retry re-attaches to its table or adopts the one a lost
answer made (also after the first try is killed); skip_if_unchanged sends nothing for data the table
holds already; the job record fails closed on anything it did not write. Against the emulator."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tests.operators._runs import (
    clear_and_run,
    import_table,
    imports_since,
    orders_csv,
    release_after_the_next_look,
    retry_task,
    run,
    state,
    xcom,
)

from airflow_tables.operators._job import Job, stored_job
from airflow_tables.version_compat import AirflowFailException


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


# -- a retry re-attaches or adopts, and its notes go when the task ends ---------------------------


def test_retry_after_a_timed_out_wait_reattaches(dags_module, datatables_conn, stats, tmp_path):
    """The first try gives up waiting; the retry finds the CardID in the task state store."""
    emulator = datatables_conn
    emulator.set_processing_delay(3.0)
    dag_run = run(dags_module, "dt_import_retry", file_path=str(orders_csv(tmp_path)))

    ti = dag_run.get_task_instance("import")
    assert str(ti.state) == "success" and ti.try_number == 2
    assert imports_since(emulator, stats) == 1
    assert stats["credits"] - emulator.credits() == 1


def test_retry_after_a_lost_import_answer_adopts_the_table(dags_module, datatables_conn, stats, tmp_path):
    """The service imports the file but the answer never arrives: the retry adopts that table."""
    emulator = datatables_conn
    emulator.set_processing_delay(0.3)
    emulator.set_faults([{"methods": ["POST"], "path": "/data/import", "drop": "after", "times": 1}])
    dag_run = run(dags_module, "dt_import_retry", file_path=str(orders_csv(tmp_path, "lost_answer.csv")))

    ti = dag_run.get_task_instance("import")
    assert str(ti.state) == "success" and ti.try_number == 2
    assert imports_since(emulator, stats) == 1
    assert stats["credits"] - emulator.credits() == 1
    assert xcom(dag_run, "import") in {c["CardID"] for c in emulator.list_cards() if c["CardName"] == "lost_answer"}


def test_retry_after_a_lost_replace_answer_does_not_replace_again(dags_module, datatables_conn, stats, tmp_path):
    emulator = datatables_conn
    card_id = import_table(emulator, orders_csv(tmp_path, "before.csv", rows=3))
    emulator.wait_until_processed(emulator.project_id, card_id)
    emulator.set_faults([{"methods": ["POST"], "path": "/data/import", "drop": "after", "times": 1}])
    dag_run = run(dags_module, "dt_replace_retry", card_id=card_id, file_path=str(orders_csv(tmp_path, rows=7)))

    ti = dag_run.get_task_instance("replace")
    assert str(ti.state) == "success" and ti.try_number == 2
    assert imports_since(emulator, stats) == 2  # the table's own import and one replacement
    assert next(c for c in emulator.list_cards() if c["CardID"] == card_id)["Rows"] == 7


@pytest.mark.parametrize("killed", ["after the import", "while waiting"])
def test_resume_after_the_first_try_is_killed(dags_module, datatables_conn, stats, tmp_path, capfd, killed):
    """Kill -9 the process running the first try; the next try finds the table and returns its CardID.

    Killed right after the import, the first try may not have stored its job yet: the retry
    adopts the table its import made. Killed while waiting, the job is stored: the retry
    reconnects to the table still being read (Airflow 3.3's mixin then returns what
    poll_until_complete returns, which once left the task without its XCom).
    """
    emulator = datatables_conn
    # "while waiting": the table is read until the retry has looked at it (see release_after_the_next_look),
    # however long a busy machine takes to start either try.
    emulator.set_processing_delay(4.0 if killed == "after the import" else 900.0)
    path = orders_csv(tmp_path)
    logical_date = datetime.now(UTC).replace(microsecond=0)
    script = (
        "import sys; from datetime import datetime; "
        "from tests.operators import _runs; import importlib.util; "
        "spec = importlib.util.spec_from_file_location('m', sys.argv[1]); m = importlib.util.module_from_spec(spec); "
        "spec.loader.exec_module(m); "
        "_runs.run(m, 'dt_import_slow', datetime.fromisoformat(sys.argv[2]), file_path=sys.argv[3])"
    )
    dags_file = Path(os.environ["AIRFLOW_HOME"]) / "dags" / "datatables_test_dags.py"
    first_log = tmp_path / "first-try.log"
    with first_log.open("wb") as out:
        first = subprocess.Popen(
            [sys.executable, "-c", script, str(dags_file), logical_date.isoformat(), str(path)],
            cwd=Path(__file__).resolve().parents[2],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 240  # a first try starts Airflow and parses every test DAG
        while not (
            imports_since(emulator, stats) >= 1
            if killed == "after the import"
            else b"is still being read; next look" in first_log.read_bytes()
        ):
            assert first.poll() is None, "the first try ended early:\n" + first_log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "the first try never got there"
            time.sleep(0.05)
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)

    releaser = release_after_the_next_look(emulator) if killed == "while waiting" else None
    dag_run = retry_task(dags_module, "dt_import_slow", f"manual__{logical_date.isoformat()}", "import")
    if releaser is not None:
        releaser.join(timeout=10)
        assert releaser.released, "the retry never looked at the table"
    ti = dag_run.get_task_instance("import")
    assert str(ti.state) == "success" and ti.try_number == 2
    if killed == "while waiting":
        assert "Reconnecting" in capfd.readouterr().out
    card_id = xcom(dag_run, "import")
    assert card_id == xcom(dag_run, "import", key="card_id")
    assert imports_since(emulator, stats) == 1
    assert stats["credits"] - emulator.credits() == 1
    tables = {c["CardID"]: c for c in emulator.list_cards()}
    assert card_id in tables
    assert tables[card_id]["Processed"] is True


def durable_variables(dag_id: str) -> list[str]:
    """The keys of every Variable the import's notes below Airflow 3.3 use, for one DAG's runs."""
    from airflow.models.variable import Variable
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return list(session.scalars(select(Variable.key).where(Variable.key.like(f"airflow_tables.state.{dag_id}.%"))))


def task_state_store(dag_run, task_id: str) -> dict:
    """What Airflow 3.3's task state store holds for a task instance (key to expiry)."""
    from airflow.models.task_state_store import TaskStateStoreModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(
            select(TaskStateStoreModel).where(
                TaskStateStoreModel.dag_id == dag_run.dag_id,
                TaskStateStoreModel.run_id == dag_run.run_id,
                TaskStateStoreModel.task_id == task_id,
            )
        )
        return {row.key: row.expires_at for row in rows}


@pytest.mark.parametrize("dag_id", ["dt_import_notes", "dt_import_notes_legacy"])
def test_a_retry_after_a_lost_answer_resumes_and_no_note_outlives_the_task(
    dags_module, datatables_conn, stats, tmp_path, dag_id
):
    """Point 8: the notes survive between tries (so the retry adopts the table) and go when the task ends."""
    from airflow_tables.version_compat import AIRFLOW_V_3_3_PLUS

    emulator = datatables_conn
    emulator.set_faults([{"methods": ["POST"], "path": "/data/import", "drop": "after", "times": 1}])
    notes = tmp_path / "notes.json"
    dag_run = run(dags_module, dag_id, file_path=str(orders_csv(tmp_path, "noted.csv")), notes_file=str(notes))

    ti = dag_run.get_task_instance("import")
    assert str(ti.state) == "success" and ti.try_number == 2
    assert imports_since(emulator, stats) == 1 and stats["credits"] - emulator.credits() == 1
    between = json.loads(notes.read_text())
    assert between["try_number"] == 1
    # The first try's note of the import it sent, read by the second try to adopt the table.
    if AIRFLOW_V_3_3_PLUS:  # the task state store holds it; no Variable is ever written for it
        note = between["task_state_store"]["datatables_import_sent"]
        assert between["variables"] == {"datatables_table": None, "datatables_import_sent": None}
        if dag_id == "dt_import_notes":  # the SDK's ResumableJobMixin kept the job there, as 3.3 does
            assert "datatables_table" in task_state_store(dag_run, "import")
    else:
        note = between["variables"]["datatables_import_sent"]
        assert between["task_state_store"] is None
    from airflow_tables._durable import SIGNATURE

    assert set(note) == {"value", SIGNATURE}  # signed with the connection's key (issue 36 point 7)
    assert note["value"]["file"] == "noted.csv"
    assert durable_variables(dag_id) == []


def test_below_airflow_3_3_a_timed_out_wait_resumes_through_a_variable_then_removes_it(
    dags_module, datatables_conn, stats, tmp_path
):
    """The stand-in for ResumableJobMixin keeps the job in a Variable keyed by the task instance, while needed."""
    emulator = datatables_conn
    emulator.set_processing_delay(3.0)
    notes = tmp_path / "notes.json"
    dag_run = run(dags_module, "dt_import_notes_legacy", file_path=str(orders_csv(tmp_path)), notes_file=str(notes))

    ti = dag_run.get_task_instance("import")
    assert str(ti.state) == "success" and ti.try_number == 2
    assert imports_since(emulator, stats) == 1
    assert json.loads(notes.read_text())["variables"]["datatables_table"]["value"]["card_id"] == xcom(dag_run, "import")
    assert durable_variables("dt_import_notes_legacy") == []


@pytest.mark.parametrize("ending", ["failed twice", "read badly"])
def test_a_task_that_fails_for_good_leaves_no_variable(dags_module, datatables_conn, stats, tmp_path, ending):
    """Point 8: a final failure (no try left, or one not retried) removes the notes too."""
    emulator = datatables_conn
    if ending == "failed twice":
        emulator.set_processing_delay(300.0)  # both tries' waits (1.5 s) time out, however slow the tries
    else:
        emulator.set_fail_readings(1)
    dag_run = run(dags_module, "dt_import_notes_legacy", file_path=str(orders_csv(tmp_path)), notes_file="/dev/null")

    ti = dag_run.get_task_instance("import")
    assert str(ti.state) == "failed" and ti.try_number == (2 if ending == "failed twice" else 1)
    assert imports_since(emulator, stats) == 1
    assert durable_variables("dt_import_notes_legacy") == []


# -- the job record and the note fail closed ----------------------------------------------------------


def test_a_job_reads_back_as_written():
    job = Job("sales", "CRD-1", "2026-01-01T00:00:00", 12.5, "abc", skipped=True)
    assert Job.from_json(json.loads(json.dumps(job.to_json()))) == job
    # What the previous release stored (no "skipped" unless skipped) still reads.
    old = {"project_id": "sales", "card_id": "CRD-1", "replaced_after": None, "accepted_at": 1, "fingerprint": None}
    assert Job.from_json(old) == Job("sales", "CRD-1", None, 1, None)


@pytest.mark.parametrize(
    "stored",
    [
        None,
        "CRD-1",
        {"card_id": "CRD-1"},
        {"project_id": "sales", "card_id": 7},
        {"project_id": "sales", "card_id": "CRD-1", "accepted_at": True},
        {"project_id": "sales", "card_id": "CRD-1", "skipped": "false"},
        {"project_id": "sales", "card_id": "CRD-1", "extra": 1},
    ],
)
def test_a_stored_job_this_operator_did_not_write_fails_the_task(stored):
    with pytest.raises(AirflowFailException, match="is not one this operator wrote"):
        stored_job(stored)


@pytest.mark.parametrize("file", ["unchanged", "rewritten"])
def test_a_clear_while_the_table_is_still_read_from_the_same_file_reconnects(
    dags_module, datatables_conn, stats, tmp_path, capfd, file
):
    """Issue 37, point 6: a clear that only unsticks a slow wait (the tries gave up, the table is still
    being read) reconnects to the table; a file rewritten since is a new job, imported again.

    Airflow 3.3+ only: below it the job is a Variable, deleted once the task failed for good (no
    note outlives its task), so a clear finds nothing to reconnect to and imports again.
    """
    from airflow_tables.version_compat import AIRFLOW_V_3_3_PLUS

    emulator = datatables_conn
    emulator.set_processing_delay(900.0)  # read until the cleared try has looked (release_after_the_next_look)
    path = orders_csv(tmp_path)
    tables = {c["CardID"] for c in emulator.list_cards()}
    first = run(dags_module, "dt_import_retry", file_path=str(path))  # both tries give up waiting after 1.5 s
    assert state(first, "import") == "failed" and imports_since(emulator, stats) == 1
    (card_id,) = {c["CardID"] for c in emulator.list_cards()} - tables
    if file == "rewritten":
        orders_csv(tmp_path, rows=21)

    releaser = release_after_the_next_look(emulator)
    dag_run = clear_and_run(dags_module, "dt_import_retry", first.run_id, "import")
    releaser.join(timeout=10)

    out = capfd.readouterr().out
    assert state(dag_run, "import") == "success", out[-3000:]
    reconnected = f"cleared while table {card_id}, which its earlier tries imported, is still being read" in out
    if file == "unchanged" and AIRFLOW_V_3_3_PLUS:
        assert reconnected and xcom(dag_run, "import") == card_id
        assert imports_since(emulator, stats) == 1 and stats["credits"] - emulator.credits() == 1
    else:
        assert not reconnected and xcom(dag_run, "import") != card_id
        assert imports_since(emulator, stats) == 2
