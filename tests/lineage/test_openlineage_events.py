"""OpenLineage events through the real provider, as a platform team runs it (issue 43).

`airflow dags test` runs tests/lineage/dags/datatables_lineage.py (import, a deferred replace of
an object in S3 (moto), the sensor, delete, an import validation refuses) with the OpenLineage provider's file transport
and its default settings: the facet methods run in a child forked from the task's process, where
a lookup hangs. Then once more with ``execute_in_thread``. The events' datasets and facets are
checked against what the emulator holds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests._s3 import S3Server
from tests.operators._runs import import_table, orders_csv

DAG_FILE = Path(__file__).parent / "dags" / "datatables_lineage.py"
TASKS = ("import", "replace", "wait", "delete", "refused", "checked", "quarantined", "combined", "rehearsed")


@pytest.fixture(scope="module")
def landing():
    """An S3 server with a bucket ``landing``: the replace reads its file from there."""
    with S3Server() as s3:
        s3.create_bucket("landing")
        yield s3


def _run_dag(tmp_path: Path, mode: str, drop: str, s3: S3Server) -> tuple[list[dict], str, dict[str, Path]]:
    """Run the DAG once under ``mode`` ("fork": the provider's default, or "thread"); its events, log and files.

    ``drop``: the CardID of the table its delete task deletes.
    """
    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(DAG_FILE, dags / DAG_FILE.name)
    files = {
        "first": orders_csv(tmp_path, name="orders.csv", rows=20),
        "next": orders_csv(tmp_path, name="orders_next.csv", rows=7),
        "bad": tmp_path / "bad.csv",
        "ragged": tmp_path / "ragged.csv",
    }
    files["ragged"].write_text("id,name\n1,a\n2,b,extra\n3,c\n", encoding="utf-8")
    files["bad"].write_text("id,name\n1,a,extra\n", encoding="utf-8")
    s3.upload("landing", f"exports/{mode}/orders_next.csv", files["next"])
    events = tmp_path / "events.jsonl"
    env = {
        **os.environ,
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(events), "append": True}),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "lineage-test",
        "DT_LINEAGE_FILE": str(files["first"]),
        "DT_LINEAGE_NEXT_FILE": f"s3://aws_lineage@landing/exports/{mode}/orders_next.csv",
        "DT_LINEAGE_BAD_FILE": str(files["bad"]),
        "DT_LINEAGE_RAGGED_FILE": str(files["ragged"]),
        "DT_LINEAGE_DROP_CARD": drop,
        "DT_LINEAGE_ASSET_URI": f"datatables://LOCALHOST:{os.environ['DT_LINEAGE_PORT']}/P-1/CRD-1",
    }
    env.update([s3.connection_env("aws_lineage")])
    if mode == "thread":
        env["AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD"] = "True"
    airflow = str(Path(sys.executable).with_name("airflow"))
    done = subprocess.run(
        [airflow, "dags", "test", "dt_lineage"], env=env, capture_output=True, text=True, timeout=240, cwd=tmp_path
    )
    log = done.stdout + done.stderr
    lines = events.read_text(encoding="utf-8").splitlines() if events.exists() else []
    return [json.loads(line) for line in lines], log, files


def _by_task(events: list[dict]) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for event in events:
        dag, _, task = event["job"]["name"].partition(".")
        if dag == "dt_lineage" and task:
            found.setdefault(task, []).append(event)
    return found


def _datasets(event: dict, side: str) -> list[tuple[str, str]]:
    return [(d["namespace"], d["name"]) for d in event.get(side, [])]


def _schema(dataset: dict) -> list[tuple[str, str | None]]:
    return [(f["name"], f.get("type")) for f in dataset["facets"]["schema"]["fields"]]


@pytest.mark.parametrize("mode", ["fork", "thread"])
def test_every_task_reports_its_datasets_and_facets_to_openlineage(
    dags_module, datatables_conn, landing, tmp_path, monkeypatch, mode
):
    project = datatables_conn.project_id
    drop = import_table(datatables_conn, orders_csv(tmp_path, name="to_drop.csv", rows=3))
    datatables_conn.wait_until_processed(project, drop)
    before = {c["CardID"] for c in datatables_conn.list_cards()}
    monkeypatch.setenv("DT_LINEAGE_PORT", datatables_conn.base_url.rsplit(":", 1)[1])
    events, log, files = _run_dag(tmp_path, mode, drop, landing)
    assert "expired" not in log, "the OpenLineage child hung and was killed: " + log[-3000:]
    assert datatables_conn.api_key not in json.dumps(events), "the API key is in a lineage event"
    tasks = _by_task(events)
    assert set(TASKS) <= tasks.keys(), (sorted(tasks), log[-3000:])
    for task in TASKS:
        kinds = [e["eventType"] for e in tasks[task]]
        assert kinds[0] == "START" and kinds.count("START") >= 1, (task, kinds)
        assert kinds[-1] == ("FAIL" if task == "refused" else "COMPLETE"), (task, kinds)

    made_here = {c["CardID"] for c in datatables_conn.list_cards()} - before - {drop}
    assert len(made_here) == 4  # import (then replaced), checked, quarantined, combined; the refused one made none
    card_id = tasks["import"][-1]["outputs"][0]["name"].split("/", 1)[1]
    assert card_id in made_here
    service = f"datatables://{datatables_conn.base_url.split('://', 1)[1]}"
    table = (service, f"{project}/{card_id}")
    held = datatables_conn.request("GET", f"/v1.0/projects/{project}/cards/{card_id}", key=datatables_conn.api_key)[1]
    held_columns = [(c["ColumnName"], c["DataType"]) for c in held["Columns"]]
    replace_start = tasks["replace"][0]

    # import: the file in (its schema, rows, size, validation's verdict), the new table out (read as sent).
    done = tasks["import"][-1]
    assert _datasets(tasks["import"][0], "inputs") == [("file", str(files["first"]))]
    assert _datasets(done, "inputs") == [("file", str(files["first"]))]
    assert _datasets(done, "outputs") == [table]
    source, made = done["inputs"][0], done["outputs"][0]
    assert [name for name, _ in _schema(source)] == ["order_id", "region", "amount", "note"]
    assert source["inputFacets"]["inputStatistics"] == {
        **source["inputFacets"]["inputStatistics"],
        "rowCount": 20,
        "size": files["first"].stat().st_size,
    }
    assertions = source["facets"]["dataQualityAssertions"]["assertions"]
    assert [(a["assertion"], a["success"]) for a in assertions] == [("datatables_csv_rules", True)]
    assert made["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "CREATE"
    assert made["outputFacets"]["outputStatistics"]["rowCount"] == 20
    assert _schema(made) == held_columns  # the first file's columns, typed alike
    assert made["outputFacets"]["outputStatistics"]["size"] == files["first"].stat().st_size

    # replace: the table is known before the send (START), overwritten with the next file's rows once read.
    assert _datasets(replace_start, "outputs") == [table]
    assert replace_start["outputs"][0]["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
    replaced = tasks["replace"][-1]
    # The object named as the Amazon provider and the naming spec name it: bucket namespace, key without "/".
    assert _datasets(replace_start, "inputs") == [("s3://landing", f"exports/{mode}/orders_next.csv")]
    assert _datasets(replaced, "inputs") == [("s3://landing", f"exports/{mode}/orders_next.csv")]
    assert replaced["inputs"][0]["inputFacets"]["inputStatistics"]["rowCount"] == 7  # kept across the deferral
    overwritten = replaced["outputs"][0]
    assert (overwritten["namespace"], overwritten["name"]) == table
    assert overwritten["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
    assert overwritten["outputFacets"]["outputStatistics"]["rowCount"] == held["Rows"] == 7
    assert _schema(overwritten) == held_columns  # as the service typed them

    # the sensor: the table in, with the rows its read showed; delete: the table dropped.
    waited = tasks["wait"][-1]
    assert _datasets(tasks["wait"][0], "inputs") == [table]
    assert _datasets(waited, "inputs") == [table]
    assert waited["inputs"][0]["inputFacets"]["inputStatistics"]["rowCount"] == 7
    gone = (service, f"{project}/{drop}")
    assert _datasets(tasks["delete"][0], "outputs") == [gone]
    dropped = tasks["delete"][-1]["outputs"][0]
    assert (dropped["namespace"], dropped["name"]) == gone
    assert dropped["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "DROP"
    assert drop not in {c["CardID"] for c in datatables_conn.list_cards()}

    # data quality: the suite's expectations, and the rows set aside, as assertions on the file.
    checked = tasks["checked"][-1]["inputs"][0]["facets"]["dataQualityAssertions"]["assertions"]
    assert [(a["assertion"], a["success"], a.get("column")) for a in checked] == [
        ("datatables_csv_rules", True, None),
        ("expect_column_values_to_not_be_null", True, "order_id"),
    ]
    quarantined = tasks["quarantined"][-1]
    ragged = quarantined["inputs"][0]["facets"]["dataQualityAssertions"]["assertions"]
    assert ("datatables_bad_rows_within_threshold", True, "1") in [
        (a["assertion"], a["success"], a["actual"]) for a in ragged
    ]
    assert quarantined["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 2  # the good rows sent

    # many files, one table: each part an input (here the same file twice), the one table out with all their rows.
    combined = tasks["combined"][-1]
    assert _datasets(combined, "inputs") == [("file", str(files["first"]))] * 2
    assert combined["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 40

    # a dry run: the file it read and judged, and no output at START or after (it wrote nothing).
    rehearsed = tasks["rehearsed"]
    assert [_datasets(e, "outputs") for e in rehearsed] == [[]] * len(rehearsed)
    assert _datasets(rehearsed[-1], "inputs") == [("file", str(files["first"]))]
    assert rehearsed[-1]["inputs"][0]["inputFacets"]["inputStatistics"]["rowCount"] == 20

    # a table's asset as a task's inlet, spelled by hand: the table's dataset, as the operators name it.
    assert _datasets(tasks["report_on_table"][-1], "inputs") == [(service, "P-1/CRD-1")]

    # the refused import: START and FAIL name the file; no table was made of it.
    failed = tasks["refused"][-1]
    assert _datasets(failed, "inputs") == [("file", str(files["bad"]))]
    assert _datasets(failed, "outputs") == []
    assert "bad.csv" in json.dumps(failed["run"]["facets"].get("errorMessage", {}))
