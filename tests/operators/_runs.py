"""Helpers for reading what a dag.test() run did."""

from __future__ import annotations

import csv
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def run(dags_module, dag_id: str, logical_date: datetime | None = None, **params: Any):
    """Run one of the test DAGs with dag.test(); return the DagRun."""
    dag = dags_module.DAGS[dag_id]
    when = logical_date or datetime.now(UTC)
    # The run id comes from run_after: the same date twice means the same run (and task state store).
    return dag.test(run_conf=params, logical_date=when, run_after=when)


def state(dag_run, task_id: str) -> str:
    return str(dag_run.get_task_instance(task_id).state)


def xcom(dag_run, task_id: str, key: str = "return_value") -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    query = XComModel.get_many(run_id=dag_run.run_id, dag_ids=dag_run.dag_id, task_ids=task_id, key=key)
    with create_session() as session:
        row = session.scalars(query).first()
        return None if row is None else XComModel.deserialize_value(row)


def xcom_all(dag_run, task_id: str, key: str = "return_value") -> dict[int, Any]:
    """Every map index's XCom of a mapped task."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    query = XComModel.get_many(run_id=dag_run.run_id, dag_ids=dag_run.dag_id, task_ids=task_id, key=key)
    with create_session() as session:
        return {row.map_index: XComModel.deserialize_value(row) for row in session.scalars(query)}


def retry_task(dags_module, dag_id: str, run_id: str, task_id: str):
    """Give a task whose worker died its next try, as the scheduler does, and run it as dag.test() does.

    dag.test() cannot do this itself: it deletes and re-creates a run it is given again,
    and the task state store with it.
    """

    def retry(ti, session) -> None:
        ti.prepare_db_for_next_try(session)

    return _next_try(dags_module, dag_id, run_id, task_id, retry)


def clear_and_run(dags_module, dag_id: str, run_id: str, task_id: str):
    """Clear a finished task through Airflow's own ``clear_task_instances`` (what the UI and the REST API
    call), then run the try the scheduler gives a cleared task, as dag.test() does."""
    from airflow.models.taskinstance import clear_task_instances

    def clear(ti, session) -> None:
        from airflow.utils import timezone
        from airflow.utils.state import DagRunState

        clear_task_instances([ti], session)
        dag_run = ti.get_dagrun(session=session)
        dag_run.state = DagRunState.RUNNING  # the scheduler starts the queued run again
        dag_run.start_date = dag_run.start_date or timezone.utcnow()
        session.commit()

    return _next_try(dags_module, dag_id, run_id, task_id, clear)


def _next_try(dags_module, dag_id: str, run_id: str, task_id: str, prepare):
    """``prepare(ti, session)``, then the next try number and its run; return the DagRun as it then is."""
    from airflow.models.dagrun import DagRun
    from airflow.sdk.definitions.dag import _run_task
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState
    from sqlalchemy import select

    with create_session() as session:
        dag_run = session.scalar(select(DagRun).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id))
        ti = dag_run.get_task_instance(task_id, session=session)
        tried = ti.try_number
        prepare(ti, session)
        ti = dag_run.get_task_instance(task_id, session=session)
        if ti.try_number == tried:  # below Airflow 3.4 the scheduler counts the next try when it schedules it;
            ti.try_number += 1  # 3.4's prepare_db_for_next_try counts it itself (a successor row)
        ti.state = TaskInstanceState.SCHEDULED
        session.commit()
        session.refresh(ti)
        _run_task(ti=ti, task=dags_module.DAGS[dag_id].task_dict[task_id], run_triggerer=True)
    with create_session() as session:
        dag_run = session.scalar(select(DagRun).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id))
        session.expunge_all()
        return dag_run


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


class release_after_the_next_look(threading.Thread):  # noqa: N801 - reads as what it does where it is started
    """End the table's reading once the service has answered the next request to it (the retry's first look).

    The first try is dead by then, so the next answer the service gives is the retry's look at
    a table still being read: from then on the reading may end, and the retry sees it end.
    """

    def __init__(self, emulator, timeout: float = 240) -> None:
        super().__init__(daemon=True)
        self.emulator, self.timeout, self.released = emulator, timeout, False
        self.seen = len(emulator.stats()["requests"])
        self.start()

    def run(self) -> None:
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if any(entry["status"] is not None for entry in self.emulator.stats()["requests"][self.seen :]):
                self.emulator.set_processing_delay(0.0)
                self.released = True
                return
            time.sleep(0.1)
