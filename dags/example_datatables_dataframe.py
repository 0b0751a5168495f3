"""Build a pandas DataFrame in a task, check it with a Great Expectations suite, import it.

The suite (data/orders_suite.json) is checked before any request: data that breaks it
costs nothing. pandas and Great Expectations are imported inside the tasks, never when
Airflow parses this file.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG, task

from airflow_tables.operators.tables import DataTablesImportOperator

SUITE = Path(__file__).parent / "data" / "orders_suite.json"

# [START howto_datatables_dataframe]
with DAG(
    dag_id="example_datatables_dataframe",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["example", "datatables"],
    doc_md=__doc__,
) as dag:

    @task
    def build_orders() -> str:
        """Aggregate orders by region with pandas and write them where the import can read them.

        The service names the table after the file, so the file keeps one readable name
        (``orders_by_region``) and each run writes it in a directory of its own.
        """
        import tempfile

        import pandas as pd

        orders = pd.read_csv(Path(__file__).parent / "data" / "orders.csv")
        orders["amount"] = orders["quantity"] * orders["unit_price"] * (1 - orders["discount"] / 100)
        by_region = orders.groupby("region", as_index=False).agg(
            orders=("order_id", "count"), quantity=("quantity", "sum"), amount=("amount", "sum")
        )
        path = Path(tempfile.mkdtemp(prefix="datatables-example-")) / "orders_by_region.csv"
        by_region.round(2).to_csv(path, index=False)
        return str(path)

    DataTablesImportOperator(
        task_id="import_orders_by_region",
        file_path=build_orders(),
        expectations=str(SUITE),
        deferrable=True,
        poll_interval=2,
    )
# [END howto_datatables_dataframe]
