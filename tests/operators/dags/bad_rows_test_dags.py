"""DAGs of the bad-row tests (tests/operators/test_bad_rows.py): ``on_bad_rows``, thresholds, ``column_types``.

What varies is not templated (the policy, the thresholds, the declaration), so each variant is a
DAG of its own; ``params.file_path``, ``params.card_id`` and ``params.rejects_path`` are. Every task
may retry once, at once: a refusal must not be retried, and a retry here would show.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, task

from airflow_tables.hooks.tables import DataTablesHook
from airflow_tables.operators.tables import DataTablesImportOperator, DataTablesReplaceOperator

START = datetime(2026, 1, 1)
RUN = {"poll_interval": 0.2, "timeout": 60, "retries": 1, "retry_delay": timedelta(0)}
PARAMS = {"file_path": "", "card_id": "", "rejects_path": ""}
LONG_ID = {"order_id": "long"}

DAGS: dict[str, DAG] = {}

IMPORTS = {
    "br_quarantine": {"on_bad_rows": "quarantine"},
    "br_quarantine_declared": {"on_bad_rows": "quarantine", "column_types": LONG_ID},
    "br_max_rows": {"on_bad_rows": "quarantine", "max_bad_rows": 1},
    "br_max_fraction": {"on_bad_rows": "quarantine", "max_bad_fraction": 0.1},
    "br_fail_declared": {"column_types": LONG_ID},
    # Row-wise expectations set their unexpected rows aside; an aggregate one that fails refuses the file.
    "br_quarantine_gx": {
        "on_bad_rows": "quarantine",
        "expectations": {
            "name": "orders_rows",
            "expectations": [
                {"type": "expect_column_values_to_be_between", "kwargs": {"column": "amount", "min_value": 0}},
                {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "region"}},
            ],
        },
    },
    "br_quarantine_gx_aggregate": {
        "on_bad_rows": "quarantine",
        "expectations": {
            "name": "orders_unique",
            "expectations": [{"type": "expect_column_values_to_be_unique", "kwargs": {"column": "region"}}],
        },
    },
}
for dag_id, knobs in IMPORTS.items():
    with DAG(dag_id, schedule=None, start_date=START, catchup=False, params=PARAMS) as dag:
        DataTablesImportOperator(
            task_id="import",
            file_path="{{ params.file_path }}",
            rejects_path="{{ params.rejects_path }}",
            **knobs,
            **RUN,
        )
    DAGS[dag_id] = dag

REPLACES = {
    "br_replace_declared": {"on_bad_rows": "quarantine", "column_types": LONG_ID},
    "br_replace_undeclared": {"on_bad_rows": "quarantine"},
    "br_replace_max_rows": {"on_bad_rows": "quarantine", "max_bad_rows": 0},
}
for dag_id, knobs in REPLACES.items():
    with DAG(dag_id, schedule=None, start_date=START, catchup=False, params=PARAMS) as dag:
        DataTablesReplaceOperator(
            task_id="replace",
            card_id="{{ params.card_id }}",
            file_path="{{ params.file_path }}",
            if_older="replace",
            **knobs,
            **RUN,
        )
    DAGS[dag_id] = dag

with DAG("br_hook_in_task", schedule=None, start_date=START, catchup=False, params=PARAMS) as dag:

    @task(retries=1, retry_delay=timedelta(0))
    def import_good_rows(params=None) -> str:
        """The hook in a @task: the same quarantine, sent once across tries."""
        return DataTablesHook().import_csv(None, params["file_path"], on_bad_rows="quarantine")

    import_good_rows()
DAGS["br_hook_in_task"] = dag
