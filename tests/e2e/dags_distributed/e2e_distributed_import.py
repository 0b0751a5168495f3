"""The distributed run's DAG: the import operator mapped over every file, in two departments, deferrable, retried.

Everything that varies comes in through the run's conf: the files of each department
(paths or URIs, whatever the test's source made of them) and the departments' ids.
The second department's imports run on a task queue of their own, ``datatables-other``,
and so do their deferred waits (``[triggerer] queues_enabled``): the triggerer that
consumes that queue alone polls that department. Loaded by the distributed stack as its
DAGs folder, never from the repo's ``dags/``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, task

from airflow_tables.operators.tables import DataTablesImportOperator

POLL_INTERVAL = 3.0
OTHER_QUEUE = "datatables-other"
COMMON = {
    "deferrable": True,
    "poll_interval": POLL_INTERVAL,
    "timeout": 900,
    "retries": 4,
    "retry_delay": timedelta(seconds=1),
}

with DAG(
    dag_id="e2e_distributed_import",
    schedule=None,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_tasks=64,
    params={"test_files": [], "other_files": [], "test_project": "", "other_project": ""},
    tags=["e2e"],
):

    @task
    def files_of(department: str, params: dict | None = None) -> list[str]:
        return list((params or {})[f"{department}_files"])

    DataTablesImportOperator.partial(task_id="import_test", project_id="{{ params.test_project }}", **COMMON).expand(
        file_path=files_of.override(task_id="test_files")("test")
    )
    DataTablesImportOperator.partial(  # first into the triggerers' room (tests/e2e: CAPACITIES)
        task_id="import_other",
        project_id="{{ params.other_project }}",
        queue=OTHER_QUEUE,
        priority_weight=10,
        weight_rule="absolute",
        **COMMON,
    ).expand(file_path=files_of.override(task_id="other_files", queue=OTHER_QUEUE)("other"))
