"""validation/rules.py is the one place that words what a scan reports, and the limits travel as one value."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from airflow_tables.validation import rules, validate_csv
from airflow_tables.validation.scan import scan_file

SRC = Path(rules.__file__).resolve().parents[1]  # the whole package


def _problems_built_outside_the_rules() -> list[str]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "rules.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if name == "Problem":
                    found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    return found


def test_every_problem_is_worded_in_the_rules():
    assert _problems_built_outside_the_rules() == []


def test_limits_are_one_frozen_value_checked_when_made():
    limits = rules.Limits(max_columns=2)
    assert (limits.max_columns, limits.max_bytes) == (2, rules.MAX_BYTES)
    assert rules.Limits(300, 512 * 1024**2) == rules.SERVICE_LIMITS
    with pytest.raises(dataclasses.FrozenInstanceError):
        limits.max_columns = 3  # type: ignore[misc]
    for bad in (0, -1, True, 2.5):
        with pytest.raises(ValueError, match="max_columns must be a whole number of at least 1"):
            rules.Limits(max_columns=bad)  # type: ignore[arg-type]


def test_the_scan_takes_the_limits_value_and_validate_csv_builds_it(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("a,b,c\n1,2,3\n")
    scan = scan_file(path, rules.Limits(max_columns=2, max_bytes=10))
    assert [p.code for p in scan.errors] == ["too-large", "too-many-columns"]
    assert [str(p) for p in scan.errors] == [str(p) for p in validate_csv(path, max_columns=2, max_bytes=10).errors]
    assert "at most 10 bytes." in scan.errors[0].message  # no "(0 MiB)" for a limit under a MiB


def test_a_problem_found_further_in_moves_with_its_part_and_survives_json():
    problem = rules.UNTERMINATED_QUOTE.problem(line=3, record=2)
    assert problem.moved(lines=10, records=5) == dataclasses.replace(problem, line=13, record=7)
    assert rules.Problem.from_dict(problem.to_dict()) == problem
    assert rules.NO_ROWS.problem().moved(lines=4, records=1).line is None


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("orders.csv.gz", ["Decompress it first", "name it 'orders.csv'"]),
        ("orders.CSV.GZ", ["Decompress it first", "name it 'orders.csv'"]),
        ("orders.txt", ["Rename the file so that it ends in .csv"]),
        ("orders", ["Rename the file so that it ends in .csv"]),
    ],
)
def test_the_file_name_problem_promises_no_option_the_operators_lack(name, words):
    """There is no argument to send a file under another name (yet): the message must not offer one."""
    problem = rules.check_file_name(name)
    assert problem is not None and problem.code == "file-name"
    assert "pass a name" not in problem.message and "(or " not in problem.message
    for word in words:
        assert word in problem.message, problem.message


def test_a_byte_rule_is_one_declaration_both_kernels_and_the_exact_read_apply(scan_kernel, tmp_path, monkeypatch):
    """A new byte-level rule needs no kernel change: the kernels stop on its bytes and the exact read words it."""
    form_feed = rules.Rule("form-feed", "bytes", "byte 0x{byte:02X} is a form feed; remove it.", stops_on=b"\x0c")
    monkeypatch.setattr(rules, "BYTE_RULES", (*rules.BYTE_RULES, form_feed))
    monkeypatch.setattr(rules, "STOP_BYTES", rules.STOP_BYTES + form_feed.stops_on)
    path = tmp_path / "data.csv"
    path.write_bytes(b"a,b\n" + b"1,2\n" * 1000 + b"3,\x0c4\n" + b"5,6\n")
    report = validate_csv(path)
    assert [(p.code, p.line, p.message) for p in report.errors] == [
        ("form-feed", 1002, "byte 0x0C is a form feed; remove it.")
    ]
    assert report.rows == 1002


def test_every_rule_is_declared_once_with_a_known_scope():
    assert {r.looks_at for r in rules.RULES} <= {"name", "size", "start", "header", "records", "bytes"}
    assert rules.STOP_BYTES == b"\x00"  # the C kernel's stop table, built from the rules
    assert all(r.looks_at == "bytes" for r in rules.BYTE_RULES)


def test_where_a_rule_looks_decides_whether_the_kernels_stop_on_its_bytes():
    """Issue 39: ``looks_at`` was read by nothing; now only a rule that looks at the bytes may stop the kernels."""
    with pytest.raises(ValueError, match="looks at the bytes, not at the records"):
        rules.Rule("stray", "records", "a stray byte", stops_on=b"\x01")
    with pytest.raises(ValueError, match="looks at 'everywhere'"):
        rules.Rule("stray", "everywhere", "a stray byte")
    assert rules.BYTE_RULES and all(r.looks_at == "bytes" and r.stops_on for r in rules.BYTE_RULES)
