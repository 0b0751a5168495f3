"""``airflow-tables validate``: its usage errors, its advice in the command line's terms, and the sizes it shows."""

from __future__ import annotations

import json

import pytest

from airflow_tables.cli import main
from airflow_tables.validation import validate_csv

_CP1252 = "name,city\nJosé,Montréal\nFrançois,Trois-Rivières\n"


def _run(capsys, *args: str) -> tuple[int, str]:
    status = main(["validate", *args])
    return status, capsys.readouterr().out


def test_an_unknown_encoding_is_a_usage_error_not_a_traceback(tmp_path, capsys):
    path = tmp_path / "data.csv"
    path.write_text("a\n1\n")
    with pytest.raises(SystemExit) as info:
        main(["validate", "--encoding", "utf8x", str(path)])
    assert info.value.code == 2  # as argparse's own errors
    err = capsys.readouterr().err
    assert "argument --encoding: unknown encoding 'utf8x'" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("content", "args", "advice"),
    [
        (_CP1252.encode("cp1252"), [], "(--encoding cp1252, for example)"),  # a legacy byte in a UTF-8 file
        ("id,name\n1,a\n".encode("utf-16-le"), [], "(--encoding utf-16-le)"),  # UTF-16 nobody declared
        ("id,name\n1,a\n".encode("utf-16-be"), ["--encoding", "utf-16"], "Declare --encoding utf-16-be."),
        ("a,b\n1,café\n".encode(), ["--encoding", "utf-16"], "Leave --encoding out"),  # UTF-8 declared UTF-16
        ("a,b\n1,café\n".encode(), ["--encoding", "cp1252"], "but --encoding cp1252 was declared"),
        (b"a,b\n1,\x81\n", ["--encoding", "cp1252"], "(--encoding ...)"),  # a byte cp1252 does not define
    ],
    ids=["not-utf8", "utf-16-le", "utf-16-no-mark", "utf8-declared-wide", "mojibake", "undecodable"],
)
def test_the_advice_names_the_option_not_the_python_argument(tmp_path, capsys, content, args, advice):
    path = tmp_path / "data.csv"
    path.write_bytes(content)
    _, out = _run(capsys, *args, str(path))
    assert advice in out, out
    assert "encoding=" not in out, out
    _, out = _run(capsys, "--json", *args, str(path))
    messages = [p["message"] for p in json.loads(out)[0]["errors"] + json.loads(out)[0]["warnings"]]
    assert any(advice in m for m in messages) and not any("encoding=" in m for m in messages), messages


def test_a_converted_file_is_shown_with_its_own_size_and_what_the_service_receives(tmp_path, capsys):
    path = tmp_path / "cities.csv"
    path.write_bytes(_CP1252.encode("cp1252"))
    own, sent = path.stat().st_size, len(_CP1252.encode())
    assert own != sent
    status, out = _run(capsys, "--encoding", "cp1252", str(path))
    assert status == 0
    assert f"cp1252, {own} bytes ({sent} as UTF-8)" in out, out
    _, out = _run(capsys, "--json", "--encoding", "cp1252", str(path))
    assert json.loads(out)[0]["size_bytes"] == own
    _, out = _run(capsys, str(tmp_path / "missing.csv"))
    assert "bytes" not in out  # nothing made up for a file that could not be read


@pytest.mark.parametrize(
    ("encoding", "declare", "endian"),
    [
        ("utf-16-le", "utf-16-le", "little-endian"),
        ("utf-16-be", "utf-16-be", "big-endian"),
        ("utf-32-le", "utf-32-le", "little-endian"),
        ("utf-32-be", "utf-32-be", "big-endian"),
    ],
)
def test_utf16_or_32_without_a_mark_is_told_which_byte_order_to_declare(tmp_path, encoding, declare, endian):
    path = tmp_path / "data.csv"
    path.write_bytes("id,city\n1,Zürich\n2,Genève\n".encode(encoding))
    (problem,) = validate_csv(path, encoding=encoding[:6]).errors  # "utf-16" or "utf-32": needs a mark
    assert problem.code == "encoding" and problem.line == 1
    assert "no byte-order mark" in problem.message and endian in problem.message
    assert problem.message.endswith(f"Declare encoding='{declare}'."), problem.message
    # Read on in the order the bytes show, so the rest of the report describes the file.
    assert validate_csv(path, encoding=encoding[:6]).columns == ["id", "city"]
    assert validate_csv(path, encoding=declare).ok


def test_the_rules_word_their_advice_for_the_caller_a_report_serves(tmp_path, monkeypatch):
    """validate_csv(spelling=rules.CLI) words the advice for the command line: no rewriting of Python text after."""
    from airflow_tables import cli
    from airflow_tables.validation import ranges, rules

    assert not hasattr(cli, "_speak_cli") and not hasattr(cli, "re")
    path = tmp_path / "data.csv"
    path.write_bytes(_CP1252.encode("cp1252"))
    (python,) = validate_csv(path).errors
    (spoken,) = validate_csv(path, spelling=rules.CLI).errors
    assert "(encoding='cp1252', for example)" in python.message
    assert "(--encoding cp1252, for example)" in spoken.message and "encoding=" not in spoken.message
    assert (spoken.code, spoken.line) == (python.code, python.line)
    # Found by the second process of a large file's scan: its facts come back through JSON and are worded the same.
    big = tmp_path / "big.csv"
    big.write_bytes(b"name,n\n" + b"abc,1\n" * 40_000 + "Jos\xe9,2\n".encode("latin-1") + b"abc,1\n" * 100)
    monkeypatch.setattr(ranges.kernels.NativeKernel, "parallel_min_bytes", 1024)
    monkeypatch.setattr(ranges.kernels.PythonKernel, "parallel_min_bytes", 1024)
    (far,) = validate_csv(big, spelling=rules.CLI).errors
    assert far.line == 40_002 and "(--encoding cp1252, for example)" in far.message


def test_a_converted_file_reports_its_own_size_to_a_task_log_too(tmp_path):
    """CsvReport.size_bytes is the file's own size (140 bytes, not the 164 it converts to); the task log says both."""
    path = tmp_path / "cities.csv"
    path.write_bytes(_CP1252.encode("cp1252"))
    own, sent = path.stat().st_size, len(_CP1252.encode())
    report = validate_csv(path, encoding="cp1252")
    assert (report.size_bytes, report.converted_bytes) == (own, sent)
    assert report.summary().endswith(f"cp1252, {own} bytes ({sent} as UTF-8): ok")  # the operators' log line
    assert report.to_dict()["size_bytes"] == own
    plain = validate_csv(path)
    assert plain.size_bytes == own and plain.converted_bytes is None


def test_a_missing_extra_is_named_with_the_commands_that_install_it_today(tmp_path, monkeypatch):
    """The emulator's command and import_dataframe name the extra for `make dist`'s wheel, a checkout and an index."""
    import subprocess
    import sys
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src"
    code = f"import sys; sys.path.insert(0, {str(src)!r}); from airflow_tables.emulator.__main__ import main; "
    code += f"sys.exit(main(['--data-dir', {str(tmp_path / 'data')!r}]))"
    emulator = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=30)
    assert emulator.returncode == 1
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` raises ImportError, as where it is missing
    from airflow.exceptions import AirflowOptionalProviderFeatureException

    from airflow_tables.hooks import _dataframe

    with pytest.raises(AirflowOptionalProviderFeatureException) as info:
        _dataframe._pandas()
    for message, extra in ((emulator.stderr, "emulator"), (str(info.value), "pandas")):
        assert f"pip install 'airflow-tables[{extra}]' --find-links dist/" in message  # the wheel make dist built
        assert f"pip install -e '.[{extra}]'" in message  # a checkout
        assert message.count(f"pip install 'airflow-tables[{extra}]'") == 2  # and the index form
