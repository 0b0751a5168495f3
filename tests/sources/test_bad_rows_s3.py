"""Bad rows of an object in storage: read once, the good rows sent, the rejects put beside it (a real S3 server)."""

from __future__ import annotations

import csv
import io

from tests._dag_files import imported
from tests.operators._runs import run, state, xcom
from tests.sources.conftest import CONN_ID

GOOD = "order_id,region,amount\n" + "".join(f"{i},north,{i * 3}\n" for i in range(1, 50))
BAD = "50,south\n"  # one field short
NUL = "51,so\x00uth,3\n"


def test_an_objects_bad_rows_go_to_a_rejects_object_beside_it(dags_module, datatables_conn, s3_server, bucket):
    br_dags = imported("bad_rows_test_dags.py")
    key = "exports/day/orders.csv"
    s3_server.put(bucket, key, (GOOD + BAD + NUL).encode())

    dag_run = run(br_dags, "br_quarantine", file_path=f"s3://{CONN_ID}@{bucket}/{key}", rejects_path="")

    assert state(dag_run, "import") == "success"
    rejects_uri = f"s3://{CONN_ID}@{bucket}/exports/day/orders.rejects.csv"
    assert xcom(dag_run, "import", key="bad_rows") == {"count": 2, "rejects": rejects_uri}
    rejects = list(csv.DictReader(io.StringIO(s3_server.get(bucket, "exports/day/orders.rejects.csv").decode())))
    assert [(r["line"], r["byte_offset"], r["code"], r["record"]) for r in rejects] == [
        ("51", str(len(GOOD)), "field-count", "50,south"),
        ("52", str(len(GOOD + BAD)), "nul-byte", "51,so\\x00uth,3"),
    ]
    assert datatables_conn.received_bytes(xcom(dag_run, "import")) == GOOD.encode()
    assert s3_server.reads(bucket, key) == 1  # one read serves the sorting and the upload
    puts = s3_server.requests("PUT", f"/{bucket}/exports/day/orders.rejects.csv")
    assert len(puts) == 1  # written whole, once


def test_rejects_path_may_name_another_object(dags_module, datatables_conn, s3_server, bucket):
    br_dags = imported("bad_rows_test_dags.py")
    s3_server.put(bucket, "in/orders.csv", (GOOD + BAD).encode())
    target = f"s3://{CONN_ID}@{bucket}/rejects/2026-11-29/orders.csv"

    dag_run = run(br_dags, "br_quarantine", file_path=f"s3://{CONN_ID}@{bucket}/in/orders.csv", rejects_path=target)

    assert state(dag_run, "import") == "success"
    assert xcom(dag_run, "import", key="bad_rows") == {"count": 1, "rejects": target}
    assert b"50,south" in s3_server.get(bucket, "rejects/2026-11-29/orders.csv")
    assert s3_server.requests("PUT", f"/{bucket}/in/orders.rejects.csv") == []  # not beside the file
