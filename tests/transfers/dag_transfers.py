"""DAGs the transfer's tests run with dag.test(); the query, connection and table come in through params.

Arguments that are not templated (``if_empty``, retries, the wait's timeout) get one DAG per variant.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_tables.transfers.sql_to_datatables import SqlToDataTablesOperator

FAST = {"poll_interval": 0.2, "timeout": 60, "retries": 0, "retry_delay": timedelta(0)}
DAGS: dict[str, DAG] = {}


def _dag(dag_id: str) -> DAG:
    params = {"sql": "", "table_name": "", "card_id": "", "word": ""}
    # Native rendering: an empty table_name renders None (the task's id names the table), not "None".
    dag = DAGS[dag_id] = DAG(
        dag_id,
        schedule=None,
        start_date=datetime(2026, 1, 1),
        catchup=False,
        params=params,
        render_template_as_native_obj=True,
    )
    return dag


def _transfer(conn_id: str, **kwargs) -> SqlToDataTablesOperator:
    return SqlToDataTablesOperator(
        task_id="transfer",
        sql="{{ params.sql }}",
        conn_id=conn_id,
        table_name="{{ params.table_name or None }}",
        **kwargs,
    )


for conn_id in ("transfer_pg", "transfer_sqlite"):
    db = conn_id.removeprefix("transfer_")
    for if_empty in ("fail", "skip", "import"):
        with _dag(f"sql_{db}_{if_empty}"):
            _transfer(conn_id, if_empty=if_empty, **FAST)

with _dag("sql_pg_replace"):
    SqlToDataTablesOperator(
        task_id="transfer", sql="{{ params.sql }}", conn_id="transfer_pg", card_id="{{ params.card_id }}", **FAST
    )

# One retry at once; the first try's wait gives up after 1.5 s (the emulator reads for longer).
with _dag("sql_pg_retry"):
    _transfer("transfer_pg", poll_interval=0.2, timeout=1.5, retries=1, retry_delay=timedelta(0))

with _dag("sql_pg_parameters"):
    SqlToDataTablesOperator(
        task_id="transfer",
        sql="SELECT n, %(word)s AS word FROM generate_series(1, %(rows)s) AS n",
        conn_id="transfer_pg",
        parameters={"word": "{{ params.word }}", "rows": 3},
        table_name="{{ params.table_name }}",
        **FAST,
    )

with _dag("sql_not_sql"):
    _transfer("datatables_default", **FAST)
