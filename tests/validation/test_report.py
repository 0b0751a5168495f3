"""validate_csv on files made to break one rule at a time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_tables.exceptions import CsvValidationError
from airflow_tables.validation import dialect, ranges, rules, validate_csv


def write(tmp_path: Path, text: str | bytes, name: str = "data.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


@pytest.mark.parametrize(
    ("text", "delimiter"),
    [
        ("a,b,c\n1,2,3\n", ","),
        ("a;b;c\n1;2;3\n", ";"),
        ("a\tb\tc\n1\t2\t3\n", "\t"),
        ("a|b|c\n1|2|3\n", "|"),
        ('a;b\n"1,2,3,4,5";x\n"6,7,8,9";y\n', ";"),  # commas only inside quotes
        ("solo\n1\n2\n", ","),  # one column falls back to comma
    ],
)
def test_delimiter_detection(tmp_path, text, delimiter):
    report = validate_csv(write(tmp_path, text))
    assert report.ok, report.errors
    assert report.delimiter == delimiter


def test_headings_named_as_the_service_will(tmp_path):
    report = validate_csv(write(tmp_path, "id, ,name,Name,name_2,\n1,2,3,4,5,6\n"))
    assert report.columns == ["id", "column_2", "name", "Name_3", "name_2", "column_6"]
    assert {p.code for p in report.warnings} == {"blank-heading", "repeated-heading"}
    assert report.ok


def test_name_columns_scheme():
    assert dialect.name_columns(["a", "a", "a", ""]) == ["a", "a_2", "a_3", "column_4"]
    assert dialect.name_columns([" x ", "X"]) == ["x", "X_2"]


def test_ragged_rows_reported_with_record_and_line(tmp_path):
    text = 'a,b\n1,2\n"multi\nline",3\n4\n5,6,7\n8,9\n'
    report = validate_csv(write(tmp_path, text))
    (problem,) = report.errors
    assert problem.code == "ragged-rows"
    assert "2 rows do not have the header's 2 fields" in problem.message
    assert "record 4 (line 5) has 1 field" in problem.message
    assert "record 5 (line 6) has 3 fields" in problem.message
    assert report.rows == 5


def test_too_many_ragged_rows_are_summarised(tmp_path):
    text = "a,b\n" + "1\n" * 500
    problem = validate_csv(write(tmp_path, text)).errors[0]
    assert "500 rows" in problem.message and "and 490 more" in problem.message


def test_unterminated_quote(tmp_path):
    report = validate_csv(write(tmp_path, 'a,b\n1,2\n3,"never closed\n4,5\n'))
    assert [p.code for p in report.errors] == ["unterminated-quote"]
    assert report.errors[0].line == 3


def test_nul_byte(tmp_path):
    report = validate_csv(write(tmp_path, b"a,b\n1,2\n3,\x004\n"))
    assert [p.code for p in report.errors] == ["nul-byte"]
    assert report.errors[0].line == 3


@pytest.mark.parametrize("content", [b"", b"\n", b"\r\n\r\n"])
def test_empty_file(tmp_path, content):
    report = validate_csv(write(tmp_path, content))
    assert [p.code for p in report.errors] == ["empty-file"]


def test_header_only_is_accepted_with_a_warning(tmp_path):
    report = validate_csv(write(tmp_path, "a,b\n"))
    assert report.ok and report.rows == 0
    assert [p.code for p in report.warnings] == ["no-rows"]


def test_latin1_refused_with_line(tmp_path):
    report = validate_csv(write(tmp_path, "name\nJosé\n".encode("latin-1")))
    assert [p.code for p in report.errors] == ["encoding"]
    assert report.errors[0].line == 2 and "0xE9" in report.errors[0].message


def test_utf8_bom_is_not_part_of_the_first_heading(tmp_path):
    report = validate_csv(write(tmp_path, "\ufeffid,name\n1,x\n".encode()))
    assert report.ok and report.columns == ["id", "name"] and report.encoding == "utf-8-sig"


def test_utf16_refused_but_described(tmp_path):
    report = validate_csv(write(tmp_path, "a,b\n1,2\n".encode("utf-16")))
    assert [p.code for p in report.errors] == ["encoding"]
    assert report.columns == ["a", "b"]


def test_limits(tmp_path):
    wide = ",".join(f"c{i}" for i in range(301)) + "\n"
    assert [p.code for p in validate_csv(write(tmp_path, wide)).errors] == ["too-many-columns"]
    assert validate_csv(write(tmp_path, wide), max_columns=301).ok
    big = write(tmp_path, "a\n" + "1\n" * 100)
    assert [p.code for p in validate_csv(big, max_bytes=100).errors] == ["too-large"]


def test_a_heading_too_long_to_read_is_refused_and_quoted_only_in_part(tmp_path):
    """Issue 36 point 15: a 15 MiB heading passed validation and reached the page, the logs and the form."""
    huge = "h" * (15 * 1024 * 1024)
    report = validate_csv(write(tmp_path, f"id,{huge},name\n1,2,3\n"))
    assert [p.code for p in report.errors] == ["heading-too-long"]
    message = str(report.errors[0])
    assert "column 2's heading is 15,728,640 characters long ('hhhh" in message and len(message) < 400
    assert report.warnings == []  # no warning quotes it either
    edge = "x" * 1024
    assert validate_csv(write(tmp_path, f"id,{edge}\n1,2\n")).ok  # the limit itself is taken


def test_file_name_rule(tmp_path):
    report = validate_csv(write(tmp_path, "a\n1\n", name="data.txt"))
    assert [p.code for p in report.errors] == ["file-name"]


def test_missing_file_and_directory(tmp_path):
    assert "No such file" in str(validate_csv(tmp_path / "nope.csv").errors[0])
    assert "directory" in str(validate_csv(tmp_path).errors[0])


def test_line_endings(tmp_path):
    for eol in ("\r\n", "\r", "\n"):
        report = validate_csv(write(tmp_path, eol.join(["a,b", "1,2", '"x' + eol + 'y",3', ""])))
        assert report.ok and report.rows == 2 and report.line_terminator == eol


def test_raise_for_errors_lists_every_problem(tmp_path):
    path = write(tmp_path, ",".join(["x"] * 301) + "\n", name="wide.txt")
    with pytest.raises(CsvValidationError) as info:
        validate_csv(path).raise_for_errors()
    message = str(info.value)
    assert str(path) in message and "2 problems" in message and "nothing was uploaded" in message
    assert {p.code for p in info.value.problems} == {"file-name", "too-many-columns"}


def test_parallel_scan_agrees_with_single(tmp_path, monkeypatch):
    """Large files are split between two processes; the answer must not depend on it."""
    from airflow_tables.validation import kernels

    rows = [f'{i},"q {i}, with\nbreak",x{i}' for i in range(40_000)]
    rows[31_337] = "short"
    path = write(tmp_path, "a,b,c\n" + "\n".join(rows) + "\n")
    single = validate_csv(path)
    for kernel in (kernels.NativeKernel, kernels.PythonKernel):
        monkeypatch.setattr(kernel, "parallel_min_bytes", 1024)
    monkeypatch.setattr(kernels, "VERIFY_BYTES", 0)
    split = validate_csv(path)
    assert single.rows == split.rows == 40_000
    assert [str(p) for p in single.errors] == [str(p) for p in split.errors]
    assert "record 31339 (line 62676) has 1 field" in single.errors[0].message


def test_cli_report_and_exit_status(tmp_path):
    good = write(tmp_path, "a;b\n1;2\n", name="good.csv")
    bad = write(tmp_path, "a,b\n1\n", name="bad.csv")
    out = subprocess.run(
        [sys.executable, "-m", "airflow_tables.cli", "validate", str(good)], capture_output=True, text=True
    )
    assert out.returncode == 0 and "2 columns, 1 row, semicolon-separated, utf-8, 8 bytes" in out.stdout
    out = subprocess.run(
        [sys.executable, "-m", "airflow_tables.cli", "validate", "--json", str(good), str(bad)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1
    reports = json.loads(out.stdout)
    assert [r["ok"] for r in reports] == [True, False]
    assert reports[1]["errors"][0]["code"] == "ragged-rows"


def test_cli_piped_into_a_reader_that_stops_early(tmp_path):
    path = write(tmp_path, "a,b\n" + "1,2\n" * 10)
    paths = [str(path)] * 2000  # far more output than a pipe holds
    child = subprocess.Popen(
        [sys.executable, "-m", "airflow_tables.cli", "validate", "--json", *paths],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdout.read(10) == b"[\n  {\n    "
    child.stdout.close()  # as `| head -c 10` does
    stderr = child.stderr.read().decode()
    assert child.wait(timeout=60) == 1
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr


def test_import_is_light():
    code = (
        "import sys, time; t = time.perf_counter(); import airflow_tables.validation; "
        "print(time.perf_counter() - t); "
        "print(sorted(m for m in ('pandas', 'pyarrow', 'great_expectations', 'airflow', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    _seconds, heavy = out.stdout.splitlines()
    assert heavy == "[]"  # its import time (<= 50 ms) is measured in benchmarks/parse.py


@pytest.mark.parametrize(
    "text",
    [
        "sentence\nhello; world\nfoo\n",  # a semicolon in one value does not make a semicolon file
        "note\nsee | here\nplain\n",
        'quote\n"a, b"\nc\td\n',
    ],
)
def test_a_heading_no_separator_splits_makes_a_one_column_file(tmp_path, text):
    report = validate_csv(write(tmp_path, text))
    assert report.ok, [str(p) for p in report.errors]
    assert report.delimiter == ","
    assert report.columns == [text.split("\n", 1)[0]]
    assert report.rows == 2


def test_a_one_column_heading_over_comma_separated_rows_is_still_ragged(tmp_path):
    """The corpus's frictionless__countries.csv: a title line over a comma-separated table."""
    report = validate_csv(write(tmp_path, "# clean this data!\nid,name\n1,Ireland\n"))
    assert [p.code for p in report.errors] == ["ragged-rows"]
    assert report.columns == ["# clean this data!"]


def _zip(*members: str, content: str = "<x/>") -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for name in members:
            archive.writestr(name, content)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("content", "code", "line"),
    [
        (b"Soci\xe9t\xe9,Montant\nAcme,10\n", "encoding", 1),
        (b"Soci\xe9t\xe9,Montant\nAcme,10\nCaf\xe9,3\n", "encoding", 1),  # the first bad byte, once
        (b'id,"long\nna\xefme"\n1,2\n', "encoding", 2),  # a heading across lines
        (b"id,na\x00me\n1,2\n", "nul-byte", 1),
    ],
)
def test_the_heading_row_gets_the_byte_checks_data_rows_get(tmp_path, content, code, line):
    report = validate_csv(write(tmp_path, content))
    assert [(p.code, p.line) for p in report.errors] == [(code, line)]


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        (__import__("gzip").compress(__import__("gzip").compress(b"a,b\n1,2\n")), "a gzip file"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1\x00\x00" + bytes(500), "an Excel 97-2003 workbook (xls)"),
        (__import__("gzip").compress(b"PAR1\x15\x04\x15\x10" + bytes(100)), "a Parquet file"),
    ],
    ids=["gzip-in-gzip", "xls", "parquet-in-gzip"],
)
def test_a_binary_file_is_named_as_what_it_is(tmp_path, content, kind):
    report = validate_csv(write(tmp_path, content))
    (problem,) = report.errors
    assert problem.code == "not-csv"
    assert problem.message.startswith(f"this is {kind}") and ", not a CSV: " in problem.message
    assert report.columns == [] and report.rows == 0


@pytest.mark.parametrize(
    "content",
    [__import__("gzip").compress(b"a,b\n1,2\n"), _zip("data.csv", content="a,b\n1,2\n")],
    ids=["gzip", "zip"],
)
def test_a_compressed_csv_is_validated_as_the_csv_it_holds(tmp_path, content):
    report = validate_csv(write(tmp_path, content))
    assert report.ok and report.columns == ["a", "b"] and report.rows == 1


def test_a_parquet_file_named_csv_is_read_as_parquet_and_a_broken_one_refused(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "data.csv")
    assert validate_csv(tmp_path / "data.csv").rows == 2
    report = validate_csv(write(tmp_path, b"PAR1\x15\x04\x15\x10" + bytes(100), name="broken.csv"))
    (problem,) = report.errors
    assert problem.code == "not-csv" and "a Parquet file" in problem.message and "cut short" in problem.message


def test_an_office_document_is_not_taken_for_a_zip_of_a_csv(tmp_path):
    report = validate_csv(write(tmp_path, _zip("[Content_Types].xml", "xl/workbook.xml")))
    (problem,) = report.errors
    assert "holds 2 files" in problem.message and "an Office document, not a zip of a CSV" in problem.message


def test_text_that_starts_like_a_signature_is_still_a_csv(tmp_path):
    report = validate_csv(write(tmp_path, "PAR1,BZh\n1,2\n"))
    assert report.ok and report.columns == ["PAR1", "BZh"]


def _cli(*args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "airflow_tables.cli", "validate", *args], capture_output=True, text=True
    ).stdout


def test_a_refused_file_reports_what_was_counted(tmp_path):
    wide = write(tmp_path, ",".join(f"c{i}" for i in range(12)) + "\n" + (",".join("1" * 12) + "\n") * 500)
    out = _cli("--max-columns", "2", str(wide))
    assert "12 columns, 500 rows, comma-separated" in out and "at most 2" in out
    report = validate_csv(wide, max_columns=2)
    assert (report.rows, report.stopped) == (500, None)
    assert report.summary().endswith(": 1 problem")


def test_a_missing_file_reports_no_made_up_facts(tmp_path):
    out = _cli(str(tmp_path / "missing.csv"))
    assert "bytes" not in out and "columns" not in out and "comma-separated" not in out
    assert "cannot read" in out and "No such file" in out
    assert validate_csv(tmp_path / "missing.csv").summary() == "validated missing.csv: not read: 1 problem"


@pytest.mark.parametrize(
    ("content", "counts"),
    [
        ('a,"b\n1,2\n', "2 columns, rows not counted: reading stopped at line 1 (unterminated-quote)"),
        ("a,b\n1,2\n".encode("utf-16"), "2 columns, rows not counted: reading stopped at line 1 (encoding)"),
        (
            __import__("gzip").compress(__import__("gzip").compress(b"a,b\n")),  # read once, still gzip
            "columns and rows not counted: reading stopped at line 1 (not-csv)",
        ),
        ("solo\n1\n", "1 column, 1 row"),
    ],
    ids=["open-quote-heading", "utf-16", "gzip", "singular"],
)
def test_a_report_says_where_counting_stopped_and_why(tmp_path, content, counts):
    report = validate_csv(write(tmp_path, content))
    assert report.counts() == counts
    assert counts in _cli(str(report.path))


def test_a_record_that_never_ends_reports_the_rows_before_it(tmp_path, monkeypatch):
    monkeypatch.setattr(ranges, "MAX_RECORD_BYTES", 1000)
    report = validate_csv(write(tmp_path, 'a,b\n1,2\n3,4\n5,"' + "x\n" * 800_000))
    assert report.stopped is not None and report.stopped.code == "record-too-long"
    assert report.counts() == "2 columns, at least 2 rows: reading stopped at line 4 (record-too-long)"
    assert report.to_dict()["stopped"]["line"] == 4


_WIDE_HEADER_PROBE = """
import json, resource, sys, time
from airflow_tables.validation import validate_csv
validate_csv(sys.argv[2])  # every module the scan uses imported, so the baseline holds them
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.monotonic()
report = validate_csv(sys.argv[1])
print(json.dumps({
    "seconds": time.monotonic() - started,
    "grown_mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024,
    "report": report.to_dict(),
    "describe": report.describe(),
}))
"""


@pytest.mark.parametrize("quoted", [False, True])
def test_a_header_of_millions_of_columns_is_counted_in_flat_memory(tmp_path, quoted):
    """A 4 MB header line: headings named up to the limit and counted past it (issue 24, point 3).

    It runs in a child process so that its peak memory (ru_maxrss) is the scan's own.
    """
    heading = b'"a,b"' if quoted else b"a"
    columns = 4_000_000 // (len(heading) + 1)
    wide = write(tmp_path, b",".join([heading] * columns) + b"\n1,2\n", "wide.csv")
    small = write(tmp_path, "a,b\n1,2\n", "small.csv")
    probe = subprocess.run(
        [sys.executable, "-c", _WIDE_HEADER_PROBE, str(wide), str(small)], capture_output=True, text=True, check=True
    )
    found = json.loads(probe.stdout)
    report = found["report"]
    assert [p["code"] for p in report["errors"]] == ["too-many-columns", "ragged-rows"]
    assert f"the header has {columns:,} columns" in report["errors"][0]["message"]
    assert f"does not have the header's {columns} fields" in report["errors"][1]["message"]
    assert found["describe"].startswith(f"{columns:,} columns, 1 row")
    assert len(report["columns"]) == rules.MAX_COLUMNS + 1
    assert found["grown_mib"] < 64, f"peak memory grew by {found['grown_mib']:.0f} MiB"
    assert found["seconds"] < 5, f"took {found['seconds']:.1f} s"


@pytest.mark.parametrize(
    ("text", "headings", "rows"),
    [
        ('a,b"c\n1,2\n3,4\n', ["a", 'b"c'], 2),  # a quote that is data does not run the header on
        ('a,"b\nc",d\n1,2,3\n', ["a", "b\nc", "d"], 1),  # a line break inside quotes does
        ('a,"b""",c\r\n1,2,3\r\n', ["a", 'b"', "c"], 1),
        ('"a"x,b\n1,2\n', ["ax", "b"], 1),
    ],
)
def test_the_header_ends_where_the_rules_end_its_record(tmp_path, text, headings, rows):
    report = validate_csv(write(tmp_path, text))
    assert (report.headings, report.rows, report.errors) == (headings, rows, [])


@pytest.mark.parametrize("target", ["/proc/self/status", "/proc/self/mountinfo"])
def test_a_file_whose_size_reads_zero_but_holds_data_is_reported_naming_it(tmp_path, target):
    """/proc files have size 0 and content, as a file still being written can: a report, not a bare ValueError."""
    path = tmp_path / "live.csv"
    path.symlink_to(target)
    report = validate_csv(path)
    assert not report.ok and not report.read
    (problem,) = report.errors
    assert problem.code == "unreadable"
    assert str(path) in problem.message and "still being written" in problem.message
    assert "copy it to a regular file" in problem.message
    assert report.summary() == "validated live.csv: not read: 1 problem"


_UTF8_ACCENTS = "id,city,note\n1,Zürich,café\n2,Genève,l’été\n"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-32"])
def test_a_utf8_file_declared_utf16_says_the_encoding_is_wrong_not_that_it_has_no_rows(tmp_path, encoding):
    report = validate_csv(write(tmp_path, _UTF8_ACCENTS), encoding=encoding)
    assert "no-rows" not in {p.code for p in report.warnings}, [str(p) for p in report.warnings]
    assert report.errors[0].code == "encoding"
    assert f"the file is UTF-8, not {encoding}" in report.errors[0].message
    assert "Leave encoding= out" in report.errors[0].message


def test_a_real_utf16_file_is_not_called_utf8(tmp_path):
    report = validate_csv(write(tmp_path, _UTF8_ACCENTS.encode("utf-16")), encoding="utf-16")
    assert report.ok and report.rows == 2 and report.warnings == []


@pytest.mark.parametrize(("encoding", "shown"), [("cp1252", "ZÃ¼rich"), ("latin-1", "ZÃ¼rich"), ("cp437", "Z├╝rich")])
def test_a_utf8_file_declared_single_byte_is_valid_with_a_mojibake_warning(tmp_path, encoding, shown):
    report = validate_csv(write(tmp_path, _UTF8_ACCENTS), encoding=encoding)
    assert report.ok and report.rows == 2
    (warning,) = report.warnings
    assert warning.code == "mojibake"
    assert "'Zürich'" in warning.message and repr(shown) in warning.message
    assert "leave encoding= out" in warning.message


def test_a_real_cp1252_file_and_plain_ascii_get_no_mojibake_warning(tmp_path):
    assert validate_csv(write(tmp_path, _UTF8_ACCENTS.encode("cp1252")), encoding="cp1252").warnings == []
    assert validate_csv(write(tmp_path, "id,city\n1,Lisbon\n"), encoding="cp1252").warnings == []


def test_the_cli_shows_the_mojibake_warning(tmp_path):
    path = write(tmp_path, _UTF8_ACCENTS)
    out = subprocess.run(
        [sys.executable, "-m", "airflow_tables.cli", "validate", "--encoding", "cp1252", str(path)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "OK" in out.stdout.splitlines()[0]
    assert "warning: the file reads as UTF-8 ('Zürich')" in out.stdout and "'ZÃ¼rich'" in out.stdout
