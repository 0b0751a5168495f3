"""DAGs of the expectations tests (tests/operators/test_expectations.py): one per form of ``expectations=``.

The suites check the orders files of the operator tests (order_id, region, amount, note):
amounts are whole numbers, so ``amount`` is a ``long`` column and compares as numbers.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import great_expectations as gx
from airflow.sdk import DAG

from airflow_tables.operators.tables import DataTablesImportOperator

FAST = {"poll_interval": 0.2, "timeout": 60}
# A failed suite must not be retried: this retry would run at once if it were.
RETRY = {"retries": 1, "retry_delay": timedelta(0)}
ORDERS = {
    "name": "orders_dict",
    "expectations": [
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "amount", "min_value": 0}},
        {"type": "expect_column_values_to_be_in_set", "kwargs": {"column": "region", "value_set": ["North", "South"]}},
    ],
}
SUITE = gx.ExpectationSuite(
    name="orders_object",
    expectations=[
        gx.expectations.ExpectColumnValuesToNotBeNull(column="order_id"),
        gx.expectations.ExpectColumnValuesToBeBetween(column="amount", min_value=0, max_value=1000),
    ],
)
JSON_SUITE = str(Path(__file__).parent / "orders_suite.json")


def configure_expectations(context):
    """The official GX provider's shape: build the suite on the context the task is given."""
    return context.suites.add(
        gx.ExpectationSuite(
            name="orders_callable",
            expectations=[
                gx.expectations.ExpectTableColumnsToMatchOrderedList(
                    column_list=["order_id", "region", "amount", "note"]
                ),
                gx.expectations.ExpectTableRowCountToBeBetween(min_value=1, max_value=100),
                gx.expectations.ExpectColumnValuesToNotBeNull(column="order_id"),
                gx.expectations.ExpectColumnValuesToBeBetween(column="amount", min_value=0, max_value=1000),
                gx.expectations.ExpectColumnValuesToBeInSet(column="region", value_set=["North", "South"]),
            ],
        )
    )


def missing_column(context):
    return [gx.expectations.ExpectColumnValuesToNotBeNull(column="amount_usd")]


def raises(context):
    """A suite GX cannot evaluate: the regex does not compile, so the expectation raises (it does not fail)."""
    return [
        gx.expectations.ExpectColumnValuesToMatchRegex(column="region", regex="(["),
        gx.expectations.ExpectColumnValuesToBeBetween(column="amount", min_value=0),
    ]


FORMS = {
    "callable": configure_expectations,
    "dict": ORDERS,
    "json": JSON_SUITE,
    "suite": SUITE,
    "missing_column": missing_column,
    "raises": raises,
}
DAGS: dict[str, DAG] = {}

for form, expectations in FORMS.items():
    with DAG(
        f"dt_gx_{form}", schedule=None, start_date=datetime(2026, 1, 1), catchup=False, params={"file_path": ""}
    ) as dag:
        DataTablesImportOperator(
            task_id="import", file_path="{{ params.file_path }}", expectations=expectations, **FAST, **RETRY
        )
    DAGS[dag.dag_id] = dag
