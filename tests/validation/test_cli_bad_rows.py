"""``airflow-tables validate --rejects/--max-bad-rows/--max-bad-fraction``: the operators' quarantine, previewed.

The command decides what ``on_bad_rows="quarantine"`` would (what is sent, what is set aside,
whether a threshold refuses the file) on real files, writing the real rejects file, and needs
no service to do it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_tables.cli import main

GOOD = "order_id,region,amount\n1,north,3\n2,south,6\n"
SHORT = "3,east\n"  # one field short
NUL = "4,we\x00st,12\n"
LAST = "5,north,15\n"
ORDERS = GOOD + SHORT + NUL + LAST  # 5 data rows, 2 of them bad
REJECTS = (
    "line,byte_offset,code,message,column,record\n"
    f'4,{len(GOOD)},field-count,the row has 2 fields; the header has 3,,"3,east"\n'
    f'5,{len(GOOD + SHORT)},nul-byte,the row holds a NUL byte (0x00) at byte 5 of it,,"4,we\\x00st,12"\n'
)
SRC = Path(__file__).resolve().parents[2] / "src"


def _orders(tmp_path: Path, name: str = "orders.csv", content: str = ORDERS) -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode())
    return path


def _run(capsys, *args: str) -> tuple[int, str]:
    status = main(["validate", *args])
    return status, capsys.readouterr().out


def test_the_preview_writes_the_rejects_and_reports_the_good_rows(tmp_path, capsys):
    path = _orders(tmp_path)
    status, out = _run(capsys, "--max-bad-rows", "2", str(path))
    rejects = tmp_path / "orders.rejects.csv"  # beside the file, as the operators put it
    assert status == 0, out
    assert rejects.read_text(encoding="utf-8") == REJECTS
    good_bytes = len(GOOD + LAST)
    assert out.splitlines() == [
        f"{path}: OK",
        f"  3 columns, 3 rows, comma-separated, utf-8, {good_bytes} bytes",  # what would be sent
        "  columns: order_id, region, amount",
        f"  bad rows: set aside 2 of 5 data rows (field-count: 1, nul-byte: 1) in {rejects}",
    ]


def test_more_bad_rows_than_max_bad_rows_refuse_the_file_and_say_where_they_are(tmp_path, capsys):
    path = _orders(tmp_path)
    target = tmp_path / "rejects" / "today.csv"
    target.parent.mkdir()
    status, out = _run(capsys, "--max-bad-rows", "1", "--rejects", str(target), str(path))
    assert status == 1, out
    assert f"{path}: REFUSED" in out
    assert "error: 2 of the 5 data rows are bad (40.00%), over max_bad_rows=1; nothing was sent. " in out
    assert f"The bad rows are listed in {target}." in out
    assert target.read_text(encoding="utf-8") == REJECTS  # written, so the person can see them
    assert not (tmp_path / "orders.rejects.csv").exists()  # --rejects, not beside the file


def test_max_bad_fraction_through_the_installed_command(tmp_path):
    """The console script a person runs: its exit status and JSON, in a process of its own."""
    path = _orders(tmp_path)
    command = Path(sys.executable).with_name("airflow-tables")
    assert command.exists(), f"{command}: install the package (make setup) for its console script"

    def run(fraction: str) -> tuple[int, dict]:
        done = subprocess.run(
            [str(command), "validate", "--json", "--max-bad-fraction", fraction, str(path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.stderr == "", done.stderr
        (report,) = json.loads(done.stdout)
        return done.returncode, report

    status, report = run("0.25")  # 2 of 5 is 0.4
    assert status == 1 and not report["ok"]
    (error,) = report["errors"]
    assert error["code"] == "too-many-bad-rows"
    assert "2 of the 5 data rows are bad (40.00%), over max_bad_fraction=0.25" in error["message"]
    rejects = str(tmp_path / "orders.rejects.csv")
    assert rejects in error["message"]
    assert report["bad_rows"] == {"count": 2, "rejects": rejects, "by_code": {"field-count": 1, "nul-byte": 1}}
    assert Path(rejects).read_text(encoding="utf-8") == REJECTS

    status, report = run("0.4")  # at the threshold, not over it: the good rows would be sent
    assert status == 0 and report["ok"] and report["rows"] == 3
    assert report["bad_rows"]["count"] == 2


def test_a_clean_file_writes_no_rejects(tmp_path, capsys):
    path = _orders(tmp_path, content=GOOD)
    status, out = _run(capsys, "--rejects", str(tmp_path / "out.csv"), str(path))
    assert status == 0, out
    assert "  bad rows: no bad row among the 2 data rows" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["orders.csv"]  # no rejects, no temporary file left


def test_json_gives_each_report_its_bad_rows(tmp_path, capsys):
    bad = _orders(tmp_path)
    clean = _orders(tmp_path, "clean.csv", GOOD)
    status, out = _run(capsys, "--json", "--max-bad-rows", "5", str(bad), str(clean))
    assert status == 0
    reports = json.loads(out)
    assert [r["path"] for r in reports] == [str(bad), str(clean)]
    assert reports[0]["bad_rows"] == {
        "count": 2,
        "rejects": str(tmp_path / "orders.rejects.csv"),
        "by_code": {"field-count": 1, "nul-byte": 1},
    }
    assert reports[0]["rows"] == 3
    assert reports[1]["bad_rows"] == {"count": 0, "rejects": None, "by_code": {}}
    # Without the options the command is as it was: the first bad row refuses the file, no rejects, no key.
    (tmp_path / "orders.rejects.csv").unlink()
    status, out = _run(capsys, "--json", str(bad))
    (report,) = json.loads(out)
    assert status == 1 and "bad_rows" not in report
    assert sorted(e["code"] for e in report["errors"]) == ["nul-byte", "ragged-rows"]
    assert not (tmp_path / "orders.rejects.csv").exists()


def test_a_file_in_a_declared_encoding_is_staged_and_its_rejects_go_beside_it(tmp_path, capsys):
    path = tmp_path / "cities.csv"
    path.write_bytes("name,city\nJosé,Montréal\nFrançois\nZoë,Genève\n".encode("cp1252"))
    status, out = _run(capsys, "--encoding", "cp1252", "--max-bad-rows", "1", str(path))
    assert status == 0, out
    rejects = tmp_path / "cities.rejects.csv"  # beside the file as given, not the staged copy
    assert f"set aside 1 of 3 data rows (field-count: 1) in {rejects}" in out
    (row,) = rejects.read_text(encoding="utf-8").splitlines()[1:]
    assert row.endswith(",François")  # the row as the service would have received it: UTF-8


def test_a_file_refused_whole_sets_nothing_aside(tmp_path, capsys):
    path = _orders(tmp_path)
    status, out = _run(capsys, "--max-columns", "2", "--max-bad-rows", "5", str(path), str(tmp_path / "gone.csv"))
    assert status == 1
    assert out.count("  bad rows: none set aside: the file is refused as a whole") == 2, out
    assert "the service takes at most 2" in out and "cannot read" in out
    assert not (tmp_path / "orders.rejects.csv").exists()


@pytest.mark.parametrize(
    ("args", "files", "message"),
    [
        (["--rejects", "out.csv"], 2, "argument --rejects: one rejects file is for one FILE, and 2 were given"),
        (["--max-bad-rows", "-1"], 1, "argument --max-bad-rows: max_bad_rows must be a whole number >= 0"),
        (["--max-bad-rows", "ten"], 1, "argument --max-bad-rows: not a whole number: 'ten'"),
        (
            ["--max-bad-fraction", "1.5"],
            1,
            "argument --max-bad-fraction: max_bad_fraction must be a number from 0 to 1",
        ),
        (["--max-bad-fraction", "-0.1"], 2, "max_bad_fraction must be a number from 0 to 1"),
        (["--rejects", "/no/such/folder/out.csv"], 1, "argument --rejects: /no/such/folder is not a directory"),
    ],
    ids=["rejects-two-files", "negative-count", "not-a-count", "fraction-over-1", "negative-fraction", "no-folder"],
)
def test_usage_errors_stop_before_any_file_is_read(tmp_path, capsys, args, files, message):
    names = [f"{n}.csv" for n in ("one", "two")[:files]]
    paths = [str(_orders(tmp_path, name)) for name in names]
    with pytest.raises(SystemExit) as info:
        main(["validate", *args, *paths])
    assert info.value.code == 2  # as argparse's own errors
    captured = capsys.readouterr()
    assert message in captured.err and "Traceback" not in captured.err, captured.err
    assert captured.out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == names  # nothing written


def test_the_preview_needs_no_service_and_no_airflow(tmp_path):
    """No socket is opened and Airflow is not imported: the preview runs where no service (or Airflow) is."""
    path = _orders(tmp_path)
    code = (
        f"import sys; sys.path.insert(0, {str(SRC)!r}); connects = []\n"
        "sys.addaudithook(lambda event, args: connects.append(args) if event == 'socket.connect' else None)\n"
        "from airflow_tables.cli import main\n"
        f"status = main(['validate', '--max-bad-rows', '2', {str(path)!r}])\n"
        "print(status, connects, 'airflow' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "0 [] False", done.stdout
    assert (tmp_path / "orders.rejects.csv").read_text(encoding="utf-8") == REJECTS
