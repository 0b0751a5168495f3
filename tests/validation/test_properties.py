"""Property tests: tables written by Python's csv module read back exactly."""

from __future__ import annotations

import csv
import io
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_tables.exceptions import CsvValidationError
from airflow_tables.validation import validate_csv

# A lone CR is left out: with "\n" as line terminator Python's writer does not quote it,
# and no reader (Python's included) can tell it from a line break.
# The autouse fixture that picks the scan kernel (conftest.py) is set once per test, not per example.
FIXTURE = HealthCheck.function_scoped_fixture

TOKENS = [*"ab1 ,;|\t\"\n'é", "\r\n"]
cell = st.lists(st.sampled_from(TOKENS), max_size=8).map("".join)


@st.composite
def tables(draw):
    columns = draw(st.integers(min_value=2, max_value=8))
    header = [f"h{i}" for i in range(columns)]
    rows = draw(st.lists(st.lists(cell, min_size=columns, max_size=columns), min_size=1, max_size=30))
    # a row of only empty cells is written as a blank-looking line; keep one real value
    rows = [r if any(r) else ["x", *r[1:]] for r in rows]
    delimiter = draw(st.sampled_from([",", ";", "\t", "|"]))
    terminator = draw(st.sampled_from(["\n", "\r\n"]))
    quoting = draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL, csv.QUOTE_NONNUMERIC]))
    return header, rows, delimiter, terminator, quoting


def written(table) -> str:
    """The CSV text Python's csv module writes for a drawn table."""
    header, rows, delimiter, terminator, quoting = table
    buf = io.StringIO()
    writer = csv.writer(buf, delimiter=delimiter, lineterminator=terminator, quoting=quoting)
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, FIXTURE])
@given(tables())
def test_written_tables_read_back(table):
    header, rows, delimiter, _, _ = table
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.csv"
        path.write_text(written(table), encoding="utf-8", newline="")
        report = validate_csv(path)
    assert report.ok, [str(p) for p in report.errors]
    assert report.delimiter == delimiter
    assert report.columns == header
    assert report.rows == len(rows)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[FIXTURE])
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_crash(data):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.csv"
        path.write_bytes(data)
        report = validate_csv(path)
        try:
            report.raise_for_errors()
        except CsvValidationError as err:
            assert str(path) in str(err)
        assert report.rows >= 0
