"""Files in object storage (a real S3 server on 127.0.0.1) through the validator, the hook and the operator."""

from __future__ import annotations

import json
import socket

import pytest
from tests.operators._runs import run, state, xcom
from tests.sources.conftest import CONN_ID, cut_off_import, received_bytes

from airflow_tables.sources import SourceError, SourceNotFoundError, open_source
from airflow_tables.validation import validate_csv

ORDERS = "order_id,region,amount,note\n" + "".join(f'{i},North,{i * 3},"a, b"\n' for i in range(1, 41))


@pytest.fixture
def orders(tmp_path, s3_server, bucket):
    """The same file on local disk and in the bucket, with every way of naming it."""
    data = ORDERS.encode()
    local = tmp_path / "orders.csv"
    local.write_bytes(data)
    s3_server.put(bucket, "landing/orders.csv", data)
    from airflow.sdk import ObjectStoragePath

    return {
        "local path": str(local),
        "file:// URI": local.as_uri(),
        "ObjectStoragePath": ObjectStoragePath(f"s3://{CONN_ID}@{bucket}/landing/orders.csv"),
        "s3:// URI": f"s3://{CONN_ID}@{bucket}/landing/orders.csv",
    }


def test_every_way_of_naming_a_file_gives_the_same_report_and_bytes(orders, hook, emulator):
    reports, received = {}, {}
    for way, file in orders.items():
        report = validate_csv(file).to_dict()
        assert report.pop("path") == str(file)
        reports[way] = report
        card_id = hook.import_csv(None, file)
        summary = emulator.wait_until_processed(emulator.project_id, card_id)
        assert (summary["CardName"], summary["Rows"]) == ("orders", 40)
        received[way] = received_bytes(emulator, card_id)
    assert reports["local path"]["ok"] and reports["local path"]["rows"] == 40
    assert all(r == reports["local path"] for r in reports.values()), reports
    assert all(data == ORDERS.encode() for data in received.values())


def test_a_plain_object_is_validated_as_it_streams_without_a_local_copy(orders, s3_server, bucket):
    report = validate_csv(orders["s3:// URI"])
    assert report.ok and (report.rows, report.size_bytes) == (40, len(ORDERS.encode()))
    assert s3_server.reads(bucket, "landing/orders.csv") == 1, "a plain object was read again to copy it"


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("ragged row", ORDERS + "41,South\n"),
        ("not UTF-8", ORDERS.replace("17,North", "17,N\udcffrth")),
        ("quote inside a field", ORDERS.replace("23,North", '23,No"rth')),
        ("blank lines", ORDERS.replace("\n30,", "\n\n\n30,")),
    ],
)
def test_an_object_with_problems_gets_the_report_of_the_same_local_file(tmp_path, s3_server, bucket, name, text):
    # The stream cannot be read again to name lines: the object is copied (a second GET) and the copy scanned exactly.
    data = text.encode("utf-8", errors="surrogateescape")
    local = tmp_path / "orders.csv"
    local.write_bytes(data)
    s3_server.put(bucket, "orders.csv", data)
    from_storage = validate_csv(f"s3://{CONN_ID}@{bucket}/orders.csv").to_dict()
    from_disk = validate_csv(local).to_dict()
    assert s3_server.reads(bucket, "orders.csv") == 2, name
    assert from_storage.pop("path") != from_disk.pop("path")
    assert from_storage == from_disk, name


def test_an_object_that_changes_size_while_validated_is_reported_unreadable(s3_server, bucket):
    s3_server.put(bucket, "moving.csv", ORDERS.encode())
    source = open_source(f"s3://{CONN_ID}@{bucket}/moving.csv")  # its size as listed
    s3_server.put(bucket, "moving.csv", (ORDERS + "41,South,1,x\n").encode())
    from airflow_tables.validation import validate_source

    (problem,) = validate_source(source).errors
    assert problem.code == "unreadable" and "changed size while it was read" in problem.message


@pytest.mark.parametrize("encoding", ["cp1252", "latin-1", "utf-16"])
def test_a_legacy_object_arrives_as_utf8(s3_server, bucket, hook, emulator, encoding):
    text = "name,city\nJürgen,Zürich\nAna,São Paulo\n"
    s3_server.put(bucket, "legacy.csv", text.encode(encoding))
    uri = f"s3://{CONN_ID}@{bucket}/legacy.csv"
    report = validate_csv(uri, encoding=encoding)
    assert report.ok and (report.columns, report.rows) == (["name", "city"], 2)
    card_id = hook.import_csv(None, uri, encoding=encoding)
    table = emulator.wait_until_processed(emulator.project_id, card_id)
    assert table["Rows"] == 2
    assert received_bytes(emulator, card_id) == text.encode()


def _no_request(emulator, call) -> BaseException:
    emulator.reset_stats()
    credits = emulator.credits()
    with pytest.raises(Exception) as info:  # noqa: PT011 - each caller checks what it got
        call()
    assert emulator.stats()["requests"] == []
    assert emulator.credits() == credits
    return info.value


def test_a_missing_object_fails_before_any_request(bucket, hook, emulator):
    uri = f"s3://{CONN_ID}@{bucket}/nope.csv"
    error = _no_request(emulator, lambda: hook.import_csv(None, uri))
    assert isinstance(error, SourceNotFoundError) and isinstance(error, FileNotFoundError)
    assert uri in str(error) and "nothing was sent" in str(error)
    (problem,) = validate_csv(uri).errors
    assert problem.code == "unreadable" and uri in problem.message


def test_a_missing_filesystem_names_the_provider_to_install(hook, emulator):
    error = _no_request(emulator, lambda: hook.import_csv(None, "gs://bucket/orders.csv"))
    assert isinstance(error, SourceError)
    assert "apache-airflow-providers-google" in str(error) and "nothing was sent" in str(error)


def test_a_storage_error_fails_before_any_request(monkeypatch, hook, emulator):
    with socket.socket() as probe:  # a port nothing listens on: the storage cannot be reached
        probe.bind(("127.0.0.1", 0))
        dead = probe.getsockname()[1]
    extra = {"endpoint_url": f"http://127.0.0.1:{dead}", "config_kwargs": {"retries": {"max_attempts": 1}}}
    conn = {"conn_type": "aws", "login": "k", "password": "s", "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEAD", json.dumps(conn))
    error = _no_request(emulator, lambda: hook.import_csv(None, "s3://aws_dead@bucket/orders.csv"))
    assert isinstance(error, SourceError) and "storage" in str(error) and "nothing was sent" in str(error)


def test_an_object_that_changes_size_while_sent_is_the_same_clear_error(s3_server, bucket, hook, emulator):
    s3_server.put(bucket, "moving.csv", ORDERS.encode())
    source = open_source(f"s3://{CONN_ID}@{bucket}/moving.csv")  # its size as listed
    s3_server.put(bucket, "moving.csv", (ORDERS + "41,South,1,x\n").encode())
    assert "changed size while it was being uploaded" in cut_off_import(hook, emulator, source)


def test_the_operator_imports_a_templated_s3_path(dags_module, datatables_conn, s3_server, bucket):
    emulator = datatables_conn
    s3_server.put(bucket, "daily/sales 2026.csv", ORDERS.encode())
    emulator.reset_stats()
    dag_run = run(dags_module, "dt_import_poke", file_path=f"s3://{CONN_ID}@{bucket}/daily/sales 2026.csv")
    assert state(dag_run, "import") == "success"
    card_id = xcom(dag_run, "import")
    table = next(c for c in emulator.list_cards() if c["CardID"] == card_id)
    assert (table["CardName"], table["Rows"]) == ("sales 2026", 40)
    assert received_bytes(emulator, card_id) == ORDERS.encode()
    assert emulator.stats()["imports_accepted"] == 1


def test_the_operator_fails_a_missing_object_at_no_cost(dags_module, datatables_conn, bucket):
    datatables_conn.reset_stats()
    credits = datatables_conn.credits()
    dag_run = run(dags_module, "dt_import_poke", file_path=f"s3://{CONN_ID}@{bucket}/missing.csv")
    assert state(dag_run, "import") == "failed"
    assert datatables_conn.stats()["requests"] == []
    assert datatables_conn.credits() == credits


def test_the_operator_converts_a_declared_encoding(dags_module, datatables_conn, s3_server, bucket):
    text = "name,city\nJürgen,Zürich\n"
    s3_server.put(bucket, "legacy.csv", text.encode("cp1252"))
    dag_run = run(dags_module, "dt_import_cp1252", file_path=f"s3://{CONN_ID}@{bucket}/legacy.csv")
    assert state(dag_run, "import") == "success"
    assert received_bytes(datatables_conn, xcom(dag_run, "import")) == text.encode()


def test_the_operator_refuses_a_legacy_object_without_encoding_at_no_cost(
    dags_module, datatables_conn, s3_server, bucket
):
    s3_server.put(bucket, "legacy.csv", "name,city\nJürgen,Zürich\n".encode("cp1252"))
    datatables_conn.reset_stats()
    dag_run = run(dags_module, "dt_import_poke", file_path=f"s3://{CONN_ID}@{bucket}/legacy.csv")
    assert state(dag_run, "import") == "failed"
    assert datatables_conn.stats()["requests"] == []


def test_import_dataframe_in_a_declared_encoding(hook, emulator):
    import pandas as pd

    frame = pd.DataFrame({"name": ["Jürgen", "Ana"], "city": ["Zürich", "São Paulo"]})
    card_id = hook.import_dataframe(None, frame, "people", encoding="cp1252")
    emulator.wait_until_processed(emulator.project_id, card_id)
    # Written as import_dataframe writes every frame (a Parquet file's rules), converted from cp1252 to UTF-8.
    expected = "name,city\nJürgen,Zürich\nAna,São Paulo\n"
    assert received_bytes(emulator, card_id) == expected.encode()
    emulator.reset_stats()
    with pytest.raises(ValueError, match="cp1252 cannot represent: 'Gdańsk'|cp1252 cannot represent: 'ń'"):
        hook.import_dataframe(None, pd.DataFrame({"city": ["Gdańsk"]}), "cities", encoding="cp1252")
    assert emulator.stats()["requests"] == []


def test_an_operator_with_an_unknown_encoding_fails_when_the_dag_is_parsed():
    from airflow_tables.operators.tables import DataTablesImportOperator

    with pytest.raises(ValueError, match="unknown encoding 'windows-1252x'"):
        DataTablesImportOperator(task_id="import", file_path="x.csv", encoding="windows-1252x")


def test_a_fifo_is_reported_as_not_a_regular_file(tmp_path):
    """A named pipe is neither missing nor a directory: the report says what it is, and nothing blocks on it."""
    import os

    fifo = tmp_path / "orders.csv"
    os.mkfifo(fifo)
    (problem,) = validate_csv(fifo).errors
    assert problem.code == "unreadable" and "not a regular file" in problem.message and str(fifo) in problem.message
    with pytest.raises(SourceError, match="not a regular file") as info:
        open_source(fifo)
    assert not isinstance(info.value, SourceNotFoundError)
