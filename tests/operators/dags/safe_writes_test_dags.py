"""DAGs of the schema-change and backfill tests (tests/operators/test_schema_change.py, test_backfill.py).

Each replaces ``params.card_id`` with ``params.file_path``; what varies is not templated
(``on_schema_change``, ``if_older``), so each variant is a DAG of its own. Every one may retry
once, at once: a refusal must not be retried, and a retry here would show.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_tables.operators.tables import DataTablesImportOperator, DataTablesReplaceOperator

START = datetime(2026, 1, 1)
RUN = {"poll_interval": 0.2, "timeout": 60, "retries": 1, "retry_delay": timedelta(0)}

DAGS: dict[str, DAG] = {}


def _dag(dag_id: str) -> DAG:
    dag = DAGS[dag_id] = DAG(
        dag_id, schedule=None, start_date=START, catchup=False, params={"file_path": "", "card_id": ""}
    )
    return dag


for policy in ("allow_new_columns", "fail", "allow", "approve"):
    with _dag(f"sw_schema_{policy}"):
        DataTablesReplaceOperator(
            task_id="replace",
            card_id="{{ params.card_id }}",
            file_path="{{ params.file_path }}",
            on_schema_change=policy,
            if_older="replace",
            **RUN,
        )

# The import operator given a card_id checks the same way.
with _dag("sw_schema_import_card"):
    DataTablesImportOperator(
        task_id="replace", card_id="{{ params.card_id }}", file_path="{{ params.file_path }}", if_older="replace", **RUN
    )

with _dag("sw_schema_approve_unanswered"):
    DataTablesReplaceOperator(
        task_id="replace",
        card_id="{{ params.card_id }}",
        file_path="{{ params.file_path }}",
        on_schema_change="approve",
        approval_timeout=1,
        **RUN,
    )

# Two DAGs feeding one table, with the default if_older="skip"; and the other two choices.
BACKFILLS = {"sw_backfill_a": "skip", "sw_backfill_b": "skip", "sw_backfill_fail": "fail"}
BACKFILLS["sw_backfill_replace"] = "replace"
for dag_id, if_older in BACKFILLS.items():
    with _dag(dag_id):
        DataTablesReplaceOperator(
            task_id="replace",
            card_id="{{ params.card_id }}",
            file_path="{{ params.file_path }}",
            if_older=if_older,
            **RUN,
        )
