"""DAGs the credit budget's tests run with dag.test(): an import that fails on a spent budget, one that waits.

The file and the department come in through params; the budget through ``[datatables] credit_budget``.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, task

from airflow_tables.operators.tables import DataTablesImportOperator

DAGS: dict[str, DAG] = {}


def _dag(dag_id: str) -> DAG:
    dag = DAGS[dag_id] = DAG(
        dag_id, schedule=None, start_date=datetime(2026, 1, 1), catchup=False, params={"file_path": ""}
    )
    return dag


with _dag("dt_budget_fail"):
    # Retries allowed: a spent budget must fail the task without using them.
    DataTablesImportOperator(
        task_id="import", file_path="{{ params.file_path }}", poll_interval=0.2, timeout=60, retries=2,
        retry_delay=timedelta(0),
    )  # fmt: skip

with _dag("dt_budget_wait"):
    DataTablesImportOperator(
        task_id="import", file_path="{{ params.file_path }}", on_budget_exhausted="wait", poll_interval=0.2, timeout=60
    )

with _dag("dt_budget_hook"):

    @task
    def import_in_a_task(params: dict | None = None) -> str:
        from airflow_tables.hooks.tables import DataTablesHook

        return DataTablesHook().import_csv(None, (params or {})["file_path"])

    import_in_a_task()
