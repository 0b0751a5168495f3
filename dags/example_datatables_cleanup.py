"""Delete the tables of a department whose name matches a pattern, one mapped task per table.

Tables locked by an active connection are skipped (with the reason in the log), tables
being read are waited for, and a table deleted meanwhile is fine.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, Param, task

from airflow_tables.operators.tables import DataTablesDeleteOperator

# [START howto_datatables_cleanup]
with DAG(
    dag_id="example_datatables_cleanup",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["example", "datatables"],
    params={"pattern": Param("orders*", type="string", description="fnmatch pattern on CardName")},
    doc_md=__doc__,
) as dag:

    @task
    def tables_to_delete(params: dict | None = None) -> list[str]:
        """The CardIDs of the department's tables whose CardName matches the pattern."""
        from fnmatch import fnmatch

        from airflow_tables.hooks.tables import DataTablesHook

        pattern = (params or {}).get("pattern", "orders*")
        cards = DataTablesHook().list_cards(None)
        matched = [card["CardID"] for card in cards if fnmatch(card.get("CardName") or "", pattern)]
        print(f"{len(matched)} of {len(cards)} tables match {pattern!r}")
        return matched

    # [START howto_operator_datatables_delete]
    DataTablesDeleteOperator.partial(
        task_id="delete_table",
        if_locked="skip",
        if_processing="wait",
        missing_ok=True,
    ).expand(card_id=tables_to_delete())
    # [END howto_operator_datatables_delete]
# [END howto_datatables_cleanup]
