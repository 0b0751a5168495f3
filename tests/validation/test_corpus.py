"""The validator against 113 real CSV files written by others (shared/corpus/csv).

The manifest records each file's true delimiter, columns, rows and what the service's
rules should reject. Our policy choices, asserted explicitly here:

* Reading follows RFC 4180 as Python's csv module reads it; where the manifest records
  an ``rfc4180`` alternative (backslash escapes, a space after the separator), that
  alternative is what we report.
* Encoding: UTF-8 with or without BOM is accepted; UTF-16, Latin-1, cp1252 and Big5
  files are refused with an ``encoding`` error that still reports how the file is built.
* A NUL byte is refused (``nul-byte``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from airflow_tables.validation import validate_csv

SHARED = Path(os.environ.get("AIRFLOW_TABLES_SHARED", Path(__file__).resolve().parents[3] / "shared"))
CORPUS = SHARED / "corpus" / "csv"
RECORDS = json.loads((CORPUS / "manifest.json").read_text(encoding="utf-8")) if CORPUS.exists() else []
UTF8 = {"ascii", "utf-8", "utf-8-sig"}

pytestmark = pytest.mark.skipif(not RECORDS, reason=f"shared corpus not found at {CORPUS}")


def expected(rec: dict) -> tuple[list[str], int, int]:
    """(flags, columns, rows) by the reading we follow: the RFC 4180 one where it differs."""
    alt = rec.get("rfc4180", {})
    flags = rec["expect"].get("flags_rfc4180", rec["expect"]["flags"])
    return flags, alt.get("columns", rec["columns"]), alt.get("rows", rec["rows"])


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: r["file"])
def test_real_world_csv(rec):
    if rec["uncertain"]:
        pytest.skip(rec["uncertain_reason"])
    report = validate_csv(CORPUS / "files" / rec["file"])
    flags, columns, rows = expected(rec)
    codes = {p.code for p in report.errors}

    policy = set()
    if rec["encoding"] not in UTF8:
        policy.add("encoding")
    if rec["nul_chars"]:
        policy.add("nul-byte")
    assert policy <= codes, f"policy errors missing: {policy - codes}"

    rule_codes = codes - {"encoding", "nul-byte"}
    assert rule_codes == set(flags) - {"unsupported-delimiter"}, [str(p) for p in report.errors]
    assert report.ok == (not flags and not policy)
    if rec["delimiter"] and not rec["single_column"]:
        assert report.delimiter == rec["delimiter"]
    assert report.column_count == columns
    if rec["encoding"].startswith("utf-16"):
        return  # refused before reading rows
    if "too-many-columns" not in flags and "empty-file" not in flags:
        assert report.rows == rows
    names = report.columns
    assert all(n.strip() for n in names)
    assert len({n.casefold() for n in names}) == len(names)
    if rec["encoding"] == "utf-8-sig" and names:
        assert not names[0].startswith("\ufeff")


def test_every_error_names_what_to_do():
    for rec in RECORDS:
        report = validate_csv(CORPUS / "files" / rec["file"])
        for problem in report.errors:
            text = str(problem)
            assert len(text) > 30 and problem.code in {
                "ragged-rows",
                "too-many-columns",
                "empty-file",
                "encoding",
                "nul-byte",
                "unterminated-quote",
            }, text


def test_ragged_rows_are_located():
    report = validate_csv(CORPUS / "files" / "duckdb__bad_csv_file_2047.csv")
    (problem,) = report.errors
    assert problem.code == "ragged-rows"
    assert problem.line == 2049 and problem.record == 2049
    assert "record 2049 (line 2049) has 16 fields" in problem.message


def _types_by_the_rule(path: Path, delimiter: str, columns: int) -> list[str]:
    """Each column's type read independently of the scan: every record by dialect.Records, every value by the rule."""
    from airflow_tables.validation import dialect, types

    states = [types.UNSEEN] * columns
    with open(path, encoding="utf-8-sig", errors="replace", newline="") as f:
        records = iter(dialect.Records(f, delimiter))
        next(records, None)  # the header
        for _, fields in records:
            if len(fields) == columns:
                states = [max(s, types.value_kind(v)) for s, v in zip(states, fields, strict=True)]
    return [types.type_of(s) for s in states]


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: r["file"])
def test_real_world_csv_column_types(rec):
    """Every file the service would read types its columns in the scan as a whole-file read by the rule does."""
    path = CORPUS / "files" / rec["file"]
    report = validate_csv(path, column_types=True)
    if report.stopped is not None:
        assert report.column_types is None
        return
    assert report.column_types is not None and len(report.column_types) == len(report.columns)
    if report.encoding not in UTF8 or not report.columns:
        return
    whole = _types_by_the_rule(path, report.delimiter, report.column_count)
    assert report.column_types == whole[: len(report.columns)]  # a header too wide to name is typed as named
