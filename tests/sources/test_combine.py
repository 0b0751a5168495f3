"""Many files, one table: a folder of .csv.gz parts, an S3 prefix, a list; headers matched; errors name the part.

Through DAG runs against the emulator (and moto's S3): one upload, one credit, the header once,
every part's rows in order. The refusals (a header that differs, a bad row, no part at all) send
nothing.
"""

from __future__ import annotations

import gzip
from datetime import UTC, datetime
from pathlib import Path

import pytest
from tests._dag_files import install
from tests.operators._runs import state, xcom
from tests.sources.conftest import CONN_ID

from airflow_tables.exceptions import CsvValidationError
from airflow_tables.sources import open_source
from airflow_tables.sources.parts import names_many, open_parts
from airflow_tables.validation.combine import combined

DAG_FILE = Path(__file__).with_name("dag_combine.py")
HEADER = b"order_id,region,amount\n"


def rows(start: int, count: int) -> bytes:
    return b"".join(b"%d,north,%d\n" % (i, i * 3) for i in range(start, start + count))


def run(**params):
    dag = install(DAG_FILE).combine
    when = datetime.now(UTC)
    return dag.test(run_conf=params, logical_date=when, run_after=when)


def sent_once(emulator, credits_before: int) -> None:
    assert emulator.stats()["imports_accepted"] == 1 and credits_before - emulator.credits() == 1


def test_a_days_folder_of_gzip_parts_is_one_table(dags_module, datatables_conn, tmp_path):
    day = tmp_path / "2026-11-29"
    day.mkdir()
    for n in range(3):
        (day / f"part-{n:03d}.csv.gz").write_bytes(gzip.compress(HEADER + rows(n * 100, 100)))
    (day / "_SUCCESS").write_bytes(b"")  # not a part: the pattern does not match it
    datatables_conn.reset_stats()
    credits = datatables_conn.credits()

    dag_run = run(parts=str(day / "part-*.csv.gz"))

    assert state(dag_run, "combined") == "success"
    card_id = xcom(dag_run, "combined")
    assert datatables_conn.received_bytes(card_id) == HEADER + rows(0, 300)
    sent_once(datatables_conn, credits)


def test_an_s3_prefix_is_one_table_in_key_order(dags_module, datatables_conn, s3_server, bucket):
    for n in (2, 0, 1):
        s3_server.put(bucket, f"exports/day/part-{n}.csv", HEADER + rows(n * 10, 10))

    dag_run = run(parts=f"s3://{CONN_ID}@{bucket}/exports/day/")

    assert state(dag_run, "combined") == "success"
    assert datatables_conn.received_bytes(xcom(dag_run, "combined")) == HEADER + rows(0, 30)


def test_a_list_of_parts_in_its_order_and_by_name_in_any_column_order(dags_module, datatables_conn, tmp_path):
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    first.write_bytes(HEADER + rows(0, 2))
    second.write_bytes(b"amount,order_id,region\n" + b"9,7,south\n")

    dag_run = run(parts=[str(first), str(first)], by_name=[str(first), str(second)])

    assert state(dag_run, "combined") == "success" and state(dag_run, "by_name") == "success"
    assert datatables_conn.received_bytes(xcom(dag_run, "combined")) == HEADER + rows(0, 2) + rows(0, 2)
    assert datatables_conn.received_bytes(xcom(dag_run, "by_name")) == HEADER + rows(0, 2) + b"7,south,9\n"


def test_a_combined_import_whose_answer_is_lost_is_adopted_by_the_retry_not_sent_again(
    dags_module, datatables_conn, tmp_path
):
    """The one combined file is sent once: its retry finds the table the lost answer made (one credit)."""
    for n in range(3):
        (tmp_path / f"part-{n}.csv").write_bytes(HEADER + rows(n * 10, 10))
    datatables_conn.reset_stats()
    credits = datatables_conn.credits()
    datatables_conn.set_faults([{"methods": ["POST"], "path": "/data/import", "drop": "after", "times": 1}])

    dag_run = run(retried=str(tmp_path / "part-*.csv"))

    ti = dag_run.get_task_instance("retried")
    assert str(ti.state) == "success" and ti.try_number == 2
    sent_once(datatables_conn, credits)
    assert datatables_conn.received_bytes(xcom(dag_run, "retried")) == HEADER + rows(0, 30)


def test_a_part_whose_header_differs_is_refused_naming_it_and_nothing_is_sent(dags_module, datatables_conn, tmp_path):
    (tmp_path / "p1.csv").write_bytes(HEADER + rows(0, 2))
    (tmp_path / "p2.csv").write_bytes(b"order_id,amount,region\n1,2,north\n")
    datatables_conn.reset_stats()

    with pytest.raises(CsvValidationError) as info, combined(open_parts(str(tmp_path / "p*.csv")), "o.csv", "t"):
        pass
    dag_run = run(parts=str(tmp_path / "p*.csv"))

    message = str(info.value)
    assert "p2.csv" in message and "is not the first part's" in message and "same order" in message, message
    assert state(dag_run, "combined") == "failed"
    assert datatables_conn.stats()["imports_accepted"] == 0


def test_a_bad_row_is_named_by_its_part_and_its_line_in_it(tmp_path):
    (tmp_path / "p1.csv").write_bytes(HEADER + rows(0, 5))
    (tmp_path / "p2.csv").write_bytes(HEADER + rows(5, 3) + b"8,south\n")

    with pytest.raises(CsvValidationError) as info, combined(open_parts(str(tmp_path / "p*.csv")), "o.csv", "t"):
        pass

    assert info.value.path.endswith("p2.csv") and [p.line for p in info.value.problems] == [5]


def test_no_part_at_all_is_refused(tmp_path):
    with pytest.raises(OSError, match="names no file; an empty list of parts is refused"):
        open_parts(str(tmp_path / "*.csv"))
    with pytest.raises(OSError, match="names no file"):
        open_parts([])


def test_a_pattern_without_combine_is_refused_and_combine_needs_a_table_name(tmp_path):
    from airflow_tables.operators._checks import arguments_problem
    from airflow_tables.operators.tables import DataTablesImportOperator

    assert names_many(str(tmp_path / "*.csv")) and names_many("s3://c@b/day/") and not names_many("a.csv")
    problem = arguments_problem(str(tmp_path / "*.csv"), None, False, None, 1.0, 10.0)
    assert problem is not None and "pass combine=True" in problem
    assert arguments_problem(str(tmp_path / "*.csv"), None, False, "t", 1.0, 10.0, combine=True) is None
    with pytest.raises(ValueError, match="combine needs a table_name"):
        DataTablesImportOperator(task_id="t", file_path="x/*.csv", combine=True)
    with pytest.raises(ValueError, match="combine must be False, True or 'by_name'"):
        DataTablesImportOperator(task_id="t", file_path="x/*.csv", combine="yes", table_name="t")


def test_the_parts_together_are_held_to_the_limit_before_anything_is_written(tmp_path, monkeypatch):
    import airflow_tables.validation.rules as rules

    (tmp_path / "p1.csv").write_bytes(HEADER + rows(0, 40))
    (tmp_path / "p2.csv").write_bytes(HEADER + rows(40, 40))
    monkeypatch.setattr(rules, "MAX_BYTES", (tmp_path / "p1.csv").stat().st_size + 100)
    parts = open_parts(str(tmp_path / "p*.csv"))
    with pytest.raises(CsvValidationError, match="the file is"), combined(parts, "o.csv", "t"):
        pass
    assert open_source(tmp_path / "p1.csv").stored_size < rules.MAX_BYTES


def test_an_error_in_a_later_part_is_said_at_that_parts_own_line_across_line_endings(tmp_path):
    (tmp_path / "p1.csv").write_bytes(HEADER + rows(0, 4))
    (tmp_path / "p2.csv").write_bytes((HEADER + rows(4, 3)).replace(b"\n", b"\r\n"))
    (tmp_path / "p3.csv").write_bytes(HEADER + rows(7, 1) + b"8,south,1,extra\n" + rows(9, 1))

    with pytest.raises(CsvValidationError) as info, combined(open_parts(str(tmp_path / "p*.csv")), "o.csv", "t"):
        pass

    assert info.value.path.endswith("p3.csv") and [p.line for p in info.value.problems] == [3]


def test_a_part_in_another_separator_is_refused_naming_its_header(tmp_path):
    (tmp_path / "p1.csv").write_bytes(HEADER + rows(0, 4))
    (tmp_path / "p2.csv").write_bytes(b"order_id;region;amount\n1;north;3\n")

    parts = open_parts(str(tmp_path / "p*.csv"))
    with (
        pytest.raises(CsvValidationError, match=r"\['order_id;region;amount'\] is not the first part's"),
        combined(parts, "o.csv", "t"),
    ):
        pass


def test_a_file_whose_name_holds_a_bracket_is_still_one_file_without_combine(tmp_path):
    from airflow_tables.operators._checks import arguments_problem

    literal = tmp_path / "orders[1].csv"
    literal.write_bytes(HEADER + rows(0, 1))

    assert arguments_problem(str(literal), None, False, None, 1.0, 10.0) is None
    missing = arguments_problem(str(tmp_path / "orders[2].csv"), None, False, None, 1.0, 10.0)
    assert missing is not None and "pass combine=True" in missing


def test_an_object_whose_key_holds_a_star_is_one_file_without_combine(dags_module, datatables_conn, s3_server, bucket):
    """Object storage allows ``*`` in a key: without ``combine``, a key that exists as it is names that one object."""
    s3_server.put(bucket, "exports/orders-*.csv", HEADER + rows(0, 5))
    s3_server.put(bucket, "exports/orders-1.csv", HEADER + rows(100, 5))  # what the pattern would match
    datatables_conn.reset_stats()
    credits = datatables_conn.credits()

    dag_run = run(one=f"s3://{CONN_ID}@{bucket}/exports/orders-*.csv")

    assert state(dag_run, "one") == "success"
    assert datatables_conn.received_bytes(xcom(dag_run, "one")) == HEADER + rows(0, 5)
    sent_once(datatables_conn, credits)


def test_a_pattern_key_that_names_no_object_is_refused_saying_combine(dags_module, datatables_conn, s3_server, bucket):
    """Without ``combine``, a pattern that is no object's key is refused before any request, saying what to do."""
    s3_server.put(bucket, "exports/orders-1.csv", HEADER + rows(100, 5))
    datatables_conn.reset_stats()

    from airflow_tables.operators._checks import arguments_problem

    pattern = f"s3://{CONN_ID}@{bucket}/exports/orders-?.csv"
    dag_run = run(one=pattern)

    assert state(dag_run, "one") == "failed"
    assert datatables_conn.stats()["imports_accepted"] == 0
    said = arguments_problem(pattern, None, False, "orders_one", 1.0, 10.0)
    assert said is not None and "pass combine=True" in said


def test_a_pattern_key_the_storage_cannot_be_asked_about_says_why(s3_server, monkeypatch):
    """Storage that does not answer: the refusal says the pattern, and why no object could be looked up."""
    import json
    import socket

    from airflow_tables.operators._checks import arguments_problem

    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    conn = s3_server.connection()
    conn["extra"] = {**conn["extra"], "endpoint_url": f"http://127.0.0.1:{port}"}
    monkeypatch.setenv("AIRFLOW_CONN_AWS_UNREACHABLE", json.dumps(conn))  # its own: file systems are cached by it

    said = arguments_problem("s3://aws_unreachable@landing/exports/orders-*.csv", None, False, "t", 1.0, 10.0)

    assert said is not None and "pass combine=True" in said
    assert "whether an object is named exactly so could not be asked" in said
    assert conn["password"] not in said
