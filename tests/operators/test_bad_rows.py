"""``on_bad_rows``, its thresholds and ``column_types`` in real DAG runs (dag.test()) against the emulator.

Each run's file is made here with its bad rows known, so what must be sent (the good rows, byte
for byte, header first) and what must be set aside (the rejects file, line by line) are written
down independently of the code under test, then compared with what the service stored and what
the task wrote.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from tests._dag_files import imported
from tests.operators._runs import import_table, imports_since, orders_csv, state, xcom
from tests.operators._runs import run as run_dag

HEADER = b"order_id,region,amount,note\n"
LOST = [{"methods": ["POST"], "path": "/data/import", "drop": "after", "times": 1}]  # handled, answer lost


@pytest.fixture(scope="module")
def br_dags(dags_module):
    """tests/operators/dags/bad_rows_test_dags.py, as installed in Airflow's dags folder by ``dags_module``."""
    return imported("bad_rows_test_dags.py")


@dataclass
class Messy:
    """A file with bad rows where the test put them: what the service must get, and what must be set aside."""

    path: Path
    good: bytearray = field(default_factory=lambda: bytearray(HEADER))
    rejects: list[dict[str, str]] = field(default_factory=list)
    good_rows: int = 0
    size: int = len(HEADER)
    line: int = 2

    def row(self, data: bytes, code: str | None = None, column: str = "", shown: str | None = None) -> None:
        if code is None:
            self.good += data
            self.good_rows += 1
        else:
            record = shown if shown is not None else data[:-1].decode("utf-8", "backslashreplace")
            where = {"line": str(self.line), "byte_offset": str(self.size)}
            self.rejects.append({**where, "code": code, "column": column, "record": record})
        self.size += len(data)
        self.line += data.count(b"\n")

    def write(self, rows: list[bytes]) -> Path:
        self.path.write_bytes(HEADER + b"".join(rows))
        return self.path


def messy_orders(tmp_path: Path, kinds: tuple[str, ...], rows: int = 20, name: str = "orders.csv") -> Messy:
    """``rows`` good orders with one bad row of each of ``kinds`` after every few good ones."""
    messy, written = Messy(tmp_path / name), []
    bad = {
        "field-count": (b"%d,North,5\n", ""),
        "nul-byte": (b"%d,No\x00rth,5,x\n", ""),
        "encoding": (b"%d,S\xe9ville,5,x\n", ""),
        "not-a-long": (b"N/A,North,%d,x\n", "order_id"),
        "record-too-long": (b'%d,North,5,"' + b"y" * (16 * 1024 * 1024 + 10) + b'"\n', ""),
    }
    kinds_left = list(kinds)
    for i in range(1, rows + 1):
        good = b"%d,%s,%d,%s\n" % (i, [b"North", b"South"][i % 2], 10 + i, b'"a, b"' if i % 3 else b"")
        messy.row(good)
        written.append(good)
        if kinds_left and i % 3 == 0:
            kind = kinds_left.pop(0)
            template, column = bad[kind]
            data = template % i
            shown = None
            if kind == "record-too-long":
                shown = data[:8192].decode() + f"... [cut: {len(data) - 1:,} bytes in all]"
            elif kind == "nul-byte":
                shown = data[:-1].decode().replace("\x00", "\\x00")
            messy.row(data, kind, column, shown)
            written.append(data)
    assert not kinds_left, "too few rows for every kind"
    messy.write(written)
    return messy


def run(dags, dag_id: str, **params):
    """Run one of the DAGs with every param given (a param left out keeps the value of the DAG's last run)."""
    return run_dag(dags, dag_id, **{"card_id": "", "rejects_path": "", **params})


def rejects_of(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == ["line", "byte_offset", "code", "message", "column", "record"]
        return [{k: v for k, v in row.items() if k != "message"} for row in reader]


def table(emulator, card_id: str) -> dict:
    return next(c for c in emulator.list_cards() if c["CardID"] == card_id)


def column_types(emulator, card_id: str) -> dict[str, str]:
    from airflow_tables.hooks.tables import DataTablesHook

    detail = DataTablesHook().get_card(emulator.project_id, card_id)
    return {c["ColumnName"]: c["DataType"] for c in detail["Columns"]}


def nothing_sent(emulator, before: dict) -> bool:
    return emulator.stats()["requests"] == [] and emulator.credits() == before["credits"]


# -- set aside, sent, reconciled -------------------------------------------------------------------------


def test_each_kind_of_bad_row_is_set_aside_and_the_good_rows_are_sent_as_they_were(
    br_dags, datatables_conn, stats, tmp_path
):
    emulator = datatables_conn
    kinds = ("field-count", "nul-byte", "encoding", "not-a-long", "record-too-long")
    messy = messy_orders(tmp_path, kinds)
    rejects = tmp_path / "out" / "set-aside.csv"
    rejects.parent.mkdir()

    dag_run = run(br_dags, "br_quarantine_declared", file_path=str(messy.path), rejects_path=str(rejects))

    assert state(dag_run, "import") == "success"
    card_id = xcom(dag_run, "import")
    assert xcom(dag_run, "import", key="bad_rows") == {"count": len(kinds), "rejects": str(rejects)}
    assert rejects_of(rejects) == messy.rejects
    assert emulator.received_bytes(card_id) == bytes(messy.good)  # byte for byte, header first
    read = emulator.wait_until_processed(emulator.project_id, card_id)
    assert read["Rows"] == messy.good_rows == 20  # the service's Rows are the rows sent (and reconciled)
    assert imports_since(emulator, stats) == 1 and stats["credits"] - emulator.credits() == 1
    assert list(tmp_path.joinpath("out").iterdir()) == [rejects]  # no temporary file left beside it


def test_the_rejects_go_beside_the_file_by_default_and_a_declared_long_column_stays_long(
    br_dags, datatables_conn, stats, tmp_path
):
    emulator = datatables_conn
    messy = messy_orders(tmp_path, ("not-a-long", "field-count"), name="daily.csv")

    dag_run = run(br_dags, "br_quarantine_declared", file_path=str(messy.path))

    assert state(dag_run, "import") == "success"
    beside = tmp_path / "daily.rejects.csv"
    assert xcom(dag_run, "import", key="bad_rows") == {"count": 2, "rejects": str(beside)}
    assert rejects_of(beside) == messy.rejects
    card_id = xcom(dag_run, "import")
    emulator.wait_until_processed(emulator.project_id, card_id)
    assert column_types(emulator, card_id)["order_id"] == "long"


def test_a_clean_file_is_sent_whole_and_sets_nothing_aside(br_dags, datatables_conn, stats, tmp_path):
    emulator = datatables_conn
    path = orders_csv(tmp_path, rows=9)

    dag_run = run(br_dags, "br_quarantine", file_path=str(path))

    assert state(dag_run, "import") == "success"
    assert xcom(dag_run, "import", key="bad_rows") == {"count": 0, "rejects": None}
    assert emulator.received_bytes(xcom(dag_run, "import")) == path.read_bytes()
    assert not (tmp_path / "orders.rejects.csv").exists()


# -- refused: nothing sent, no credit, no retry -------------------------------------------------------------


@pytest.mark.parametrize(
    ("dag_id", "kinds", "threshold"),
    [
        ("br_max_rows", ("field-count", "nul-byte"), "max_bad_rows=1"),
        ("br_max_fraction", ("field-count", "nul-byte", "encoding"), "max_bad_fraction=0.1"),
    ],
)
def test_over_a_threshold_nothing_is_sent_and_the_task_is_not_retried(
    br_dags, datatables_conn, stats, tmp_path, capfd, dag_id, kinds, threshold
):
    emulator = datatables_conn
    messy = messy_orders(tmp_path, kinds)

    dag_run = run(br_dags, dag_id, file_path=str(messy.path))

    ti = dag_run.get_task_instance("import")
    assert str(ti.state) == "failed" and ti.try_number == 1
    assert nothing_sent(emulator, stats)
    beside = tmp_path / "orders.rejects.csv"
    assert rejects_of(beside) == messy.rejects  # written all the same: the task says where to look
    out = capfd.readouterr()
    said = out.out + out.err
    assert f"{len(kinds)} of the {20 + len(kinds)} data rows are bad" in said
    assert threshold in said and str(beside) in said
    assert xcom(dag_run, "import", key="bad_rows") == {"count": len(kinds), "rejects": str(beside)}


def test_with_fail_a_declared_type_refuses_the_file_naming_the_row(br_dags, datatables_conn, stats, tmp_path, capfd):
    emulator = datatables_conn
    messy = messy_orders(tmp_path, ("not-a-long",))

    dag_run = run(br_dags, "br_fail_declared", file_path=str(messy.path))

    ti = dag_run.get_task_instance("import")
    assert str(ti.state) == "failed" and ti.try_number == 1
    assert nothing_sent(emulator, stats)
    out = capfd.readouterr()
    assert f"line {messy.rejects[0]['line']} (not-a-long: 'N/A' in column 'order_id'" in out.out + out.err
    assert not (tmp_path / "orders.rejects.csv").exists()


def test_a_replace_over_its_threshold_leaves_the_table_untouched(br_dags, datatables_conn, stats, tmp_path):
    emulator = datatables_conn
    first = orders_csv(tmp_path, "first.csv", rows=4)
    card_id = import_table(emulator, first)
    emulator.wait_until_processed(emulator.project_id, card_id)
    datatables_conn.reset_stats()
    before = {"credits": emulator.credits()}
    messy = messy_orders(tmp_path, ("field-count",))

    dag_run = run(br_dags, "br_replace_max_rows", file_path=str(messy.path), card_id=card_id)

    assert state(dag_run, "replace") == "failed"
    assert nothing_sent(emulator, before)
    assert table(emulator, card_id)["Rows"] == 4
    assert emulator.received_bytes(card_id) == first.read_bytes()


# -- declared types protect a replace's schema ---------------------------------------------------------------


def test_a_declared_type_keeps_a_replace_from_retyping_the_table(br_dags, datatables_conn, stats, tmp_path):
    """One ``N/A`` in an id column would make it ``string``: undeclared, the schema guard refuses the replace;
    declared ``long``, the row is set aside and the table keeps its type."""
    emulator = datatables_conn
    card_id = import_table(emulator, orders_csv(tmp_path, "first.csv", rows=4))
    emulator.wait_until_processed(emulator.project_id, card_id)
    messy = messy_orders(tmp_path, ("not-a-long",))

    refused = run(br_dags, "br_replace_undeclared", file_path=str(messy.path), card_id=card_id)
    assert state(refused, "replace") == "failed"
    assert table(emulator, card_id)["Rows"] == 4

    replaced = run(br_dags, "br_replace_declared", file_path=str(messy.path), card_id=card_id)
    assert state(replaced, "replace") == "success"
    read = emulator.wait_until_processed(emulator.project_id, card_id)
    assert read["Rows"] == 20
    assert emulator.received_bytes(card_id) == bytes(messy.good)
    assert column_types(emulator, card_id)["order_id"] == "long"


# -- sent once ------------------------------------------------------------------------------------------------


def test_a_lost_answer_after_a_quarantined_send_is_adopted_once(br_dags, datatables_conn, stats, tmp_path):
    emulator = datatables_conn
    messy = messy_orders(tmp_path, ("field-count", "nul-byte"), name="lost_good_rows.csv")
    emulator.set_faults(LOST)

    dag_run = run(br_dags, "br_quarantine", file_path=str(messy.path))

    ti = dag_run.get_task_instance("import")
    assert str(ti.state) == "success" and ti.try_number == 2
    assert imports_since(emulator, stats) == 1 and stats["credits"] - emulator.credits() == 1
    card_id = xcom(dag_run, "import")
    assert emulator.received_bytes(card_id) == bytes(messy.good)


def test_the_hook_in_a_task_sends_the_good_rows(br_dags, datatables_conn, stats, tmp_path):
    emulator = datatables_conn
    messy = messy_orders(tmp_path, ("encoding",), name="hooked.csv")

    dag_run = run(br_dags, "br_hook_in_task", file_path=str(messy.path))

    assert state(dag_run, "import_good_rows") == "success"
    card_id = xcom(dag_run, "import_good_rows")
    assert emulator.received_bytes(card_id) == bytes(messy.good)
    assert rejects_of(tmp_path / "hooked.rejects.csv") == messy.rejects


# -- Great Expectations: row-wise expectations set rows aside ------------------------------------------------


def test_rows_a_row_wise_expectation_finds_unexpected_are_set_aside_too(br_dags, datatables_conn, stats, tmp_path):
    emulator = datatables_conn
    rows = [b"1,North,10,a\n", b"2,South,-5,negative\n", b"3,North,12\n", b"4,,13,no region\n", b"5,South,14,b\n"]
    path = tmp_path / "checked.csv"
    path.write_bytes(HEADER + b"".join(rows))
    rejects = tmp_path / "checked.rejects.csv"

    dag_run = run(br_dags, "br_quarantine_gx", file_path=str(path))

    assert state(dag_run, "import") == "success"
    assert xcom(dag_run, "import", key="bad_rows") == {"count": 3, "rejects": str(rejects)}
    found = [(r["line"], r["byte_offset"], r["code"], r["column"], r["record"]) for r in rejects_of(rejects)]
    offset = [len(HEADER) + sum(map(len, rows[:i])) for i in range(len(rows))]
    assert found == [  # the rules' rows first, then the suite's, each with its place in the file
        ("4", str(offset[2]), "field-count", "", "3,North,12"),
        ("3", str(offset[1]), "expect_column_values_to_be_between", "amount", "2,South,-5,negative"),
        ("5", str(offset[3]), "expect_column_values_to_not_be_null", "region", "4,,13,no region"),
    ]
    assert emulator.received_bytes(xcom(dag_run, "import")) == HEADER + rows[0] + rows[4]
    assert xcom(dag_run, "import", key="gx_result")["success"] is False  # the suite's verdict on what the rules let by


def test_an_aggregate_expectation_that_fails_still_refuses_the_file(br_dags, datatables_conn, stats, tmp_path):
    emulator = datatables_conn
    path = orders_csv(tmp_path, rows=6)  # regions repeat: not unique

    dag_run = run(br_dags, "br_quarantine_gx_aggregate", file_path=str(path))

    ti = dag_run.get_task_instance("import")
    assert str(ti.state) == "failed" and ti.try_number == 1
    assert nothing_sent(emulator, stats)
    assert not (tmp_path / "orders.rejects.csv").exists()
