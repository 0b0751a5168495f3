"""A DAG author's first mistakes (issue 18, items 1 and 4 to 7): none costs a credit, each says what is wrong.

Each runs a real DAG with dag.test() against the emulator and reads the emulator's own
request log and credit balance.
"""

from __future__ import annotations

import json
import logging

import pytest
from tests.hooks.conftest import make_hook  # noqa: F401  (the fixture, reused)
from tests.operators._runs import run
from tests.operators.test_operators import import_table, orders_csv


@pytest.fixture
def counted(datatables_conn):
    datatables_conn.reset_stats()
    return datatables_conn


def failed_once_without_request(dag_run, task_id: str, emulator, credits: int) -> None:
    ti = dag_run.get_task_instance(task_id)
    assert str(ti.state) == "failed" and ti.try_number == 1, (ti.state, ti.try_number)  # retries=1 not used
    assert emulator.stats()["requests"] == []
    assert emulator.credits() == credits


# -- 1. a card_id that renders empty never creates a new table --------------------------------------


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


# -- 4. poll_interval and timeout ---------------------------------------------------------------------


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


def test_the_sensor_checks_its_poke_interval():
    from airflow_tables.sensors.tables import DataTablesProcessedSensor

    with pytest.raises(ValueError, match="poke_interval"):
        DataTablesProcessedSensor(task_id="w", card_id="CRD-1", poke_interval=0)


def test_timeout_none_means_no_deadline_on_the_worker(counted, tmp_path, caplog):
    from airflow_tables.hooks.tables import DataTablesHook

    counted.set_processing_delay(0.5)
    card_id = import_table(counted, orders_csv(tmp_path))
    look = DataTablesHook().wait_for_table(None, card_id, poll_interval=0.1, timeout=None)
    assert look.status.value == "ready"


def test_the_shared_poller_never_spins(counted, tmp_path):
    """A trigger asking for a 1 ms interval gets the poller's floor, not a busy loop."""
    import asyncio

    from airflow_tables.triggers import _department_poller
    from airflow_tables.triggers.tables import DataTablesProcessedTrigger

    counted.set_processing_delay(1.0)
    card_id = import_table(counted, orders_csv(tmp_path))
    counted.reset_stats()

    async def first_event():
        trigger = DataTablesProcessedTrigger(project_id=counted.project_id, card_id=card_id, poll_interval=0.001)
        return await asyncio.wait_for(trigger.run().__anext__(), 30)

    event = asyncio.run(first_event())
    assert event.payload["status"] == "ready"
    gets = [r for r in counted.stats()["requests"] if r["method"] == "GET"]
    assert len(gets) <= 1.0 / _department_poller.MIN_INTERVAL + 3, len(gets)  # not thousands


# -- 5. an explicit empty project_id ------------------------------------------------------------------


@pytest.mark.parametrize("project_id", ["", " ", "None"])
def test_an_empty_project_id_fails_instead_of_using_the_default(dags_module, counted, tmp_path, project_id):
    credits = counted.credits()
    dag_run = run(dags_module, "dt_import_project", project_id=project_id, file_path=str(orders_csv(tmp_path)))
    failed_once_without_request(dag_run, "import", counted, credits)


def test_the_hook_refuses_an_explicit_empty_project_id(counted):
    from airflow_tables.hooks.tables import DataTablesHook

    with pytest.raises(ValueError, match="project_id is empty"):
        DataTablesHook().list_cards("")
    assert counted.stats()["requests"] == []


# -- 6. a badly shaped CardID ---------------------------------------------------------------------------


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


# -- 7. messages that mislead -------------------------------------------------------------------------


def test_an_https_host_against_plain_http_says_tls_failed_and_is_not_retried(counted, make_hook):  # noqa: F811
    from airflow_tables.exceptions import DataTablesConnectionError

    bare = counted.base_url.split("://", 1)[1]  # no scheme: read as https
    hook = make_hook(bare, counted.api_key, max_retries=5)
    with pytest.raises(DataTablesConnectionError) as error:
        hook.list_cards(counted.project_id)
    text = str(error.value)
    assert "TLS handshake" in text and "nothing was sent" in text
    assert f"http://{bare}" in text
    assert error.value.retryable is False and error.value.request_sent is False
    assert counted.stats()["requests"] == []


def test_a_host_ending_in_the_api_version_is_told_to_drop_it(counted, make_hook):  # noqa: F811
    hook = make_hook(counted.base_url + "/v1.0", counted.api_key)
    with pytest.raises(ValueError, match=r"drop '/v1.0'"):
        hook.list_cards(counted.project_id)


def test_the_sensor_names_the_department_of_a_missing_table(dags_module, counted, capfd):
    missing = "CRD-00000000-0000-4000-8000-00000000feed"
    dag_run = run(dags_module, "dt_sensor_poke", card_id=missing)
    assert str(dag_run.get_task_instance("wait").state) == "failed"
    assert f"{missing} is not (or no longer) in department {counted.project_id}" in "".join(capfd.readouterr())


def test_a_timeout_message_says_how_long_it_waited(counted, tmp_path):
    from airflow_tables.exceptions import DataTablesTimeoutError
    from airflow_tables.hooks.tables import DataTablesHook

    counted.set_processing_delay(5.0)
    card_id = import_table(counted, orders_csv(tmp_path))
    with pytest.raises(DataTablesTimeoutError, match=r"after 0\.3 s"):
        DataTablesHook().wait_for_processed(None, card_id, poll_interval=0.1, timeout=0.3)


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
