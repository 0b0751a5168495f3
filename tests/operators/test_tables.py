"""The operators and the sensor in real DAG runs (dag.test()) against the emulator over HTTP."""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

import pytest
from tests.conftest import APP_URL
from tests.operators._runs import import_table, imports_since, orders_csv, run, state, xcom

CARD = r"CRD-[0-9a-f-]{36}"


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


# -- issue 24: nothing left behind, and refusals no retry can change -------------------------------


def ended_once(dag_run, task_id: str, emulator, credits: int, posts: int) -> object:
    """The task failed on its first try (its retry unused); ``posts`` imports were sent, no credit spent."""
    ti = dag_run.get_task_instance(task_id)
    assert str(ti.state) == "failed" and ti.try_number == 1, (ti.state, ti.try_number)
    sent = [r for r in emulator.stats()["requests"] if r["method"] == "POST" and "/data/import" in r["path"]]
    assert len(sent) == posts, sent
    assert emulator.credits() == credits
    return ti


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


# -- arguments that rendered wrong cost nothing; connected tables; the link --------------------------


def requests(emulator, method: str | None = None, path: str = "") -> list[dict]:
    return [
        r
        for r in emulator.stats()["requests"]
        if (method is None or r["method"] == method) and path in r.get("path", "")
    ]


def failed_once_without_request(dag_run, task_id: str, emulator, credits: int) -> None:
    ti = dag_run.get_task_instance(task_id)
    assert str(ti.state) == "failed" and ti.try_number == 1, (ti.state, ti.try_number)  # retries=1 not used
    assert emulator.stats()["requests"] == []
    assert emulator.credits() == credits


@pytest.mark.parametrize("card_id", ["", "None", "  "], ids=["empty", "None", "blank"])
@pytest.mark.parametrize("dag_id", ["dt_replace_once", "dt_import_card"])
def test_a_card_id_that_renders_empty_fails_before_any_request(dags_module, counted, tmp_path, card_id, dag_id):
    credits = counted.credits()
    dag_run = run(dags_module, dag_id, card_id=card_id, file_path=str(orders_csv(tmp_path)))
    failed_once_without_request(dag_run, "replace" if "replace" in dag_id else "import", counted, credits)


def test_a_replace_operator_needs_a_card_id_when_built():
    from airflow_tables.operators.tables import DataTablesReplaceOperator

    with pytest.raises(ValueError, match="card_id"):
        DataTablesReplaceOperator(task_id="r", card_id="", file_path="x.csv")


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"poll_interval": 0}, "poll_interval"),
        ({"poll_interval": -1}, "poll_interval"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": -3}, "timeout"),
    ],
)
def test_wait_settings_are_checked_when_the_operator_is_built(kwargs, named):
    from airflow_tables.operators.tables import DataTablesDeleteOperator, DataTablesImportOperator

    with pytest.raises(ValueError, match=named):
        DataTablesImportOperator(task_id="i", file_path="x.csv", **kwargs)
    with pytest.raises(ValueError, match=named):
        DataTablesDeleteOperator(task_id="d", card_id="CRD-1", **kwargs)


@pytest.mark.parametrize("project_id", ["", " ", "None"])
def test_an_empty_project_id_fails_instead_of_using_the_default(dags_module, counted, tmp_path, project_id):
    credits = counted.credits()
    dag_run = run(dags_module, "dt_import_project", project_id=project_id, file_path=str(orders_csv(tmp_path)))
    failed_once_without_request(dag_run, "import", counted, credits)


@pytest.mark.parametrize(
    ("card_id", "says"),
    [
        ("crd-00000000-0000-4000-8000-000000000001", "upper-case"),
        (" CRD-00000000-0000-4000-8000-000000000001", "white space"),
        ("CRD-00000000-0000-4000-8000-000000000001\n", "white space"),
        ("None", "empty"),
        ("12345", "not a CardID"),
    ],
)
def test_a_badly_shaped_card_id_fails_before_any_request_without_retry(dags_module, counted, tmp_path, card_id, says):
    credits = counted.credits()
    for dag_id, task_id in (("dt_replace_once", "replace"), ("dt_sensor_retry", "wait")):
        counted.reset_stats()
        dag_run = run(dags_module, dag_id, card_id=card_id, file_path=str(orders_csv(tmp_path)))
        failed_once_without_request(dag_run, task_id, counted, credits)


def test_a_connection_without_app_url_logs_no_link_error(dags_module, emulator, monkeypatch, tmp_path, capfd, caplog):
    conn = {
        "conn_type": "datatables",
        "host": emulator.base_url,
        "password": emulator.api_key,
        "extra": {"project_id": emulator.project_id},
    }
    monkeypatch.setenv("AIRFLOW_CONN_DATATABLES_DEFAULT", json.dumps(conn))
    with caplog.at_level(logging.INFO):
        dag_run = run(dags_module, "dt_import_poke", file_path=str(orders_csv(tmp_path)))
    assert str(dag_run.get_task_instance("import").state) == "success"
    out, err = capfd.readouterr()
    text = caplog.text + out + err
    assert "XCom not found" not in text


def test_delete_waits_for_a_table_being_read_that_also_reports_locked(dags_module, counted, tmp_path):
    emulator = counted
    emulator.set_processing_delay(1.0)
    emulator.set_settings(lock_while_reading=True)
    card_id = import_table(emulator, orders_csv(tmp_path))
    assert next(c for c in emulator.list_cards() if c["CardID"] == card_id)["LockedFromDelete"] is True

    dag_run = run(dags_module, "dt_delete_fail", card_id=card_id)

    assert state(dag_run, "delete") == "success"  # waited (if_processing="wait"), then deleted
    assert card_id not in {c["CardID"] for c in emulator.list_cards()}


def test_replacing_a_connector_table_fails_at_once_without_sending_again(dags_module, counted, tmp_path):
    emulator = counted
    emulator.set_connector_status(emulator.connector_card_id, "paused")  # not locked: the service has the say
    credits = emulator.credits()
    try:
        dag_run = run(
            dags_module,
            "dt_replace_once_unchecked",  # the columns differ: on_schema_change would refuse before sending
            card_id=emulator.connector_card_id,
            file_path=str(orders_csv(tmp_path)),
        )
    finally:  # the shared emulator's other tests expect the connection live
        emulator.set_connector_status(emulator.connector_card_id, "active")

    ti = dag_run.get_task_instance("replace")
    assert str(ti.state) == "failed" and ti.try_number == 1  # AirflowFailException: retries=1 not used
    assert len(requests(emulator, "POST", "/data/import")) == 1
    assert emulator.credits() == credits


def test_a_replacement_answer_without_card_id_returns_the_card_id_sent(dags_module, counted, tmp_path):
    emulator = counted
    card_id = import_table(emulator, orders_csv(tmp_path))
    emulator.wait_until_processed(emulator.project_id, card_id)
    emulator.set_settings(replacement_card_id=False)

    dag_run = run(dags_module, "dt_replace_poke", card_id=card_id, file_path=str(orders_csv(tmp_path, rows=3)))

    assert state(dag_run, "replace") == "success"
    assert xcom(dag_run, "replace") == card_id
    assert next(c for c in emulator.list_cards() if c["CardID"] == card_id)["Rows"] == 3


#: Airflow's two warnings, as every supported release words them (3.1.8 and later add "; cannot create asset event").
_ASSET_WARNINGS = (re.compile(r"AssetModel .* not found"), re.compile(r"Emitting event for inactive AssetModel"))


def test_the_asset_warnings_come_only_for_a_table_no_dag_declares(dags_module, datatables_conn, tmp_path, capfd):
    """What docs/operators.md ("Assets") says of Airflow's two asset warnings, held to a real run.

    A new table's event goes through the alias to an asset no DAG names: Airflow warns twice and
    records it anyway. Once a DAG schedules on the table's asset, a replace of it logs neither.
    """
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import func, select
    from tests._dag_files import dags_in, install

    from airflow_tables.assets import table_asset

    capfd.readouterr()
    dag_run = run(dags_module, "dt_import_poke", file_path=str(orders_csv(tmp_path, name="undeclared.csv")))
    card_id = xcom(dag_run, "import")
    log = "".join(capfd.readouterr())
    assert all(warning.search(log) for warning in _ASSET_WARNINGS), "Airflow no longer warns: update the docs"

    asset = table_asset(datatables_conn.project_id, card_id)
    consumer = tmp_path / f"dt_on_{card_id[4:12]}.py"
    consumer.write_text(
        "from datetime import datetime\n"
        "from airflow.providers.standard.operators.empty import EmptyOperator\n"
        "from airflow.sdk import DAG, Asset\n"
        f"with DAG({consumer.stem!r}, schedule=[Asset(name={asset.name!r}, uri={asset.uri!r})],"
        " start_date=datetime(2026, 1, 1), catchup=False) as dag:\n"
        "    EmptyOperator(task_id='noop')\n"
    )
    (dag,) = dags_in(install(consumer))
    try:
        dag.test()  # writes the DAG, and with it the asset it declares, to the metadata database
    finally:
        (Path(os.environ["AIRFLOW_HOME"]) / "dags" / consumer.name).unlink()
    capfd.readouterr()
    dag_run = run(dags_module, "dt_replace_poke", card_id=card_id, file_path=str(orders_csv(tmp_path, rows=5)))
    assert state(dag_run, "replace") == "success"
    log = "".join(capfd.readouterr())
    assert not [warning for warning in _ASSET_WARNINGS if warning.search(log)], log[-3000:]
    with create_session() as session:
        events = session.scalar(
            select(func.count())
            .select_from(AssetEvent)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .where(AssetModel.uri == asset.uri)
        )
    assert events == 2  # the import's and the replace's
