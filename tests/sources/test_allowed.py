"""Where files may be read from: ``[datatables] allowed_sources`` and the operators' ``allowed_sources=``.

Every refusal happens in ``open_source``, before the storage or the service is asked
anything: these tests name files outside the allow-list in each way a path can escape
(a symlink, ``..``, a sibling directory whose name starts the same, a ``file://`` URI,
another connection in an ``s3://`` URI) and check that nothing was read or sent.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tests._dag_files import install
from tests.operators._runs import state, xcom
from tests.sources.conftest import CONN_ID

from airflow_tables.sources import SourceError, SourceNotAllowedError, open_source
from airflow_tables.sources.allowed import ENV, check, parse_prefixes, provider_directory
from airflow_tables.validation import validate_csv

CSV = b"region,amount\nnorth,1\nsouth,2\n"
DAG_FILE = Path(__file__).with_name("dag_allowed_sources.py")


@pytest.fixture
def landing(tmp_path, monkeypatch) -> Path:
    """An allowed directory (the provider setting) with one CSV, and files around it that must stay out of reach."""
    allowed = tmp_path / "in"
    allowed.mkdir()
    (allowed / "orders.csv").write_bytes(CSV)
    (tmp_path / "incoming").mkdir()  # a sibling whose name starts like the allowed one
    (tmp_path / "incoming" / "orders.csv").write_bytes(CSV)
    (tmp_path / "secret.csv").write_bytes(CSV)
    monkeypatch.setenv(ENV, str(allowed))
    return allowed


def _escapes(landing: Path) -> dict[str, str]:
    (landing / "link.csv").symlink_to(landing.parent / "secret.csv")
    (landing / "linked-dir").symlink_to(landing.parent / "incoming")
    return {
        "symlink to a file outside": str(landing / "link.csv"),
        "symlink to a directory outside": str(landing / "linked-dir" / "orders.csv"),
        "'..' out of the allowed directory": f"{landing}/../secret.csv",
        "a sibling directory sharing the prefix": str(landing.parent / "incoming" / "orders.csv"),
        "file:///etc/passwd": "file:///etc/passwd",
        "a file:// URI with '..'": f"file://{landing}/../secret.csv",
    }


def test_every_way_out_of_an_allowed_directory_is_refused(landing):
    for way, file in _escapes(landing).items():
        with pytest.raises(SourceNotAllowedError) as info:
            open_source(file)
        message = str(info.value)
        assert file in message and str(landing) in message, way
        assert "[datatables] allowed_sources" in message, way
        assert isinstance(info.value, PermissionError) and isinstance(info.value, SourceError)
        (problem,) = validate_csv(file).errors
        assert problem.code == "unreadable" and "not an allowed source" in problem.message, way


def test_files_inside_the_allowed_directory_are_read(landing):
    (landing / "sub").mkdir()
    (landing / "sub" / "more.csv").write_bytes(CSV)
    (landing / "inner-link.csv").symlink_to(landing / "sub" / "more.csv")  # a symlink that stays inside
    for file in (landing / "orders.csv", f"{landing}/sub/../orders.csv", landing / "inner-link.csv"):
        assert validate_csv(file).ok, file
    assert open_source((landing / "orders.csv").as_uri()).stored_size == len(CSV)


def test_nothing_is_sent_for_a_refused_file(landing, hook, emulator):
    emulator.reset_stats()
    credits = emulator.credits()
    for file in _escapes(landing).values():
        with pytest.raises(SourceNotAllowedError, match="nothing was sent"):
            hook.import_csv(None, file)
    assert emulator.stats()["requests"] == []
    assert emulator.credits() == credits


def test_an_empty_setting_allows_any_readable_file(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    (tmp_path / "anywhere.csv").write_bytes(CSV)
    assert validate_csv(tmp_path / "anywhere.csv").ok


def test_s3_prefixes_name_the_connection_the_bucket_and_the_key(s3_server, bucket, monkeypatch):
    s3_server.put(bucket, "incoming/orders.csv", CSV)
    s3_server.put(bucket, "incoming-old/orders.csv", CSV)
    monkeypatch.setenv(ENV, f"/nonexistent-local-dir, s3://{CONN_ID}@{bucket}/incoming/")
    assert validate_csv(f"s3://{CONN_ID}@{bucket}/incoming/orders.csv").ok
    from airflow.sdk import ObjectStoragePath

    assert open_source(ObjectStoragePath(f"s3://{CONN_ID}@{bucket}/incoming/orders.csv")).stored_size == len(CSV)
    refused = {
        # No such connection exists: a refusal that looked it up would say so instead.
        "another connection": f"s3://aws_elsewhere@{bucket}/incoming/orders.csv",
        "no connection (the worker's own credentials)": f"s3://{bucket}/incoming/orders.csv",
        "another bucket": f"s3://{CONN_ID}@other-{bucket}/incoming/orders.csv",
        "a sibling key prefix": f"s3://{CONN_ID}@{bucket}/incoming-old/orders.csv",
        "'..' in the key": f"s3://{CONN_ID}@{bucket}/incoming/../secret.csv",
        "an encoded '..'": f"s3://{CONN_ID}@{bucket}/incoming/%2E%2E/secret.csv",
        "an encoded '/../'": f"s3://{CONN_ID}@{bucket}/incoming/a%2F..%2F..%2Fsecret.csv",
        "another scheme": f"gs://{CONN_ID}@{bucket}/incoming/orders.csv",
    }
    for way, uri in refused.items():
        with pytest.raises(SourceNotAllowedError) as info:
            open_source(uri)
        assert uri in str(info.value) and f"s3://{CONN_ID}@{bucket}/incoming/" in str(info.value), way
    with pytest.raises(SourceNotAllowedError):
        open_source(ObjectStoragePath(f"s3://{CONN_ID}@{bucket}/incoming-old/orders.csv"))


def test_a_folder_to_list_is_checked_like_a_file(landing, monkeypatch):
    # What the many-files example does before listing a prefix it was given.
    check(f"{landing}/sub/", allowed=[str(landing)])
    check(f"file://{landing}/sub/")
    for outside in (f"{landing}/../", f"file://{landing}/../incoming/", "file://localhost/etc/", landing.parent):
        with pytest.raises(SourceNotAllowedError):
            check(outside)
    monkeypatch.setenv(ENV, "s3://aws_default@landing/exports/")
    check("s3://aws_default@landing/exports/2026/")
    with pytest.raises(SourceNotAllowedError, match="the task's allowed_sources"):
        check("s3://aws_default@landing/exports/2026/", allowed=["s3://aws_default@landing/exports/2025/"])
    with pytest.raises(SourceNotAllowedError, match="'..'"):
        check("s3://aws_default@landing/exports/../private/")


def test_the_argument_narrows_the_setting(landing):
    (landing / "a").mkdir()
    (landing / "a" / "x.csv").write_bytes(CSV)
    (landing / "b").mkdir()
    (landing / "b" / "y.csv").write_bytes(CSV)
    assert open_source(landing / "a" / "x.csv", allowed=[str(landing / "a")]).stored_size == len(CSV)
    with pytest.raises(SourceNotAllowedError, match="the task's allowed_sources"):
        open_source(landing / "b" / "y.csv", allowed=[str(landing / "a")])
    # The argument cannot widen what the deployment allows.
    with pytest.raises(SourceNotAllowedError, match=r"\[datatables\] allowed_sources"):
        open_source(landing.parent / "secret.csv", allowed=[str(landing.parent)])


def test_a_provider_directory_is_readable_only_inside_its_block(landing, tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    (own / "frame.csv").write_bytes(CSV)
    with provider_directory(str(own)):
        assert validate_csv(own / "frame.csv").ok
    with pytest.raises(SourceNotAllowedError):
        open_source(own / "frame.csv")


def test_import_dataframe_works_under_an_allow_list(landing, hook, emulator):
    import pandas as pd

    card_id = hook.import_dataframe(None, pd.DataFrame({"a": [1, 2]}), "frame")
    assert emulator.wait_until_processed(emulator.project_id, card_id)["Rows"] == 2


@pytest.mark.parametrize(
    ("entries", "wrong"),
    [
        ("data/incoming", "not an absolute directory"),
        ("s3://aws_default@landing/../secret/", "'..'"),
        ("https://example.com/x", None),  # any scheme can be listed
    ],
)
def test_a_bad_prefix_is_refused_naming_the_setting(entries, wrong):
    if wrong is None:
        assert parse_prefixes(entries, "[datatables] allowed_sources")
        return
    with pytest.raises(ValueError, match=r"\[datatables\] allowed_sources") as info:
        parse_prefixes(entries, "[datatables] allowed_sources")
    assert wrong in str(info.value)


def test_the_validate_command_reads_the_setting_without_importing_airflow(landing):
    # `airflow-tables validate` starts in milliseconds: the setting comes from the environment.
    code = (
        "import sys\n"
        "from airflow_tables.validation import validate_csv\n"
        f"report = validate_csv({str(landing.parent / 'secret.csv')!r})\n"
        "assert 'airflow' not in sys.modules, 'Airflow was imported'\n"
        "print(report.errors[0].message)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "not an allowed source" in done.stdout


def _allowed_dag(monkeypatch, allowed: str):
    """The DAG of dag_allowed_sources.py, parsed with ``allowed`` as its operators' allowed_sources."""
    monkeypatch.setenv("DATATABLES_TEST_ALLOWED", allowed)
    return install(DAG_FILE).dag


def test_the_operator_refuses_a_file_outside_its_allowed_sources_at_no_cost(
    dags_module, datatables_conn, tmp_path, monkeypatch
):
    monkeypatch.delenv(ENV, raising=False)
    allowed = tmp_path / "in"
    allowed.mkdir()
    (allowed / "orders.csv").write_bytes(CSV)
    (tmp_path / "secret.csv").write_bytes(CSV)
    dag = _allowed_dag(monkeypatch, str(allowed))
    emulator = datatables_conn
    emulator.reset_stats()
    credits = emulator.credits()
    when = datetime.now(UTC)
    refused = dag.test(run_conf={"file_path": f"{allowed}/../secret.csv"}, logical_date=when, run_after=when)
    for task_id in ("import", "replace"):
        assert state(refused, task_id) == "failed"
        assert refused.get_task_instance(task_id).try_number == 1  # retries=2, none used: it cannot change
    assert emulator.stats()["requests"] == []
    assert emulator.credits() == credits

    when += timedelta(seconds=1)
    allowed_run = dag.test(run_conf={"file_path": str(allowed / "orders.csv")}, logical_date=when, run_after=when)
    assert state(allowed_run, "import") == "success"
    assert xcom(allowed_run, "import")


@pytest.mark.parametrize(("allowed", "wrong"), [("data/in", "not an absolute directory"), ([], "names no prefix")])
def test_an_operator_with_a_bad_allowed_sources_fails_when_the_dag_is_parsed(allowed, wrong):
    from airflow_tables.operators.tables import DataTablesReplaceOperator

    with pytest.raises(ValueError, match=wrong):
        DataTablesReplaceOperator(task_id="replace", card_id="CRD-x", file_path="x.csv", allowed_sources=allowed)
