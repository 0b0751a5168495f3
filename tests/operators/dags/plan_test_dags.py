"""DAGs of the dry-run and plan tests (tests/operators/test_dry_run.py, tests/test_planning.py).

Everything variable comes in through params. ``dry_run`` is not templated, so each DAG a dry
run is tested on has a twin of the same name with ``_dry`` appended, which is the same DAG
with ``dry_run=True``: the twin says what the DAG would do, the DAG then does it.

``pl_outcomes`` holds one task per decision a plan can report (create, replace, skip, refuse,
delete), each on its own table, so one plan and one run of it compare them all. Its tasks are
independent: a refused task fails alone and the others still run.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, Asset, task

from airflow_tables.operators.tables import (
    DataTablesDeleteOperator,
    DataTablesImportOperator,
    DataTablesReplaceOperator,
)

START = datetime(2026, 1, 1)
# Every task may retry once, at once: a refusal must not be retried, and a retry here would show.
RUN = {"poll_interval": 0.2, "timeout": 60, "retries": 1, "retry_delay": timedelta(0)}
#: A user's own static outlet on the import: a dry run records no event on it either.
ORDERS_ASSET = Asset(name="plan_test_orders", uri="file:///plan-test/orders.csv")
#: The two files a literal ``expand`` maps over, under ``params.dir``.
MAPPED = ["{{ params.dir }}/a.csv", "{{ params.dir }}/b.csv"]
OUTCOME_PARAMS = (
    "new",
    "other_project",
    "replace_card",
    "replace_file",
    "unchanged_card",
    "unchanged_file",
    "held_card",
    "held_file",
    "bad_file",
    "schema_card",
    "schema_file",
    "delete_card",
    "gone_card",
    "locked_card",
    "dir",
)

DAGS: dict[str, DAG] = {}


def _dag(dag_id: str, *params: str) -> DAG:
    dag = DAGS[dag_id] = DAG(
        dag_id,
        schedule=None,
        start_date=START,
        catchup=False,
        params=dict.fromkeys(("file_path", "card_id", *params), ""),
    )
    return dag


for _suffix, _dry in (("", False), ("_dry", True)):
    with _dag(f"pl_import{_suffix}"):
        DataTablesImportOperator(
            task_id="import", file_path="{{ params.file_path }}", outlets=[ORDERS_ASSET], dry_run=_dry, **RUN
        )
    with _dag(f"pl_replace{_suffix}"):
        DataTablesReplaceOperator(
            task_id="replace",
            card_id="{{ params.card_id }}",
            file_path="{{ params.file_path }}",
            skip_if_unchanged=True,
            dry_run=_dry,
            **RUN,
        )
    with _dag(f"pl_delete{_suffix}"):
        DataTablesDeleteOperator(task_id="delete", card_id="{{ params.card_id }}", poll_interval=0.2, dry_run=_dry)
    with _dag(f"pl_mapped{_suffix}", "dir"):
        DataTablesImportOperator.partial(task_id="import", dry_run=_dry, **RUN).expand(file_path=MAPPED)
    # The task is called "replace": tests/operators/test_schema_change.py's responder answers its form.
    with _dag(f"pl_approve{_suffix}"):
        DataTablesReplaceOperator(
            task_id="replace",
            card_id="{{ params.card_id }}",
            file_path="{{ params.file_path }}",
            on_schema_change="approve",
            if_older="replace",
            dry_run=_dry,
            **RUN,
        )

# One task per outcome, each on its own table (see the module's docstring).
with _dag("pl_outcomes", *OUTCOME_PARAMS):
    _ANY_DATE = {"if_older": "replace"}  # only the task "older" is held back by the run's logical date
    DataTablesImportOperator(task_id="create", file_path="{{ params.new }}", table_name="orders_{{ ds_nodash }}", **RUN)
    DataTablesImportOperator(
        task_id="create_other", file_path="{{ params.new }}", project_id="{{ params.other_project }}", **RUN
    )
    DataTablesReplaceOperator(
        task_id="replace",
        card_id="{{ params.replace_card }}",
        file_path="{{ params.replace_file }}",
        **_ANY_DATE,
        **RUN,
    )
    DataTablesReplaceOperator(
        task_id="unchanged",
        card_id="{{ params.unchanged_card }}",
        file_path="{{ params.unchanged_file }}",
        skip_if_unchanged=True,
        **_ANY_DATE,
        **RUN,
    )
    DataTablesReplaceOperator(
        task_id="older", card_id="{{ params.held_card }}", file_path="{{ params.held_file }}", if_older="skip", **RUN
    )
    DataTablesImportOperator(task_id="invalid", file_path="{{ params.bad_file }}", **RUN)
    DataTablesReplaceOperator(
        task_id="schema",
        card_id="{{ params.schema_card }}",
        file_path="{{ params.schema_file }}",
        on_schema_change="fail",
        **_ANY_DATE,
        **RUN,
    )
    DataTablesImportOperator(
        task_id="quarantine",
        file_path="{{ params.bad_file }}",
        table_name="orders_good",
        on_bad_rows="quarantine",
        **RUN,
    )
    DataTablesDeleteOperator(task_id="delete", card_id="{{ params.delete_card }}", poll_interval=0.2)
    DataTablesDeleteOperator(task_id="delete_gone", card_id="{{ params.gone_card }}", missing_ok=False)
    DataTablesDeleteOperator(task_id="delete_locked", card_id="{{ params.locked_card }}", if_locked="fail")
    DataTablesDeleteOperator(task_id="delete_locked_skip", card_id="{{ params.locked_card }}", if_locked="skip")
    DataTablesImportOperator.partial(task_id="mapped", **RUN).expand(file_path=MAPPED)

# What only the run learns: a mapping over an upstream task's result, a template pulling its XCom.
with _dag("pl_upstream", "dir"):

    @task
    def listed(params: dict | None = None) -> list[str]:
        return [f"{params['dir']}/a.csv", f"{params['dir']}/b.csv"]

    @task
    def where(params: dict | None = None) -> str:
        return params["file_path"]

    DataTablesImportOperator.partial(task_id="mapped", **RUN).expand(file_path=listed())
    where() >> DataTablesImportOperator(
        task_id="pulled", file_path="{{ ti.xcom_pull(task_ids='where') }}", table_name="pulled", **RUN
    )
