"""Property test: a row-wise suite validated chunk by chunk gives what GX gives on the whole file.

Random small tables (whole numbers with blanks, text with blanks and spaces) and random
suites of row-wise expectations (with and without ``mostly``) go through :func:`check`
with chunks of a few rows, and through one GX validation of the same columns read whole;
the two ``describe_dict()`` results must be equal, field for field.
"""

from __future__ import annotations

import csv
import io
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_tables.expectations import _validate, check, frames
from airflow_tables.expectations._gx import dataframe_batches, ephemeral_context, import_gx
from airflow_tables.expectations.merge import suite_result
from airflow_tables.expectations.suite import load_suite, plan
from airflow_tables.validation import validate_csv

NUMBERS = st.one_of(st.integers(-20, 20).map(str), st.sampled_from(["", " ", " 7 "]))
TEXTS = st.one_of(st.sampled_from(["a", "b", "ab", "abc", "", "  ", "x y", "7"]), st.text("abz ", max_size=4))
KINDS = {"n": NUMBERS, "t": TEXTS}
MOSTLY = st.sampled_from([None, 0.5, 0.8])


@st.composite
def tables(draw) -> tuple[list[str], list[list[str]]]:
    columns = ["n", "t", "n2", "t2"][: draw(st.integers(2, 4))]
    rows = draw(st.integers(1, 24))
    values = [[draw(KINDS[c[0]]) for c in columns] for _ in range(rows)]
    if all(not v[0].strip() for v in values[: min(rows, 1000)]):
        values[0][0] = "1"  # keep "n" a long column, so the number expectations apply to it
    return columns, values


def row_wise_expectation(draw, columns: list[str]) -> dict:
    texts = [c for c in columns if c.startswith("t")]
    numbers = [c for c in columns if c.startswith("n") and c != "n2"]  # n2 may be all blank: text
    kind = draw(st.sampled_from(["not_null", "null", "between", "in_set", "not_in_set", "regex", "lengths", "pair"]))
    kwargs: dict = {}
    if kind == "not_null":
        kwargs = {"type": "expect_column_values_to_not_be_null", "column": draw(st.sampled_from(columns))}
    elif kind == "null":
        kwargs = {"type": "expect_column_values_to_be_null", "column": draw(st.sampled_from(columns))}
    elif kind == "between":
        low = draw(st.integers(-20, 10))
        kwargs = {
            "type": "expect_column_values_to_be_between",
            "column": draw(st.sampled_from(numbers)),
            "min_value": low,
            "max_value": low + draw(st.integers(0, 20)),
        }
    elif kind in ("in_set", "not_in_set"):
        kwargs = {
            "type": f"expect_column_values_to_{'be' if kind == 'in_set' else 'not_be'}_in_set",
            "column": draw(st.sampled_from(texts)),
            "value_set": draw(st.lists(st.sampled_from(["a", "b", "ab", "x y", "7"]), min_size=1, max_size=3)),
        }
    elif kind == "regex":
        kwargs = {
            "type": "expect_column_values_to_match_regex",
            "column": draw(st.sampled_from(texts)),
            "regex": draw(st.sampled_from(["^a", "b$", "^[ab]+$", " "])),
        }
    elif kind == "lengths":
        kwargs = {
            "type": "expect_column_value_lengths_to_be_between",
            "column": draw(st.sampled_from(texts)),
            "min_value": 1,
            "max_value": draw(st.integers(1, 3)),
        }
    else:
        kwargs = {"type": "expect_column_pair_values_to_be_equal", "column_A": "t", "column_B": texts[-1]}
    if (mostly := draw(MOSTLY)) is not None:
        kwargs["mostly"] = mostly
    kind_name = kwargs.pop("type")
    return {"type": kind_name, "kwargs": kwargs}


@st.composite
def cases(draw):
    columns, rows = draw(tables())
    suite = {
        "name": "random",
        "expectations": [row_wise_expectation(draw, columns) for _ in range(draw(st.integers(1, 4)))],
    }
    chunks = draw(st.integers(1, 4))  # few: each chunk is a GX validation (about 0.2 s)
    return columns, rows, suite, -(-len(rows) // chunks)


def whole_read(report, suite_dict: dict) -> tuple[dict, int]:
    """The suite's result from one GX validation of its columns read whole (no chunks, no merge); the columns read."""
    gx = import_gx()
    context = ephemeral_context(gx)
    suite = load_suite(suite_dict, gx, context)
    name = Path(report.path).name
    steps = plan(suite, report.columns, name)
    reader = frames.ColumnReader(report, steps.columns)
    found = _validate(gx, dataframe_batches(context, name), reader.whole(), steps.data, suite.name)
    return suite_result(suite.name, [found[id(e)] for e in suite.expectations]).describe_dict(), len(steps.columns)


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_chunked_results_are_the_whole_file_results(case):
    columns, rows, suite, chunk_rows = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.csv"
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_ALL)
        writer.writerow(columns)
        writer.writerows(rows)
        path.write_text(buf.getvalue(), encoding="utf-8")
        report = validate_csv(path)
        assert report.ok
        whole, read = whole_read(report, suite)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(frames, "FRAME_VALUES", chunk_rows * read)
            patch.setattr(frames, "MIN_CHUNK_ROWS", 1)
            outcome = check(report, suite)
    assert outcome.result == whole
    expected_chunks = -(-len(rows) // chunk_rows)
    assert f"in {expected_chunks} chunk" in outcome.summary
