"""The operators and the sensor in real DAG runs (dag.test()) against the emulator over HTTP."""

from __future__ import annotations

import csv
import json
import logging
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


# -- issue 24: nothing left behind, and refusals no retry can change -------------------------------


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


def ended_once(dag_run, task_id: str, emulator, credits: int, posts: int) -> object:
    """The task failed on its first try (its retry unused); ``posts`` imports were sent, no credit spent."""
    ti = dag_run.get_task_instance(task_id)
    assert str(ti.state) == "failed" and ti.try_number == 1, (ti.state, ti.try_number)
    sent = [r for r in emulator.stats()["requests"] if r["method"] == "POST" and "/data/import" in r["path"]]
    assert len(sent) == posts, sent
    assert emulator.credits() == credits
    return ti


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
    assert note["file"] == "noted.csv"
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
    assert json.loads(notes.read_text())["variables"]["datatables_table"]["card_id"] == xcom(dag_run, "import")
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


@pytest.fixture
def broke_emulator(tmp_path, monkeypatch):
    """An emulator of the test's own whose organisation has no credit left, as the default connection."""
    from airflow_tables.emulator.testing import EmulatorProcess, make_test_config

    with EmulatorProcess(config=make_test_config(credits=0)) as emulator:
        conn = {"conn_type": "datatables", "host": emulator.base_url, "password": emulator.api_key}
        conn["extra"] = {"project_id": emulator.project_id, "retry_backoff": 0.02}
        monkeypatch.setenv("AIRFLOW_CONN_DATATABLES_DEFAULT", json.dumps(conn))
        yield emulator


def test_no_credit_fails_at_once_without_sending_again(dags_module, broke_emulator, tmp_path, capfd):
    """Point 13: a 402 cannot change by retrying; the file is sent once, the task fails without retry."""
    dag_run = run(dags_module, "dt_import_once", file_path=str(orders_csv(tmp_path)))

    ended_once(dag_run, "import", broke_emulator, 0, posts=1)
    log = "".join(capfd.readouterr())
    assert "no import credit left" in log and "not retried" in log


def test_a_key_that_may_not_import_fails_at_once(dags_module, datatables_conn, monkeypatch, tmp_path, capfd):
    """Point 13: a 403 on the import (a read-only key) is not retried."""
    conn = {"conn_type": "datatables", "host": datatables_conn.base_url, "password": datatables_conn.read_only_key}
    conn["extra"] = {"project_id": datatables_conn.project_id}
    monkeypatch.setenv("AIRFLOW_CONN_DATATABLES_DEFAULT", json.dumps(conn))
    datatables_conn.reset_stats()
    credits = datatables_conn.credits()
    dag_run = run(dags_module, "dt_import_once", file_path=str(orders_csv(tmp_path)))

    ended_once(dag_run, "import", datatables_conn, credits, posts=1)
    log = "".join(capfd.readouterr())
    assert "may not import" in log and "'datatables_default'" in log and datatables_conn.read_only_key not in log


def test_a_file_the_service_refuses_unvalidated_fails_at_once(dags_module, datatables_conn, stats, tmp_path, capfd):
    """Point 13: with validate=False the service's 422 is the first word on the file; the file will not change."""
    bad = tmp_path / "ragged.csv"
    bad.write_text("a,b\n1,2\n3\n", encoding="utf-8")
    dag_run = run(dags_module, "dt_import_unvalidated", file_path=str(bad))

    ended_once(dag_run, "import", datatables_conn, stats["credits"], posts=1)
    assert "validate=True" in "".join(capfd.readouterr())


def test_replacing_a_table_the_list_shows_locked_sends_nothing(dags_module, datatables_conn, stats, tmp_path, capfd):
    """Point 13: the look before the replace already shows a live connection feeding the table."""
    card_id = datatables_conn.connector_card_id
    dag_run = run(dags_module, "dt_replace_once", card_id=card_id, file_path=str(orders_csv(tmp_path)))

    ended_once(dag_run, "replace", datatables_conn, stats["credits"], posts=0)
    log = "".join(capfd.readouterr())
    assert "Salesforce" in log and "nothing was sent" in log


@pytest.mark.parametrize(
    ("file_path", "says"),
    [
        (None, "file_path is None"),
        (["a.csv", "b.csv"], "file_path is a list"),
        ("{path}\n", r"orders.csv\n'"),
        (" {path}", "surrounding whitespace"),
        ("", "file_path is ''"),
    ],
    ids=["None", "list", "newline", "space", "empty"],
)
def test_a_file_path_that_rendered_wrong_fails_before_any_request(
    dags_module, datatables_conn, stats, tmp_path, capfd, file_path, says
):
    """Point 14: refused with the path as it rendered (repr), without retry and before any request."""
    path = orders_csv(tmp_path)
    if isinstance(file_path, str):
        file_path = file_path.format(path=path)
    dag_run = run(dags_module, "dt_import_native", file_path=file_path)

    ended_once(dag_run, "import", datatables_conn, stats["credits"], posts=0)
    assert datatables_conn.stats()["requests"] == []
    log = "".join(capfd.readouterr())
    assert says in log and "TypeError" not in log


def test_missing_ok_says_which_department_it_looked_in(dags_module, datatables_conn, tmp_path, caplog, capfd):
    """Point 17: a table living in another department is not deleted; the log names the department checked."""
    from airflow_tables.hooks.tables import DataTablesHook

    elsewhere = DataTablesHook().import_csv(datatables_conn.other_project_id, orders_csv(tmp_path))
    with caplog.at_level(logging.INFO):
        dag_run = run(dags_module, "dt_delete_missing_ok", card_id=elsewhere)
    assert state(dag_run, "delete") == "success"
    text = caplog.text + "".join(capfd.readouterr())
    assert f"department {datatables_conn.project_id}" in text
    assert "project_id extra of connection 'datatables_default'" in text and "other departments" in text
    assert elsewhere in {c["CardID"] for c in datatables_conn.list_cards(datatables_conn.other_project_id)}


def test_a_missing_table_names_the_department_and_where_it_came_from(dags_module, datatables_conn, capfd):
    """Point 17, without missing_ok: the failure says the same."""
    missing = "CRD-00000000-0000-4000-8000-00000000d1ff"
    dag_run = run(dags_module, "dt_delete_fail", card_id=missing)
    assert state(dag_run, "delete") == "failed"
    log = "".join(capfd.readouterr())
    assert f"department {datatables_conn.project_id} (the project_id extra of connection 'datatables_default')" in log
