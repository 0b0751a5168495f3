"""The operators and the sensor in real DAG runs (dag.test()) against the emulator over HTTP."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from tests.conftest import APP_URL
from tests.operators._runs import retry_task, run, state, xcom

CARD = r"CRD-[0-9a-f-]{36}"


def orders_csv(directory: Path, name: str = "orders.csv", rows: int = 20, amount: int = 10) -> Path:
    path = directory / name
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["order_id", "region", "amount", "note"])
        for i in range(rows):
            writer.writerow([i + 1, ["North", "South"][i % 2], amount + i, "a, b" if i % 3 else ""])
    return path


def import_table(emulator, path: Path) -> str:
    """Make a table directly (not through the operator under test)."""
    from airflow_tables.hooks.tables import DataTablesHook

    return DataTablesHook().import_csv(emulator.project_id, path)


def imports_since(emulator, before: dict) -> int:
    return emulator.stats()["imports_accepted"] - before["imports_accepted"]


@pytest.fixture
def stats(datatables_conn):
    """The emulator's counters before the test's run, to compare with after."""
    datatables_conn.reset_stats()
    return {"imports_accepted": datatables_conn.stats()["imports_accepted"], "credits": datatables_conn.credits()}


@pytest.mark.parametrize("mode", ["poke", "defer"])
def test_import_waits_and_returns_the_card_id(dags_module, datatables_conn, stats, tmp_path, mode):
    emulator = datatables_conn
    emulator.set_processing_delay(0.6)
    path = orders_csv(tmp_path)
    dag_run = run(dags_module, f"dt_import_{mode}", file_path=str(path))

    assert state(dag_run, "import") == "success"
    card_id = xcom(dag_run, "import")
    assert xcom(dag_run, "import", key="card_id") == card_id
    assert xcom(dag_run, "import", key="_link_DataTablesTableLink") == (
        f"{APP_URL}/projects/{emulator.project_id}/cards/{card_id}"
    )
    table = next(c for c in emulator.list_cards() if c["CardID"] == card_id)
    assert table["Processed"] is True and table["SuccessfulUpload"] is True and table["Rows"] == 20
    assert imports_since(emulator, stats) == 1
    assert stats["credits"] - emulator.credits() == 1


def test_validation_failure_costs_nothing(dags_module, datatables_conn, stats, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n3\n", encoding="utf-8")
    dag_run = run(dags_module, "dt_import_poke", file_path=str(bad))
    assert state(dag_run, "import") == "failed"
    assert datatables_conn.stats()["requests"] == []
    assert datatables_conn.credits() == stats["credits"]


def test_expectations_failure_costs_nothing(dags_module, datatables_conn, stats, tmp_path):
    negative = orders_csv(tmp_path, amount=-50)
    dag_run = run(dags_module, "dt_import_gx", file_path=str(negative))
    assert state(dag_run, "import") == "failed"
    assert datatables_conn.stats()["requests"] == []
    assert datatables_conn.credits() == stats["credits"]


def test_expectations_pass_then_import(dags_module, datatables_conn, stats, tmp_path):
    dag_run = run(dags_module, "dt_import_gx", file_path=str(orders_csv(tmp_path)))
    assert state(dag_run, "import") == "success"
    assert imports_since(datatables_conn, stats) == 1


@pytest.mark.parametrize("mode", ["poke", "defer"])
def test_replace_while_being_read_waits_then_keeps_the_card_id(dags_module, datatables_conn, stats, tmp_path, mode):
    emulator = datatables_conn
    emulator.set_processing_delay(1.0)
    card_id = import_table(emulator, orders_csv(tmp_path, "first.csv", rows=5))
    newer = orders_csv(tmp_path, "second.csv", rows=33)
    dag_run = run(dags_module, f"dt_replace_{mode}", file_path=str(newer), card_id=card_id)

    assert state(dag_run, "replace") == "success"
    assert xcom(dag_run, "replace") == card_id
    table = next(c for c in emulator.list_cards() if c["CardID"] == card_id)
    assert table["Rows"] == 33 and table["Processed"] is True
    assert imports_since(emulator, stats) == 2  # the table's own import, then one replacement
    # the operator saw the table being read and waited: its replace came after a look, never a 409
    assert not [r for r in emulator.stats()["requests"] if r["status"] == 409]


def test_retry_after_a_timed_out_wait_reattaches(dags_module, datatables_conn, stats, tmp_path):
    """The first try gives up waiting; the retry finds the CardID in the task state store."""
    emulator = datatables_conn
    emulator.set_processing_delay(3.0)
    dag_run = run(dags_module, "dt_import_retry", file_path=str(orders_csv(tmp_path)))

    ti = dag_run.get_task_instance("import")
    assert str(ti.state) == "success" and ti.try_number == 2
    assert imports_since(emulator, stats) == 1
    assert stats["credits"] - emulator.credits() == 1


def test_below_airflow_3_3_the_retry_reattaches_through_a_variable(dags_module, datatables_conn, stats, tmp_path):
    """The stand-in for ResumableJobMixin keeps the job in a Variable keyed by the task instance."""
    emulator = datatables_conn
    emulator.set_processing_delay(3.0)
    dag_run = run(dags_module, "dt_import_retry_legacy", file_path=str(orders_csv(tmp_path)))

    ti = dag_run.get_task_instance("import")
    assert str(ti.state) == "success" and ti.try_number == 2
    assert imports_since(emulator, stats) == 1
    from airflow.models.variable import Variable

    key = f"airflow_tables.state.dt_import_retry_legacy.{dag_run.run_id}.import.-1.datatables_table"
    assert json.loads(Variable.get(key))["card_id"] == xcom(dag_run, "import")


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
    # "while waiting": the table must still be read when the retry starts, also on a busy machine.
    emulator.set_processing_delay(4.0 if killed == "after the import" else 20.0)
    path = orders_csv(tmp_path)
    logical_date = datetime.now(timezone.utc).replace(microsecond=0)
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
        deadline = time.monotonic() + 60
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

    dag_run = retry_task(dags_module, "dt_import_slow", f"manual__{logical_date.isoformat()}", "import")
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


@pytest.mark.parametrize("mode", ["poke", "defer", "reschedule"])
def test_sensor_returns_the_summary(dags_module, datatables_conn, tmp_path, mode):
    datatables_conn.set_processing_delay(0.8)
    card_id = import_table(datatables_conn, orders_csv(tmp_path))
    dag_run = run(dags_module, f"dt_sensor_{mode}", card_id=card_id)
    assert state(dag_run, "wait") == "success"
    summary = xcom(dag_run, "wait")
    assert summary["CardID"] == card_id and summary["Processed"] is True and summary["Rows"] == 20


@pytest.mark.parametrize("mode", ["poke", "defer"])
def test_sensor_fails_without_retry_when_read_badly(dags_module, datatables_conn, tmp_path, mode):
    datatables_conn.set_fail_readings(1)
    card_id = import_table(datatables_conn, orders_csv(tmp_path))
    dag_run = run(dags_module, f"dt_sensor_{mode}", card_id=card_id)
    ti = dag_run.get_task_instance("wait")
    assert str(ti.state) == "failed" and ti.try_number == 1


@pytest.mark.parametrize("reading_for", [0.0, 1.0], ids=["ready", "being-read"])
def test_delete_waits_for_a_read_then_deletes(dags_module, datatables_conn, tmp_path, reading_for):
    datatables_conn.set_processing_delay(reading_for)
    card_id = import_table(datatables_conn, orders_csv(tmp_path))
    dag_run = run(dags_module, "dt_delete_fail", card_id=card_id)
    assert state(dag_run, "delete") == "success"
    assert card_id not in {c["CardID"] for c in datatables_conn.list_cards()}


def test_delete_refuses_a_table_being_read_when_asked(dags_module, datatables_conn, tmp_path):
    # Long enough to outlast dag.test()'s start-up on a busy machine (it costs nothing: the task fails at once).
    datatables_conn.set_processing_delay(60.0)
    card_id = import_table(datatables_conn, orders_csv(tmp_path))
    dag_run = run(dags_module, "dt_delete_no_wait", card_id=card_id)
    assert state(dag_run, "delete") == "failed"
    assert card_id in {c["CardID"] for c in datatables_conn.list_cards()}


@pytest.mark.parametrize(("variant", "expected"), [("fail", "failed"), ("skip", "skipped")])
def test_delete_locked_table(dags_module, datatables_conn, variant, expected):
    card_id = datatables_conn.connector_card_id
    datatables_conn.reset_stats()
    dag_run = run(dags_module, f"dt_delete_{variant}", card_id=card_id)
    assert state(dag_run, "delete") == expected
    assert card_id in {c["CardID"] for c in datatables_conn.list_cards()}
    assert not [r for r in datatables_conn.stats()["requests"] if r["method"] == "DELETE"]


@pytest.mark.parametrize(("dag_id", "expected"), [("dt_delete_fail", "failed"), ("dt_delete_missing_ok", "success")])
def test_delete_missing_table(dags_module, datatables_conn, dag_id, expected):
    missing = "CRD-00000000-0000-4000-8000-00000000dead"
    assert state(run(dags_module, dag_id, card_id=missing), "delete") == expected


def test_delete_without_permission_fails_without_retry(dags_module, datatables_conn, monkeypatch, tmp_path):
    card_id = import_table(datatables_conn, orders_csv(tmp_path))
    conn = json.dumps(
        {
            "conn_type": "datatables",
            "host": datatables_conn.base_url,
            "password": datatables_conn.read_only_key,
            "extra": {"project_id": datatables_conn.project_id},
        }
    )
    monkeypatch.setenv("AIRFLOW_CONN_DATATABLES_DEFAULT", conn)
    dag_run = run(dags_module, "dt_delete_fail", card_id=card_id)
    ti = dag_run.get_task_instance("delete")
    assert str(ti.state) == "failed" and ti.try_number == 1
    assert card_id in {c["CardID"] for c in datatables_conn.list_cards()}


def test_openlineage_facets_name_the_file_and_the_table(dags_module, datatables_conn, tmp_path):
    path = orders_csv(tmp_path)
    dag_run = run(dags_module, "dt_import_poke", file_path=str(path))
    ti = dag_run.get_task_instance("import")
    card_id = xcom(dag_run, "import")

    class RuntimeTI:  # what the OpenLineage listener hands over: xcom_pull and task_id
        task_id = ti.task_id

        @staticmethod
        def xcom_pull(task_ids: str, key: str):
            return xcom(dag_run, task_ids, key=key)

    from airflow_tables.operators.tables import DataTablesImportOperator

    operator = DataTablesImportOperator(task_id="import", file_path=str(path))  # as rendered for that run
    lineage = operator.get_openlineage_facets_on_complete(RuntimeTI())
    assert [(d.namespace, d.name) for d in lineage.inputs] == [("file", str(path))]
    host = datatables_conn.base_url.split("://", 1)[1]
    assert [(d.namespace, d.name) for d in lineage.outputs] == [
        (f"datatables://{host}", f"{datatables_conn.project_id}/{card_id}")
    ]
