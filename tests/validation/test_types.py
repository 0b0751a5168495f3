"""Column types from the validation scan (issue 26 point 4): one rule, every kernel, every reading.

``validate_csv(..., column_types=True)`` types each column ``long`` or ``string`` by
``validation/types.py`` in the same pass as validation. These run once per kernel
(conftest.py: the C extension and the pure-Python one) and hold each to the rule as
:func:`types.value_kind` states it, on every edge the module's docstring decides: signs,
leading zeros, whitespace, quotes, 64-bit bounds, CRLF, an empty last column, a file
without a final line break, a file scanned on two processes, one read exactly.
"""

from __future__ import annotations

import csv
import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_tables.validation import dialect, kernels, ranges, types, validate_csv
from airflow_tables.validation.scan import scan_file

# (value as written in the file, the type of a column holding it and "1"), decided in types.py's docstring.
EDGES = [
    ("5", "long"),
    ("+5", "long"),
    ("-5", "long"),
    (" 7 ", "long"),
    ("\t7", "long"),
    ("007", "long"),
    ("-0", "long"),
    ("0000000000000000000000000042", "long"),
    ("9223372036854775807", "long"),
    ("9223372036854775808", "string"),
    ("-9223372036854775808", "long"),
    ("-9223372036854775809", "string"),
    ("+9223372036854775807", "long"),
    ("12345678901234567890", "string"),
    ("1" * 5000, "string"),  # past int()'s digit limit: still an answer, not an exception
    ("+", "string"),
    ("-", "string"),
    ("+-5", "string"),
    ("5-", "string"),
    ("1_000", "string"),
    ("1e3", "string"),
    ("5.0", "string"),
    ("0x1F", "string"),
    ("1 2", "string"),
    ("\u0663", "string"),  # ARABIC-INDIC DIGIT THREE: a digit to str.isdigit, not an ASCII one
    ("\u00a05", "string"),  # a no-break space is not the whitespace the rule trims
    ('"5"', "long"),
    ('" 5 "', "long"),
    ('"-12"', "long"),
    ('"5"""', "string"),  # the value is 5"
    ('"5\n"', "long"),  # a line break inside the quotes is trimmed whitespace
    ('"5,6"', "string"),
    ("", "long"),  # a blank does not decide: the "1" beside it does
    ("   ", "long"),
    ('""', "long"),
    ('"\t"', "long"),
]


def write(tmp_path, text: str, name: str = "t.csv", newline: str = "\n") -> str:
    path = tmp_path / name
    path.write_bytes(text.replace("\n", newline).encode())
    return str(path)


def types_of(path: str) -> list[str] | None:
    report = validate_csv(path, column_types=True)
    assert report.errors == [], [str(p) for p in report.errors]
    return report.column_types


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf"])
@pytest.mark.parametrize(("value", "expected"), EDGES, ids=[repr(v)[:30] for v, _ in EDGES])
def test_a_value_types_its_column_by_the_rule(tmp_path, value, expected, newline):
    """The value in the first, a middle and the last column, beside "1"; with and without a final line break."""
    inner = value.replace("\n", "\x00")  # a line break inside quotes stays LF: only the record breaks follow the file's
    rows = f"{inner},x,{inner}\n1,y,1\n"
    text = ("a,b,c\n" + rows).replace("\n", newline).replace("\x00", "\n")
    for body in (text, text[: -len(newline)]):
        path = tmp_path / "t.csv"
        path.write_bytes(body.encode())
        assert types_of(str(path)) == [expected, "string", expected]
        assert types.column_type([_read_value(value), "1"]) == expected  # the rule itself agrees


def _read_value(written: str) -> str:
    return next(csv.reader(io.StringIO(written)), [""])[0] if written else ""


def test_blank_values_do_not_decide_and_an_empty_last_column_is_blank(tmp_path):
    path = write(tmp_path, "id,n,empty\n1,,\n,2,\n3,  ,\n")
    assert types_of(path) == ["long", "long", "string"]
    assert types_of(write(tmp_path, "id,n,empty\r\n1,,\r\n,2,\r\n", "crlf.csv")) == ["long", "long", "string"]


def test_one_value_anywhere_in_the_file_makes_a_column_string(tmp_path):
    """The whole file decides, not a sample: a string in the last of 100,000 rows still counts."""
    rows = "".join(f"{i},{i % 7}\n" for i in range(100_000))
    assert types_of(write(tmp_path, "id,n\n" + rows)) == ["long", "long"]
    assert types_of(write(tmp_path, "id,n\n" + rows + "100000,seven\n", "late.csv")) == ["long", "string"]
    assert types_of(write(tmp_path, "id,n\n" + rows + "x,7", "no_break.csv")) == ["string", "long"]


def test_types_across_the_scan_s_blocks_and_two_processes(tmp_path, monkeypatch):
    """A file split over many reads and scanned on two processes types as one read does."""
    line = '123456,-42,"quoted, text",+7\r\n'
    body = line * 60_000 + "1,2,x,9223372036854775808\r\n" + line * 60_000
    path = write(tmp_path, "a,b,c,d\r\n" + body)
    whole = types_of(path)
    assert whole == ["long", "long", "string", "string"]
    monkeypatch.setattr(ranges, "CHUNK_BYTES", 4096)
    assert types_of(path) == whole
    monkeypatch.setattr(ranges.kernels.NativeKernel, "parallel_min_bytes", 1024)
    monkeypatch.setattr(ranges.kernels.PythonKernel, "parallel_min_bytes", 1024)
    assert ranges.scan_data(path, 8, len(body) + 8, ",", 4, column_types=True).types == [1, 1, 2, 2]
    assert types_of(path) == whole


def test_records_read_exactly_are_typed_and_ragged_ones_are_not(tmp_path):
    """After a record that is not plain the rest is read exactly (dialect.Records): typed there by the same rule."""
    path = write(tmp_path, 'id,note\n1,ok\n2,a "quoted" word\n3,ok\n4,"x"y\n5,ok\n')
    assert types_of(path) == ["long", "string"]
    ragged = write(tmp_path, "id,n\n1,2\n3,4,extra\nfive\n6,7\n", "ragged.csv")
    report = validate_csv(ragged, column_types=True)
    assert {p.code for p in report.errors} == {"ragged-rows"}
    assert report.column_types == ["long", "long"]  # the refused records say nothing about the table's types


def test_no_types_unless_asked_or_when_the_reading_stopped(tmp_path):
    path = write(tmp_path, "id\n1\n")
    assert validate_csv(path).column_types is None
    assert validate_csv(path).to_dict()["column_types"] is None
    assert validate_csv(path, column_types=True).to_dict()["column_types"] == ["long"]
    assert scan_file(path, column_types=True).column_types == ["long"]
    unclosed = write(tmp_path, 'id,n\n1,"2\n', "open.csv")
    assert validate_csv(unclosed, column_types=True).column_types is not None  # counted, refused, typed
    latin = tmp_path / "latin.csv"
    latin.write_bytes("id,name\n1,caf\xe9\n".encode("latin-1"))
    stopped = validate_csv(str(latin), column_types=True)
    assert stopped.errors
    assert validate_csv(str(latin), column_types=True, encoding="latin-1").column_types == ["long", "string"]


def test_the_rule_folds_batches_as_it_folds_values():
    """types.fold (the Python kernel's batch path) gives value_kind's answer on every edge, in any batch."""
    values = [_read_value(v) for v, _ in EDGES]
    for value in values:
        for batch in ([value], [value, "1"], ["1", value, ""], [value] * 3):
            expected = max(types.value_kind(v) for v in batch)
            assert types.fold(types.UNSEEN, batch) == expected, batch
    assert types.fold(types.SEEN_LONG, ["", ""]) == types.SEEN_LONG
    assert types.fold(types.NOT_LONG, ["1"]) == types.NOT_LONG
    assert types.parse_long(" +7 ") == 7 and types.parse_long("9223372036854775808") is None


FIXTURE = HealthCheck.function_scoped_fixture
TYPE_PIECES = [*(bytes([b]) for b in b'019+- \t,"\n\rx'), b'""', b"\r\n"]
TYPE_PIECES += [b"9223372036854775807", b"9223372036854775808"]


@settings(max_examples=600, deadline=None, derandomize=True, suppress_health_check=[FIXTURE])
@given(
    st.lists(st.sampled_from(TYPE_PIECES), max_size=40).map(b"".join),
    st.integers(min_value=1, max_value=3),
    st.booleans(),
    st.lists(st.sampled_from([0, 1, 2]), min_size=3, max_size=3),
)
def test_a_kernel_types_what_it_accepts_as_the_rule_reads_it(scan_kernel, data, columns, final, start):
    """Whatever records a kernel accepts, its states are the rule folded over them as dialect.Records reads them."""
    kernel = kernels.kernel(",", columns)
    states = bytearray(start[:columns])
    found = kernel.scan(memoryview(data), final, states)
    expected = list(start[:columns])
    for _, fields in dialect.parse_records(data[: found.consumed].decode("latin-1"), ","):
        kinds = zip(expected, map(types.value_kind, fields), strict=True)
        expected = [state if state == types.NOT_LONG else max(state, kind) for state, kind in kinds]
    assert list(states) == expected
