"""Deferred waits are bounded even when no triggerer runs: ``defer(timeout=)`` carries the wait's end.

The same helper (``utils.waiting.defer``) serves the sensor and the import operator;
each is driven here to its deferral against the emulator, with a table being read.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from tests.triggers.test_tables import imported

from airflow_tables.operators.tables import DataTablesImportOperator
from airflow_tables.sensors.tables import DataTablesProcessedSensor
from airflow_tables.version_compat import TaskDeferred

CASES = [
    # (wait's timeout, execution_timeout, the deferral's timeout, what the log names)
    pytest.param(600.0, None, 600.0, "the wait's timeout (600 s) ends it", id="deadline only"),
    pytest.param(
        600.0,
        timedelta(seconds=60),
        60.0,
        "the task's execution_timeout (60 s) ends it",
        id="execution_timeout shorter",
    ),
    pytest.param(60.0, timedelta(hours=1), 60.0, "the wait's timeout (60 s) ends it", id="execution_timeout longer"),
]


class _TaskInstance:
    """What the operator's wait reads of the task instance: its key (the job is signed for it), and its XComs."""

    dag_id, run_id, task_id, map_index = "waiting", "manual__1", "load", -1

    def __init__(self) -> None:
        self.xcom: dict[str, object] = {}

    def xcom_push(self, key: str, value: object) -> None:
        self.xcom[key] = value


def being_read(emulator, tmp_path) -> str:
    emulator.set_processing_delay(60)
    return imported(emulator, tmp_path)


def deferral_of(task, run) -> TaskDeferred:
    started = time.time()
    with pytest.raises(TaskDeferred) as deferred:
        run()
    trigger = deferred.value.trigger
    limit = deferred.value.timeout
    if limit is None:
        assert trigger.deadline is None
    else:  # the trigger ends its wait at the same moment, with a clean "timeout" event
        assert started + limit.total_seconds() <= trigger.deadline <= time.time() + limit.total_seconds()
    return deferred.value


def sensor_deferral(card_id: str, timeout, execution_timeout) -> TaskDeferred:
    sensor = DataTablesProcessedSensor(
        task_id="wait", card_id=card_id, deferrable=True, timeout=timeout, execution_timeout=execution_timeout
    )
    return deferral_of(sensor, lambda: sensor.execute({}))


def operator_deferral(project_id: str, card_id: str, timeout, execution_timeout) -> TaskDeferred:
    operator = DataTablesImportOperator(
        task_id="load", file_path="unused.csv", deferrable=True, timeout=timeout, execution_timeout=execution_timeout
    )
    context = {"ti": _TaskInstance()}
    job = {"project_id": project_id, "card_id": card_id, "replaced_after": None}
    stored = operator._store(context).signed(operator.external_id_key, job)  # as submit_job returns it
    return deferral_of(operator, lambda: operator.poll_until_complete(stored, context))


@pytest.mark.parametrize(("timeout", "execution_timeout", "expected", "says"), CASES)
def test_the_sensors_deferral_ends_with_the_wait_or_the_task(
    datatables_conn, tmp_path, capsys, timeout, execution_timeout, expected, says
):
    card_id = being_read(datatables_conn, tmp_path)
    deferred = sensor_deferral(card_id, timeout, execution_timeout)
    logged = capsys.readouterr().out
    assert deferred.timeout == timedelta(seconds=expected)
    assert says in logged and card_id in logged


@pytest.mark.parametrize(("timeout", "execution_timeout", "expected", "says"), CASES)
def test_the_import_operators_deferral_ends_with_the_wait_or_the_task(
    datatables_conn, tmp_path, capsys, timeout, execution_timeout, expected, says
):
    card_id = being_read(datatables_conn, tmp_path)
    deferred = operator_deferral(datatables_conn.project_id, card_id, timeout, execution_timeout)
    logged = capsys.readouterr().out
    assert deferred.timeout == timedelta(seconds=expected)
    assert says in logged and card_id in logged


def test_an_import_waiting_without_any_deadline_says_so(datatables_conn, tmp_path, capsys):
    card_id = being_read(datatables_conn, tmp_path)
    deferred = operator_deferral(datatables_conn.project_id, card_id, None, None)
    logged = capsys.readouterr().out
    assert deferred.timeout is None
    assert "no deadline (timeout=None and no execution_timeout)" in logged


def test_an_import_with_no_wait_deadline_still_ends_with_its_execution_timeout(datatables_conn, tmp_path, capsys):
    card_id = being_read(datatables_conn, tmp_path)
    deferred = operator_deferral(datatables_conn.project_id, card_id, None, timedelta(minutes=5))
    logged = capsys.readouterr().out
    assert deferred.timeout == timedelta(minutes=5)
    assert "the task's execution_timeout (300 s) ends it, before the wait's timeout (none)" in logged
