"""Example DAGs run with dag.test() against the emulator, where what they make is worth checking."""

from __future__ import annotations

from pathlib import Path

from tests.dags._install import install_dag_file

DAGS = Path(__file__).resolve().parents[2] / "dags"


def test_the_dataframe_example_names_its_table_readably(dags_module, datatables_conn):
    (dag,) = install_dag_file(DAGS / "example_datatables_dataframe.py", DAGS / "data")
    dag_run = dag.test()
    card_id = dag_run.get_task_instance("import_orders_by_region").xcom_pull(task_ids="import_orders_by_region")
    assert str(dag_run.get_task_instance("import_orders_by_region").state) == "success"
    table = next(c for c in datatables_conn.list_cards(datatables_conn.project_id) if c["CardID"] == card_id)
    assert (table["CardName"], table["Rows"], table["SuccessfulUpload"]) == ("orders_by_region", 4, True)
