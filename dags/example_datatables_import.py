"""Validate a CSV, import it as a new table, wait (deferred) until it is read, and log what the service made of it.

Connection ``datatables_default`` (conn type ``datatables``): host = the service's base URL,
password = the API key, extra ``project_id`` = the department. See docs/connection.md.
"""

from __future__ import annotations

import sys
from datetime import datetime, timedelta
from pathlib import Path

from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG, task

from airflow_tables.operators.tables import DataTablesImportOperator

ORDERS = Path(__file__).parent / "data" / "orders.csv"

# [START howto_datatables_import]
with DAG(
    dag_id="example_datatables_import",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["example", "datatables"],
    doc_md=__doc__,
) as dag:
    # The same report as `airflow-tables validate` on a laptop, in the task log.
    validate = BashOperator(
        task_id="validate_csv",
        bash_command=f"{sys.executable} -m airflow_tables.cli validate {ORDERS}",
    )

    # [START howto_operator_datatables_import]
    # Validates again (free, local), imports once (one credit), waits in the triggerer.
    import_orders = DataTablesImportOperator(
        task_id="import_orders",
        file_path=str(ORDERS),
        deferrable=True,
        poll_interval=2,
        timeout=600,
        retries=2,  # a retry waits on the table the first try imported, never imports again
        retry_delay=timedelta(seconds=20),
    )
    # [END howto_operator_datatables_import]

    @task
    def describe_table(card_id: str) -> dict:
        """Log the description and columns the service wrote when it read the file."""
        from airflow_tables.hooks.tables import DataTablesHook

        table = DataTablesHook().get_card(None, card_id)
        print(f"{table['CardName']} ({card_id}): {table['Rows']} rows")
        print(table.get("Description", ""))
        for column in table.get("Columns", []):
            print(f"  {column['ColumnName']:<16} {column['DataType']:<7} {column['ColumnDescription']}")
        return {"CardID": card_id, "Rows": table["Rows"], "Columns": len(table.get("Columns", []))}

    validate >> import_orders
    describe_table(import_orders.output)  # type: ignore[arg-type]  # an XComArg: the CardID at run time
# [END howto_datatables_import]
