"""The many-files example DAG in a real run: every CSV under an S3 prefix becomes a table, one mapped task each."""

from __future__ import annotations

import importlib.util
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

try:  # the Task SDK's own from Airflow 3.2; 3.1 raises airflow.exceptions' class
    from airflow.sdk.exceptions import ParamValidationError
except ImportError:  # Airflow 3.1
    from airflow.exceptions import ParamValidationError  # type: ignore[no-redef]
from tests.operators._runs import xcom_all
from tests.sources.conftest import CONN_ID

EXAMPLE = Path(__file__).resolve().parents[2] / "dags" / "example_datatables_many_files.py"


def _example(monkeypatch, landing: str):
    """The example DAG, parsed with ``landing`` as its landing prefix (DATATABLES_LANDING_PREFIX)."""
    monkeypatch.setenv("DATATABLES_POLL_INTERVAL", "0.2")
    monkeypatch.setenv("DATATABLES_LANDING_PREFIX", landing)
    target = Path(os.environ["AIRFLOW_HOME"]) / "dags" / EXAMPLE.name  # dag.test() runs DAGs from the dags folder
    shutil.copy(EXAMPLE, target)
    spec = importlib.util.spec_from_file_location("example_datatables_many_files", target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_csv_under_the_prefix_becomes_its_own_table(dags_module, datatables_conn, s3_server, bucket, monkeypatch):
    emulator = datatables_conn
    for name in ("north.csv", "south.csv", "2026/east.CSV"):
        s3_server.put(bucket, f"exports/{name}", b"region,amount\nx,1\ny,2\n")
    s3_server.put(bucket, "exports/readme.txt", b"not a table")
    module = _example(monkeypatch, f"s3://{CONN_ID}@{bucket}/exports/")
    emulator.reset_stats()

    now = datetime.now(UTC)
    dag_run = module.dag.test(
        run_conf={"prefix": f"s3://{CONN_ID}@{bucket}/exports/", "encoding": None}, logical_date=now, run_after=now
    )

    card_ids = xcom_all(dag_run, "import_file")  # each table named after its path below the prefix
    assert sorted(card_ids) == [0, 1, 2]  # one mapped task per CSV, the text file left alone
    assert {ti.state for ti in dag_run.get_task_instances() if ti.task_id == "import_file"} == {"success"}
    tables = {c["CardID"]: c for c in emulator.list_cards()}
    assert sorted(tables[card]["CardName"] for card in card_ids.values()) == ["2026.east", "north", "south"]
    assert all(tables[card]["Rows"] == 2 for card in card_ids.values())
    assert emulator.stats()["imports_accepted"] == 3


@pytest.mark.parametrize(
    "prefix",
    [
        "s3://aws_other@{bucket}/exports/",  # another connection
        "s3://{bucket}/exports/",  # no connection: the worker's own credentials
        "s3://{conn}@other-bucket/exports/",
        "s3://{conn}@{bucket}/exports/../private/",
        "s3://{conn}@{bucket}/exports-private/",
        "file:///etc/",
    ],
)
def test_the_trigger_form_cannot_name_another_connection_or_place(
    dags_module, datatables_conn, bucket, monkeypatch, prefix
):
    module = _example(monkeypatch, f"s3://{CONN_ID}@{bucket}/exports/")
    datatables_conn.reset_stats()
    now = datetime.now(UTC)
    # dag.test() of Airflow 3.2 raises a ValueError naming the param; 3.1 and 3.3 a ParamValidationError.
    with pytest.raises((ParamValidationError, ValueError), match="prefix"):
        module.dag.test(
            run_conf={"prefix": prefix.format(conn=CONN_ID, bucket=bucket)}, logical_date=now, run_after=now
        )
    assert datatables_conn.stats()["requests"] == []
