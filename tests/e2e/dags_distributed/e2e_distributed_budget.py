"""The distributed stack's budget DAG: one import per file, mapped, into a department with a small credit budget.

The department and the files come in through the run's conf; the budget is the stack's
``[datatables] credit_budget`` (tests/e2e/test_distributed_e2e.py). The mapped instances run on
both Celery workers at once, each claiming its credit through the api-server.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, task

from airflow_tables.operators.tables import DataTablesImportOperator

with DAG(
    dag_id="e2e_distributed_budget",
    schedule=None,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_tasks=16,
    params={"files": [], "project": ""},
    tags=["e2e"],
):

    @task
    def budget_files(params: dict | None = None) -> list[str]:
        return list((params or {})["files"])

    DataTablesImportOperator.partial(
        task_id="import_budget",
        project_id="{{ params.project }}",
        wait_for_completion=False,  # the claim and the send are under test, not the read
        retries=2,  # a spent budget must not use them
        retry_delay=timedelta(seconds=1),
    ).expand(file_path=budget_files())
