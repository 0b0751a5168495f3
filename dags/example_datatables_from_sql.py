"""Import a day's orders from PostgreSQL as a table: a query's result, streamed, checked, sent once.

``SqlToDataTablesOperator`` runs the query on any connection whose hook is a common.sql
``DbApiHook`` (here a ``postgres`` connection; MySQL, SQLite, Snowflake... alike), streams the
result into a local CSV by the Parquet conversion's rules (ISO 8601 times, ``true``/``false``,
numbers as written), then imports it as ``DataTablesImportOperator`` imports a file: validated,
sent once (a retry after a lost answer adopts the table, it never pays twice), waited for in the
triggerer. A day without orders skips the task instead of making an empty table
(``if_empty="skip"``). Needs ``pip install 'airflow-tables[sql]' apache-airflow-providers-postgres``.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_tables.transfers.sql_to_datatables import SqlToDataTablesOperator

SQL_CONN_ID = os.environ.get("DATATABLES_SQL_CONN_ID", "postgres_default")
POLL_INTERVAL = float(os.environ.get("DATATABLES_POLL_INTERVAL", "30"))

# [START howto_datatables_from_sql]
with DAG(
    dag_id="example_datatables_from_sql",
    schedule="@daily",
    start_date=datetime(2026, 11, 1),
    catchup=False,
    tags=["example", "datatables"],
    doc_md=__doc__,
) as dag:
    SqlToDataTablesOperator(
        task_id="orders_of_the_day",
        conn_id=SQL_CONN_ID,
        sql=(
            "SELECT order_id, region, amount, paid, ordered_at FROM orders "
            "WHERE ordered_at >= %(day)s::date AND ordered_at < %(day)s::date + 1 ORDER BY order_id"
        ),
        parameters={"day": "{{ ds }}"},
        table_name="orders_{{ ds_nodash }}",
        if_empty="skip",
        deferrable=True,
        poll_interval=POLL_INTERVAL,
        retries=2,
    )
# [END howto_datatables_from_sql]
