"""DataTablesProcessedSensor: a table gone or read badly has the same outcome in every mode.

With ``soft_fail`` (or ``never_fail``) the task is skipped, as poke mode always did; without,
it fails without retry. Deferrable runs go through the real trigger against the emulator and
resume the sensor with the event it fired, as the task runner does.
"""

from __future__ import annotations

import asyncio

import pytest
from tests.operators._runs import run
from tests.triggers.test_tables import imported

from airflow_tables.sensors.tables import DataTablesProcessedSensor
from airflow_tables.version_compat import AirflowFailException, AirflowSkipException, TaskDeferred

GONE = "CRD-00000000-0000-4000-8000-00000000dead"


@pytest.fixture(autouse=True)
def low_floor(monkeypatch):
    monkeypatch.setenv("AIRFLOW__DATATABLES__MIN_POLL_INTERVAL", "0.1")


def run_sensor(card_id: str, deferrable: bool, **kwargs) -> object:
    """Run the sensor to its end: in deferrable mode, through the trigger and back into the task."""
    sensor = DataTablesProcessedSensor(
        task_id="wait", card_id=card_id, deferrable=deferrable, poke_interval=0.1, timeout=30, **kwargs
    )
    try:
        return sensor.execute({})
    except TaskDeferred as deferred:
        event = asyncio.run(_first_event(deferred.trigger))
        return sensor.resume_execution(deferred.method_name, {"event": event.payload}, {})


async def _first_event(trigger):
    gen = trigger.run()
    try:
        return await asyncio.wait_for(anext(gen), 30)
    finally:
        await gen.aclose()


def failed_table(emulator, tmp_path) -> str:
    """A table still being read when the sensor first looks, whose read then fails."""
    emulator.set_fail_readings(1)
    emulator.set_processing_delay(0.5)
    return imported(emulator, tmp_path)


@pytest.mark.parametrize("deferrable", [False, True], ids=["poke", "deferrable"])
@pytest.mark.parametrize("flag", ["soft_fail", "never_fail"])
def test_a_gone_table_is_skipped_with_soft_fail_in_both_modes(datatables_conn, deferrable, flag):
    with pytest.raises(AirflowSkipException, match=GONE):
        run_sensor(GONE, deferrable, **{flag: True})


@pytest.mark.parametrize("deferrable", [False, True], ids=["poke", "deferrable"])
def test_a_table_read_badly_while_waiting_is_skipped_with_soft_fail_in_both_modes(
    datatables_conn, tmp_path, deferrable
):
    card_id = failed_table(datatables_conn, tmp_path)
    with pytest.raises(AirflowSkipException):
        run_sensor(card_id, deferrable, soft_fail=True)


@pytest.mark.parametrize("deferrable", [False, True], ids=["poke", "deferrable"])
def test_without_soft_fail_a_gone_table_fails_without_retry_in_both_modes(datatables_conn, deferrable):
    with pytest.raises(AirflowFailException, match=GONE):
        run_sensor(GONE, deferrable)


def test_the_sensor_checks_its_poke_interval():
    from airflow_tables.sensors.tables import DataTablesProcessedSensor

    with pytest.raises(ValueError, match="poke_interval"):
        DataTablesProcessedSensor(task_id="w", card_id="CRD-1", poke_interval=0)


def test_the_sensor_names_the_department_of_a_missing_table(dags_module, datatables_conn, capfd):
    missing = "CRD-00000000-0000-4000-8000-00000000feed"
    dag_run = run(dags_module, "dt_sensor_poke", card_id=missing)
    assert str(dag_run.get_task_instance("wait").state) == "failed"
    assert f"{missing} is not (or no longer) in department {datatables_conn.project_id}" in "".join(capfd.readouterr())
