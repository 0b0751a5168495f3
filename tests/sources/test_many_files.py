"""The many-files example DAG in a real run: every CSV under an S3 prefix becomes a table, one mapped task each."""

from __future__ import annotations

import importlib.util
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

from tests.operators._runs import xcom_all
from tests.sources.conftest import CONN_ID

EXAMPLE = Path(__file__).resolve().parents[2] / "dags" / "example_datatables_many_files.py"


def test_every_csv_under_the_prefix_becomes_its_own_table(dags_module, datatables_conn, s3_server, bucket, monkeypatch):
    emulator = datatables_conn
    for name in ("north.csv", "south.csv", "2026/east.CSV"):
        s3_server.put(bucket, f"exports/{name}", b"region,amount\nx,1\ny,2\n")
    s3_server.put(bucket, "exports/readme.txt", b"not a table")
    monkeypatch.setenv("DATATABLES_POLL_INTERVAL", "0.2")
    target = Path(os.environ["AIRFLOW_HOME"]) / "dags" / EXAMPLE.name  # dag.test() runs DAGs from the dags folder
    shutil.copy(EXAMPLE, target)
    spec = importlib.util.spec_from_file_location("example_datatables_many_files", target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    emulator.reset_stats()

    now = datetime.now(timezone.utc)
    dag_run = module.dag.test(
        run_conf={"prefix": f"s3://{CONN_ID}@{bucket}/exports/", "encoding": None}, logical_date=now, run_after=now
    )

    card_ids = xcom_all(dag_run, "import_file")
    assert sorted(card_ids) == [0, 1, 2]  # one mapped task per CSV, the text file left alone
    assert {ti.state for ti in dag_run.get_task_instances() if ti.task_id == "import_file"} == {"success"}
    tables = {c["CardID"]: c for c in emulator.list_cards()}
    assert sorted(tables[card]["CardName"] for card in card_ids.values()) == ["east", "north", "south"]
    assert all(tables[card]["Rows"] == 2 for card in card_ids.values())
    assert emulator.stats()["imports_accepted"] == 3
