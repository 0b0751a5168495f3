"""The transfer's OpenLineage events through the real provider (issue 43): the tables its query reads, its table."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

DAG_FILE = Path(__file__).with_name("dag_transfer_lineage.py")


def test_a_transfer_reports_the_tables_its_query_reads_and_the_table_it_makes(
    dags_module, datatables_conn, pg, tmp_path
):
    table = pg.table()
    pg.run(f"CREATE TABLE {table} (id integer, name text)", f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b'), (3, NULL)")
    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(DAG_FILE, dags / DAG_FILE.name)
    events = tmp_path / "events.jsonl"
    env = {
        **os.environ,
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(events), "append": True}),
        "DT_TRANSFER_TABLE": table,
    }
    airflow = str(Path(sys.executable).with_name("airflow"))
    done = subprocess.run(
        [airflow, "dags", "test", "dt_transfer_lineage"], env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    emitted = [json.loads(line) for line in events.read_text(encoding="utf-8").splitlines()]
    transfer = [e for e in emitted if e["job"]["name"] == "dt_transfer_lineage.transfer"]
    assert [e["eventType"] for e in transfer] == ["START", "COMPLETE"]
    assert transfer[0]["inputs"] == []  # the query's tables are known once it has run: no file is named

    complete = transfer[-1]
    source = f"postgres://127.0.0.1:{pg.server.port}"
    assert [(d["namespace"], d["name"]) for d in complete["inputs"]] == [(source, f"transfers.public.{table}")]
    (made,) = complete["outputs"]
    card_id = made["name"].split("/", 1)[1]
    held = datatables_conn.request(
        "GET", f"/v1.0/projects/{datatables_conn.project_id}/cards/{card_id}", key=datatables_conn.api_key
    )[1]
    assert held["CardName"].startswith("lineage_transfer")
    assert made["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "CREATE"
    assert made["outputFacets"]["outputStatistics"]["rowCount"] == held["Rows"] == 3
    assert [(f["name"], f["type"]) for f in made["facets"]["schema"]["fields"]] == [
        (c["ColumnName"], c["DataType"]) for c in held["Columns"]
    ]
