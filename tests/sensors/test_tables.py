"""DataTablesProcessedSensor: a table gone or read badly has the same outcome in every mode.

With ``soft_fail`` (or ``never_fail``) the task is skipped, as poke mode always did; without,
it fails without retry. Deferrable runs go through the real trigger against the emulator and
resume the sensor with the event it fired, as the task runner does.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tests._dag_files import dags_in, install
from tests.operators._runs import run, state, xcom
from tests.triggers.test_tables import imported, small_csv

from airflow_tables.sensors.tables import DataTablesProcessedSensor
from airflow_tables.version_compat import AirflowFailException, AirflowSkipException, TaskDeferred

GONE = "CRD-00000000-0000-4000-8000-00000000dead"
AFTER_DAGS = Path(__file__).parent / "dags" / "datatables_sensor_after_dags.py"


@pytest.fixture(autouse=True)
def low_floor(monkeypatch):
    monkeypatch.setenv("AIRFLOW__DATATABLES__MIN_POLL_INTERVAL", "0.1")


def run_sensor(card_id: str, deferrable: bool, **kwargs) -> object:
    """Run the sensor to its end: in deferrable mode, through the trigger and back into the task."""
    kwargs.setdefault("timeout", 30)
    sensor = DataTablesProcessedSensor(
        task_id="wait", card_id=card_id, deferrable=deferrable, poke_interval=0.1, **kwargs
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


# -- completed_after: a read that finished after an instant (issue 28, point 5) ---------------


def _read_at(emulator, card_id: str) -> datetime:
    done = emulator.wait_until_processed(emulator.project_id, card_id)
    return datetime.fromisoformat(done["UploadCompletionTime"]).replace(tzinfo=UTC)


def _replace_once_watched(
    emulator, card_id: str, directory: Path, not_before: datetime, waiting: Path | None = None
) -> threading.Thread:
    """Replace the table once the sensor has looked at it and the clock is past ``not_before``
    (and, given ``waiting``, a second after that file says the sensor deferred: its instant, in
    whole seconds as the service writes times, is then behind any read the replacement makes).

    The replacement runs in a process of its own: ``dag.test()`` runs the sensor in this one,
    and a thread of it calling the hook would find the sensor's task context (Airflow keeps it
    in a module-level list) and write the hook's send-once note through the in-process
    supervisor's comms while the sensor's own requests go through them, which is not safe.
    """
    seen = len(emulator.stats()["requests"])
    replacement = small_csv(directory, rows=7)
    script = (
        "import sys; from airflow_tables.hooks.tables import DataTablesHook; "
        "DataTablesHook().import_csv(None, sys.argv[1], card_id=sys.argv[2])"
    )

    def replace() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
            len(emulator.stats()["requests"]) < seen + 2
            or datetime.now(UTC) < not_before
            or (waiting is not None and not (waiting.exists() and time.time() > waiting.stat().st_mtime + 1.1))
        ):
            time.sleep(0.05)
        subprocess.run([sys.executable, "-c", script, str(replacement), card_id], check=True, timeout=60)

    thread = threading.Thread(target=replace, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("mode", ["poke", "deferrable"])
def test_completed_after_passes_over_an_earlier_read_and_takes_the_next(dags_module, datatables_conn, tmp_path, mode):
    (dag,) = [d for d in dags_in(install(AFTER_DAGS)) if d.dag_id == f"dt_sensor_after_{mode}"]
    card_id = imported(datatables_conn, tmp_path)
    # The run's data interval ends a second after the table's last read: that read is "yesterday's".
    interval_end = _read_at(datatables_conn, card_id) + timedelta(seconds=1)
    replacer = _replace_once_watched(datatables_conn, card_id, tmp_path, interval_end + timedelta(seconds=1))
    dag_run = dag.test(run_conf={"card_id": card_id}, logical_date=interval_end, run_after=interval_end)
    replacer.join(30)
    assert state(dag_run, "wait") == "success"
    summary = xcom(dag_run, "wait")
    assert summary["Rows"] == 7, "the sensor returned the earlier read, not the one after data_interval_end"
    assert datetime.fromisoformat(summary["UploadCompletionTime"]).replace(tzinfo=UTC) > interval_end


def test_completed_after_that_reads_the_clock_holds_the_instant_the_wait_began(
    dags_module, datatables_conn, tmp_path, capfd
):
    """Issue 37, point 5: each resume rendered ``utcnow()`` again, so the read just seen was "before" it."""
    (dag,) = [d for d in dags_in(install(AFTER_DAGS)) if d.dag_id == "dt_sensor_since_now"]
    card_id = imported(datatables_conn, tmp_path)
    # Replaced once the sensor has deferred (its instant rendered before) and a second has passed.
    deferred = tmp_path / "deferred"
    replacer = _replace_once_watched(
        datatables_conn, card_id, tmp_path, datetime.now(UTC) + timedelta(seconds=1), waiting=deferred
    )
    dag_run = dag.test(run_conf={"card_id": card_id, "deferred_flag": str(deferred)})
    replacer.join(30)
    out = capfd.readouterr().out
    assert state(dag_run, "wait") == "success", out[-3000:]
    assert xcom(dag_run, "wait")["Rows"] == 7  # the replacement's read, the one after the instant
    # While the table was idle, the trigger said what it waited for, not that the table was being read.
    assert f"table {card_id} has not finished a read after" in out
    assert f"table {card_id} is still being read; next look" not in out.split("has not finished a read after")[0]


def test_a_deadline_with_an_instant_says_no_read_finished_after_it(datatables_conn, tmp_path):
    card_id = imported(datatables_conn, tmp_path)
    after = (_read_at(datatables_conn, card_id) + timedelta(seconds=1)).isoformat()
    with pytest.raises(Exception, match=rf"no read of table {card_id} finished after .* by the deadline"):
        run_sensor(card_id, True, completed_after=after, timeout=1)


@pytest.mark.parametrize("deferrable", [False, True], ids=["poke", "deferrable"])
def test_completed_after_a_read_that_already_happened_does_not_return_it(datatables_conn, tmp_path, deferrable):
    card_id = imported(datatables_conn, tmp_path)
    after = (_read_at(datatables_conn, card_id) + timedelta(seconds=1)).isoformat()
    with pytest.raises(Exception, match="(?i)timed out|deadline"):
        run_sensor(card_id, deferrable, completed_after=after, timeout=1)


def test_completed_after_that_is_no_date_time_fails_naming_the_parameter(datatables_conn):
    with pytest.raises(AirflowFailException, match=r"completed_after='tomorrow' is not a date-time.*ISO 8601"):
        run_sensor("CRD-00000000-0000-4000-8000-000000000001", False, completed_after="tomorrow")


def test_an_instant_reads_as_the_service_writes_its_times():
    from airflow_tables.model import service_time

    assert service_time("2026-11-26T07:00:00.900+02:00") == "2026-11-26T05:00:00"
    assert service_time(datetime(2026, 11, 26, 7, 0, 1)) == "2026-11-26T07:00:01"  # naive: UTC
    assert service_time("2026-11-26 07:00:00+00:00") == "2026-11-26T07:00:00"  # str() of a pendulum DateTime


def test_a_read_seen_in_progress_that_ends_before_a_future_completed_after_is_waited_past(datatables_conn, tmp_path):
    datatables_conn.set_processing_delay(0.5)
    card_id = imported(datatables_conn, tmp_path)  # being read now, done well before the instant
    after = (datetime.now(UTC) + timedelta(seconds=5)).isoformat()
    sensor = DataTablesProcessedSensor(
        task_id="wait", card_id=card_id, deferrable=True, poke_interval=0.1, timeout=30, completed_after=after
    )
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    first = deferred.value
    event = asyncio.run(_first_event(first.trigger))
    assert event.payload["status"] == "ready"  # the trigger saw the read in progress, then done
    # ...but it ended before the instant: the sensor waits on. Resumed as the task runner resumes
    # it (the event beside the deferral's kwargs), it keeps the deadline it began with (issue 37,
    # point 5: each re-deferral had a fresh timeout), and the instant.
    with pytest.raises(TaskDeferred) as deferred:
        sensor.resume_execution(first.method_name, {**(first.kwargs or {}), "event": event.payload}, {})
    again = deferred.value
    assert (again.trigger.deadline, again.kwargs) == (first.trigger.deadline, first.kwargs)
    assert again.trigger.replaced_after == first.trigger.replaced_after
    # Resumed with the event alone (Airflow 3.2's dag.test() drops the kwargs): the event carries them.
    with pytest.raises(TaskDeferred) as deferred:
        sensor.resume_execution(first.method_name, {"event": event.payload}, {})
    assert (deferred.value.trigger.deadline, deferred.value.kwargs) == (first.trigger.deadline, first.kwargs)
    older = {k: v for k, v in event.payload.items() if k not in ("replaced_after", "deadline")}
    with pytest.raises(TaskDeferred):  # a wait deferred by the previous release: neither, waits on too
        sensor.resume_execution(first.method_name, {"event": older}, {})
