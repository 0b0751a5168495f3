"""Parquet and JSON Lines converted to CSV by the documented rules: every Arrow type with a CSV form, the refused ones.

The round trip (Parquet -> our CSV -> the values read back) is a property over random schemas
and values; ``test_tabular_imports.py`` sends such files through DAG runs to the emulator.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
import re
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from airflow_tables.sources import Reading, open_source, read_plan, staged  # noqa: E402
from airflow_tables.sources.errors import SourceError  # noqa: E402
from airflow_tables.sources.tabular import JSONL, PARQUET, csv_stream  # noqa: E402

PARIS = dt.timezone(dt.timedelta(hours=1))


def parquet_bytes(table) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(table, buffer, row_group_size=1000)
    return buffer.getvalue()


def converted(data: bytes, kind=PARQUET) -> str:
    with csv_stream(io.BytesIO(data), kind, "t") as stream:
        return stream.read().decode()


@pytest.mark.parametrize(
    ("array", "fields"),
    [
        (pa.array([0, -1, 2**63 - 1, None], pa.int64()), ["0", "-1", "9223372036854775807", ""]),
        (pa.array([2**64 - 1], pa.uint64()), ["18446744073709551615"]),
        (pa.array([7], pa.int8()), ["7"]),
        (pa.array([0.1, 100.0, 1e20, 1.5e-7, -0.0], pa.float64()), ["0.1", "100", "1e+20", "1.5e-7", "-0"]),
        (pa.array([float("nan"), float("inf"), float("-inf")]), ["nan", "inf", "-inf"]),
        (pa.array([0.1, 1 / 3], pa.float32()), ["0.1", "0.33333334"]),
        (pa.array([True, False, None]), ["true", "false", ""]),
        (pa.array([Decimal("1.2300"), Decimal("-5.0000")], pa.decimal128(10, 4)), ["1.2300", "-5.0000"]),
        (pa.array([dt.date(2026, 11, 29)], pa.date32()), ["2026-11-29"]),
        (pa.array([dt.date(2026, 11, 29)], pa.date64()), ["2026-11-29"]),
        (pa.array([dt.time(12, 30, 0, 250000)], pa.time64("us")), ["12:30:00.250000"]),
        (pa.array([dt.datetime(2026, 11, 29, 12, 30)], pa.timestamp("s")), ["2026-11-29T12:30:00"]),
        (pa.array([dt.datetime(2026, 11, 29, 12, 30, 0, 5000)], pa.timestamp("ms")), ["2026-11-29T12:30:00.005"]),
        (pa.array([1795955400123456789], pa.timestamp("ns")), ["2026-11-29T12:30:00.123456789"]),
        (
            pa.array([dt.datetime(2026, 11, 29, 12, 30, tzinfo=dt.UTC)], pa.timestamp("s", tz="Europe/Paris")),
            ["2026-11-29T13:30:00+01:00"],
        ),
        (
            pa.array([dt.datetime(2026, 11, 29, 12, 30, tzinfo=dt.UTC)], pa.timestamp("ms", tz="-03:30")),
            ["2026-11-29T09:00:00-03:30"],  # a fixed offset: no zone database asked (pyarrow < 26 has none for it)
        ),
        (
            pa.array([dt.datetime(2026, 7, 1, 0, 0, tzinfo=dt.UTC)], pa.timestamp("s", tz="UTC")),
            ["2026-07-01T00:00:00+00:00"],
        ),
        (
            pa.array(["plain", "a,b", 'say "hi"', "two\nlines", "", None]),
            ["plain", "a,b", 'say "hi"', "two\nlines", "", ""],
        ),
        (pa.array(["x", "y", "x"]).dictionary_encode(), ["x", "y", "x"]),
        (pa.array([None, None], pa.null()), ["", ""]),
    ],
    ids=lambda value: str(getattr(value, "type", "")) or None,
)
def test_each_arrow_type_with_a_csv_form_is_written_by_the_rule(array, fields):
    table = pa.table({"value": array, "n": pa.array(range(len(array)), pa.int64())})
    text = converted(parquet_bytes(table))
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["value", "n"]
    assert [row[0] for row in rows[1:]] == fields


def test_text_is_quoted_only_where_it_must_be():
    table = pa.table({"a": ["x", "a,b", 'q"', "a;b", "t\tu", "p|q", "it's"], "b;c": [1, 2, 3, 4, 5, 6, 7]})
    assert converted(parquet_bytes(table)) == ('a,"b;c"\nx,1\n"a,b",2\n"q""",3\n"a;b",4\n"t\tu",5\n"p|q",6\nit\'s,7\n')


def test_a_line_that_would_be_empty_is_written_as_an_empty_quoted_field():
    table = pa.table({"only": ["a", None, ""]})
    assert converted(parquet_bytes(table)) == 'only\na\n""\n""\n'


@pytest.mark.parametrize(
    ("column", "type_name"),
    [
        (pa.array([[1, 2]]), "list<"),
        (pa.array([{"x": 1}]), "struct<x: int64>"),
        (pa.array([b"\x00\x01"]), "binary"),
        (pa.array([dt.timedelta(seconds=5)]), "duration[us]"),
    ],
)
def test_a_column_without_a_csv_form_is_refused_by_name_before_converting(column, type_name):
    table = pa.table({"id": [1], "payload": column})
    with pytest.raises(SourceError, match=r"no CSV form: payload \(" + re.escape(type_name)):
        converted(parquet_bytes(table))


def test_more_columns_than_the_service_takes_are_refused_before_converting():
    table = pa.table({f"c{i}": [i] for i in range(301)})
    with pytest.raises(SourceError, match="301 columns; the service takes at most 300"):
        converted(parquet_bytes(table))


def test_json_lines_columns_are_every_key_in_order_missing_ones_empty():
    data = b'{"id": 1, "name": "a"}\n{"id": 2, "extra": true}\n\n{"name": "c,d", "id": 3.5}\n'
    assert converted(data, JSONL) == 'id,name,extra\n1,a,\n2,,true\n3.5,"c,d",\n'


def test_a_json_key_that_changes_kind_is_refused_naming_it_and_its_lines(monkeypatch):
    import airflow_tables.sources.tabular as tabular

    monkeypatch.setattr(tabular, "JSON_BLOCK", 64)  # several blocks, so the kinds meet across them
    data = b"".join(b'{"id": %d, "code": 12}\n' % i for i in range(10)) + b'\n{"id": 10, "code": "A7"}\n'
    with pytest.raises(SourceError, match=r"the key 'code' holds .*line 12\b.*one kind of value"):
        converted(data, JSONL)
    with pytest.raises(SourceError, match=r"the key 'code' holds a number before line 3 and a string on it"):
        converted(b'{"code": 1}\n{"code": 2}\n{"code": "x"}\n', JSONL)


def test_a_json_line_that_is_not_json_is_refused_naming_the_lines():
    with pytest.raises(SourceError, match=r"JSON Lines from line 1 on cannot be read"):
        converted(b'{"id": 1}\n{"id": \n', JSONL)


def test_the_plan_stages_parquet_and_the_copy_is_the_csv(tmp_path):
    path = tmp_path / "orders.parquet"
    path.write_bytes(parquet_bytes(pa.table({"id": [1, 2], "amount": [0.5, 2.0]})))

    source = open_source(path)
    with staged(source) as copy:
        text = Path(copy.local_path).read_text()

    assert source.input_format is PARQUET and source.name == "orders.csv"
    assert read_plan(source).reading is Reading.STAGED
    assert text == "id,amount\n1,0.5\n2,2\n"


def test_input_format_names_a_file_whose_suffix_does_not(tmp_path):
    path = tmp_path / "events.log"
    path.write_bytes(b'{"a": 1}\n')
    assert open_source(path).input_format.name == "csv"
    assert open_source(path, input_format="jsonl").name == "events.log.csv"  # the table: events.log
    with staged(open_source(path, input_format="jsonl")) as copy:
        assert Path(copy.local_path).read_text() == "a\n1\n"
    with pytest.raises(ValueError, match="input_format must be one of"):
        open_source(path, input_format="xlsx")
    with pytest.raises(ValueError, match="encoding= is for a CSV's text"):
        open_source(path, encoding="cp1252", input_format="jsonl")


def test_a_parquet_file_is_converted_a_batch_at_a_time(tmp_path, monkeypatch):
    """A file of many row groups: no batch holds more than batch_rows() rows, so memory is bounded by it;
    the batches convert on Arrow's system allocator, and the process's pool is back after."""
    import airflow_tables.sources.tabular as tabular

    seen: list[tuple[int, str]] = []
    batch_csv = tabular._batch_csv

    def noting(pa_, batch, label):
        seen.append((batch.num_rows, pa_.default_memory_pool().backend_name))
        return batch_csv(pa_, batch, label)

    monkeypatch.setattr(tabular, "MIN_BATCH_ROWS", 100)
    monkeypatch.setattr(tabular, "BATCH_VALUES", 1000)
    monkeypatch.setattr(tabular, "_batch_csv", noting)
    pool = pa.default_memory_pool()
    table = pa.table({"id": pa.array(range(10_000), pa.int64()), "twice": pa.array(range(0, 20_000, 2))})
    text = converted(parquet_bytes(table))
    assert text.count("\n") == 10_001 and text.splitlines()[-1] == "9999,19998"
    assert max(rows for rows, _ in seen) == 500 and sum(rows for rows, _ in seen) == 10_000
    assert {backend for _, backend in seen} == {"system"}
    assert pa.default_memory_pool().backend_name == pool.backend_name


def test_a_batch_is_counted_in_values_not_rows():
    """A wide table's batches hold fewer rows than a narrow one's, within the bounds either way."""
    from airflow_tables.sources.tabular import MAX_BATCH_ROWS, MIN_BATCH_ROWS, batch_rows

    assert batch_rows(20) == 8192 and batch_rows(40) == 4096
    assert batch_rows(300) == MIN_BATCH_ROWS and batch_rows(1) == MAX_BATCH_ROWS


# -- the round trip: Parquet -> our CSV -> the values read back --------------------------------

_KINDS = {
    "int64": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "int32": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "float64": (pa.float64(), st.floats(allow_nan=False, allow_infinity=True, width=64)),
    "float32": (pa.float32(), st.floats(allow_nan=False, allow_infinity=False, width=32)),
    "bool": (pa.bool_(), st.booleans()),
    "string": (
        pa.string(),
        st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12),
    ),
    "date32": (pa.date32(), st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31))),
    "timestamp_us": (pa.timestamp("us"), st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31))),
    "timestamp_paris": (
        pa.timestamp("ms", tz="+01:00"),
        st.datetimes(dt.datetime(1970, 1, 2), dt.datetime(2200, 1, 1), timezones=st.just(dt.UTC)).map(
            lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000)
        ),
    ),
    "decimal": (pa.decimal128(12, 3), st.decimals(min_value=-(10**8), max_value=10**8, places=3, allow_nan=False)),
}


def _read_back(kind: str, field: str):
    """A CSV field as the value it stands for, by the documented rules (empty: null)."""
    if field == "" and kind != "string":
        return None
    if kind in ("int64", "int32"):
        return int(field)
    if kind == "float32":  # shortest in float32: read back as a float32
        return float(pa.array([float(field)], pa.float32())[0].as_py())
    if kind == "float64":
        return float(field)
    if kind == "bool":
        return {"true": True, "false": False}[field]
    if kind == "date32":
        return dt.date.fromisoformat(field)
    if kind.startswith("timestamp"):
        return dt.datetime.fromisoformat(field)
    if kind == "decimal":
        return Decimal(field)
    return field


def _expected(kind: str, value):
    if value is None:
        return "" if kind == "string" else None
    if kind == "float32":
        return float(pa.array([value], pa.float32())[0].as_py())
    return value


@st.composite
def tables(draw):
    kinds = draw(st.lists(st.sampled_from(sorted(_KINDS)), min_size=1, max_size=6))
    rows = draw(st.integers(1, 30))
    columns = {}
    for i, kind in enumerate(kinds):
        arrow_type, values = _KINDS[kind]
        column = draw(st.lists(st.one_of(st.none(), values), min_size=rows, max_size=rows))
        columns[f"{kind}_{i}"] = (kind, pa.array(column, arrow_type))
    return columns


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables())
def test_parquet_to_our_csv_reads_back_as_the_values_pyarrow_reads(columns):
    table = pa.table({name: array for name, (_, array) in columns.items()})
    data = parquet_bytes(table)
    rows = list(csv.reader(io.StringIO(converted(data), newline="")))
    read = pq.read_table(io.BytesIO(data))

    assert rows[0] == list(columns)
    for index, (name, (kind, _)) in enumerate(columns.items()):
        got = [_read_back(kind, row[index]) for row in rows[1:]]
        want = [_expected(kind, value) for value in read.column(name).to_pylist()]
        if kind.startswith("float"):
            assert all(
                (g is None and w is None) or (g == w or (math.isinf(g) and g == w))
                for g, w in zip(got, want, strict=True)
            ), name
        else:
            assert got == want, name


def test_a_slice_is_searched_for_quoting_in_its_own_values_only():
    """A DataFrame's batch is a slice sharing its column's data: a comma in a later row is not this batch's."""
    import pyarrow.compute as pc

    from airflow_tables.sources.tabular import _NEEDS_QUOTES, _holds

    column = pa.array(["plain", "text", "a,b", 'say "hi"'])
    assert not _holds(pa, pc, column.slice(0, 2), _NEEDS_QUOTES)
    assert _holds(pa, pc, column.slice(1, 2), _NEEDS_QUOTES) and _holds(pa, pc, column.slice(3), '"')
    assert not _holds(pa, pc, column.slice(0, 3), '"') and not _holds(pa, pc, pa.array(["", ""]), _NEEDS_QUOTES)
