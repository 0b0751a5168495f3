"""The rows a suite's row-wise expectations find unexpected, on real files and a real GX.

Rows are planted at known positions among the data rows (with blank lines, line breaks inside
quoted fields and CRLF around them, so a row's position is not its line); chunks are made a few
rows long, so the positions must carry across chunks. The outcome must be :func:`check`'s.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from airflow_tables.expectations import check, frames
from airflow_tables.expectations.rows import RowVerdict, unexpected_rows
from airflow_tables.validation import dialect, validate_csv

CHUNK_ROWS = 7
BETWEEN = "expect_column_values_to_be_between"
IN_SET = "expect_column_values_to_be_in_set"
NOT_NULL = "expect_column_values_to_not_be_null"
REGIONS = ["North", "South"]


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch):
    """Chunks of :data:`CHUNK_ROWS` rows, read in pieces smaller still."""
    monkeypatch.setattr(frames, "MIN_CHUNK_ROWS", CHUNK_ROWS)
    monkeypatch.setattr(frames, "FRAME_VALUES", 1)
    monkeypatch.setattr(frames, "PARSE_BYTES", 64)


def expectation(kind: str, **kwargs) -> dict:
    return {"type": kind, "kwargs": kwargs}


def suite(*expectations: dict) -> dict:
    return {"name": "orders", "expectations": list(expectations)}


ROW_WISE = suite(
    expectation(BETWEEN, column="amount", min_value=0, max_value=100),
    expectation(IN_SET, column="region", value_set=REGIONS),
    expectation(NOT_NULL, column="note"),
)


def write(tmp_path: Path, rows: list[list[str]], *, crlf: bool = False, seed: int = 0) -> Path:
    """``rows`` under the header ``id,amount,region,note``, with blank lines and quoted line breaks here and there."""
    rng = random.Random(seed)
    eol = "\r\n" if crlf else "\n"
    lines = ["id,amount,region,note" + eol]
    for row in rows:
        if rng.random() < 0.15:
            lines.append(eol)  # a blank line: not a row
        fields = [f'"{v}"' if "\n" in v or "," in v else v for v in row]
        lines.append(",".join(fields) + eol)
    path = tmp_path / "orders.csv"
    path.write_bytes("".join(lines).encode())
    return path


def good_row(rng: random.Random, number: int) -> list[str]:
    note = rng.choice(["ok", "two\nlines", "a, b", "x" * rng.randint(1, 30)])
    return [str(number), str(rng.randint(0, 100)), rng.choice(REGIONS), note]


def planted(seed: int, count: int = 60) -> tuple[list[list[str]], dict[int, str]]:
    """``count`` rows, some breaking one or more of :data:`ROW_WISE`; the code expected for each such row."""
    rng = random.Random(seed)
    rows, expected = [], {}
    for number in range(count):
        row = good_row(rng, number)
        broken = [kind for kind in (BETWEEN, IN_SET, NOT_NULL) if rng.random() < 0.12]
        if BETWEEN in broken:
            row[1] = rng.choice(["-1", "101", "5000"])
        if IN_SET in broken:
            row[2] = rng.choice(["East", "north", " "])  # blank: missing, which in_set does not count
            if not row[2].strip():
                broken.remove(IN_SET)
        if NOT_NULL in broken:
            row[3] = rng.choice(["", "   "])
        if broken:
            expected[number] = broken[0]  # the suite's order: the first expectation to find it names it
        rows.append(row)
    return rows, expected


def report_of(path: Path):
    report = validate_csv(path)
    assert report.ok, [str(p) for p in report.errors]
    return report


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_row_wise_expectations_flag_exactly_the_planted_rows(tmp_path, seed):
    rows, expected = planted(seed)
    path = write(tmp_path, rows, crlf=seed == 2, seed=seed)
    report = report_of(path)
    assert report.rows == len(rows)

    found = unexpected_rows(report, ROW_WISE)

    assert {i: v.code for i, v in found.rows.items()} == expected
    assert not found.refused and not found.outcome.success
    assert "in 9 chunks" in found.outcome.summary  # 60 rows, 7 a chunk: the positions carried across chunks
    by_id = {
        int(fields[0]): fields for _, fields in dialect.parse_records(path.read_text(), ",", 1) if fields[0] != "id"
    }
    for index, verdict in found.rows.items():
        values = by_id[index]  # the row's id is its position: the row GX named is the one planted
        column = {BETWEEN: "amount", IN_SET: "region", NOT_NULL: "note"}[verdict.code]
        assert verdict.column == column and f"in column {column!r} breaks {verdict.code}(" in verdict.message
        if verdict.code == NOT_NULL:
            assert verdict.message.startswith("a missing value")
        else:
            assert verdict.message.startswith(repr(int(values[1])) if column == "amount" else repr(values[2]))


@pytest.mark.parametrize("seed", [1, 2])
def test_the_outcome_is_what_check_says_of_the_whole_file(tmp_path, seed):
    rows, _ = planted(seed)
    report = report_of(write(tmp_path, rows, seed=seed))

    found = unexpected_rows(report, ROW_WISE)
    checked = check(report, ROW_WISE)

    assert found.outcome == checked
    for result in found.outcome.result["expectations"]:
        assert "unexpected_list" not in result["result"] and "unexpected_index_list" not in result["result"]


def test_a_clean_file_has_no_rows_and_passes(tmp_path):
    rng = random.Random(7)
    report = report_of(write(tmp_path, [good_row(rng, n) for n in range(30)], seed=7))

    found = unexpected_rows(report, ROW_WISE)

    assert found.rows == {} and not found.refused and found.outcome.success


def test_a_failed_aggregate_refuses_the_file_and_its_row_wise_rows_are_still_named(tmp_path):
    rows, expected = planted(4, count=30)
    rows[5][0] = rows[4][0]  # a repeated id
    report = report_of(write(tmp_path, rows, seed=4))
    unique = expectation("expect_column_values_to_be_unique", column="id")

    found = unexpected_rows(report, suite(*ROW_WISE["expectations"], unique))

    assert found.refused
    assert {i: v.code for i, v in found.rows.items()} == expected  # the unique's rows are not row-wise verdicts
    assert "read whole" in found.outcome.summary
    assert found.outcome == check(report, suite(*ROW_WISE["expectations"], unique))


def test_a_failed_mean_refuses_and_a_met_one_does_not(tmp_path):
    rows = [[str(n), str(n), "North", "ok"] for n in range(20)]  # amounts 0..19, mean 9.5
    rows[3][1] = "200"  # breaks the between; the mean becomes 19.35
    report = report_of(write(tmp_path, rows))
    between = expectation(BETWEEN, column="amount", min_value=0, max_value=100)

    met = unexpected_rows(
        report, suite(between, expectation("expect_column_mean_to_be_between", column="amount", max_value=50))
    )
    failed = unexpected_rows(
        report, suite(between, expectation("expect_column_mean_to_be_between", column="amount", max_value=15))
    )

    assert not met.refused and set(met.rows) == {3}
    assert failed.refused and set(failed.rows) == {3}


def test_a_failed_row_count_refuses(tmp_path):
    report = report_of(write(tmp_path, [[str(n), "5", "North", "ok"] for n in range(10)]))

    found = unexpected_rows(report, suite(expectation("expect_table_row_count_to_equal", value=11)))

    assert found.refused and found.rows == {}


def test_an_expectation_that_cannot_be_evaluated_refuses(tmp_path):
    report = report_of(write(tmp_path, [[str(n), "5", "North", "ok"] for n in range(10)]))

    found = unexpected_rows(report, suite(expectation("expect_column_values_to_match_regex", column="note", regex="(")))

    assert found.refused and found.rows == {}
    assert "could not be evaluated" in found.outcome.failures[0]


def test_mostly_lets_the_expectation_pass_but_its_rows_are_still_set_aside(tmp_path):
    rows = [[str(n), "5", "North", "ok"] for n in range(20)]
    rows[13][2] = "East"
    report = report_of(write(tmp_path, rows))

    found = unexpected_rows(report, suite(expectation(IN_SET, column="region", value_set=REGIONS, mostly=0.9)))

    assert found.outcome.success and not found.refused
    assert found.rows == {
        13: RowVerdict(
            IN_SET, f"'East' in column 'region' breaks {IN_SET}(mostly=0.9, value_set={REGIONS!r})", "region"
        )
    }


def test_an_expectation_over_two_columns_names_both_values(tmp_path):
    rows = [[str(n), str(n), "North", "ok"] for n in range(15)]
    rows[9][1] = "3"
    report = report_of(write(tmp_path, rows))

    found = unexpected_rows(
        report, suite(expectation("expect_column_pair_values_to_be_equal", column_A="id", column_B="amount"))
    )

    assert found.rows == {
        9: RowVerdict(
            "expect_column_pair_values_to_be_equal",
            "columns 'id' = 9, 'amount' = 3 break expect_column_pair_values_to_be_equal()",
            None,
        )
    }
    assert not found.refused


def test_results_are_paired_with_their_expectations_when_gx_reorders_them(tmp_path):
    """GX returns a result whose metric raised first: a chunk where it raises must not swap the results."""
    rows = [[str(n), str(n + 10), "North", "ok"] for n in range(14)]  # amount > id
    rows[2][1] = ""  # a missing amount in the first chunk only: the pair expectation raises there
    rows[10][1] = "500"  # breaks the between in the second chunk
    report = report_of(write(tmp_path, rows))
    between = expectation(BETWEEN, column="amount", min_value=0, max_value=100)
    pair = expectation("expect_column_pair_values_a_to_be_greater_than_b", column_A="amount", column_B="id")

    found = unexpected_rows(report, suite(between, pair))

    kinds = {r["expectation_type"]: r for r in found.outcome.result["expectations"]}
    assert kinds[BETWEEN]["result"]["unexpected_count"] == 1 and not kinds[BETWEEN]["success"]
    assert kinds[pair["type"]]["exception_info"]["raised_exception"]
    assert set(found.rows) == {10} and found.refused  # the pair could not be evaluated
    assert found.outcome == check(report, suite(between, pair))
