"""A file still being written is retried, not failed for good (issue 37, point 7).

A writer that has not finished leaves the last record cut short. The second release's
retry imported the finished file; the third failed it for good as malformed. Now a local
file whose only problem is a cut last record and that changed moments before it was read
fails the try with ``CsvUnfinishedError`` (retried); the same file untouched for an hour is
malformed, and fails for good.
"""

from __future__ import annotations

import os
import time

import pytest
from tests.operators._runs import imports_since, orders_csv, run, xcom

#: Where the writer stopped: inside a quoted field, and between two fields of the last record.
CUTS = {"inside a quote": b'5,North,14,"a', "between fields": b"5,North"}


def cut_file(tmp_path, cut: bytes):
    """``orders.csv`` of five rows as its writer left it when it had written up to ``cut``; and the rest."""
    path = orders_csv(tmp_path, rows=5)
    whole = path.read_bytes()
    end = whole.rindex(cut) + len(cut)
    path.write_bytes(whole[:end])
    return path, whole[end:].decode()


@pytest.mark.parametrize("rows", ["", "_quarantine", "_declared"], ids=["whole", "quarantine", "declared types"])
@pytest.mark.parametrize("cut", CUTS.values(), ids=CUTS.keys())
def test_a_file_still_being_written_is_retried_and_imported_whole(
    dags_module, datatables_conn, stats, tmp_path, capfd, cut, rows
):
    emulator = datatables_conn
    path, rest = cut_file(tmp_path, cut)

    dag_run = run(dags_module, f"dt_import_unfinished{rows}", file_path=str(path), rest=rest)

    ti = dag_run.get_task_instance("import")
    out = capfd.readouterr().out
    assert str(ti.state) == "success" and ti.try_number == 2, out[-3000:]
    assert f"{path} looks unfinished" in out and "its last record is cut short" in out
    assert imports_since(emulator, stats) == 1
    assert stats["credits"] - emulator.credits() == 1
    table = next(c for c in emulator.list_cards() if c["CardID"] == xcom(dag_run, "import"))
    assert table["Rows"] == 5  # the whole file, as the writer finished it


def test_a_cut_file_untouched_for_an_hour_is_malformed_and_fails_for_good(
    dags_module, datatables_conn, stats, tmp_path, capfd
):
    emulator = datatables_conn
    path, _ = cut_file(tmp_path, CUTS["between fields"])
    an_hour_ago = time.time() - 3600
    os.utime(path, (an_hour_ago, an_hour_ago))

    dag_run = run(dags_module, "dt_import_unfinished", file_path=str(path), rest="")

    ti = dag_run.get_task_instance("import")
    out = capfd.readouterr().out
    assert str(ti.state) == "failed" and ti.try_number == 1, out[-3000:]  # not retried
    assert "would be refused or misread" in out and "record 6 (line 6) has 2 fields" in out
    assert "looks unfinished" not in out
    assert imports_since(emulator, stats) == 0
    assert emulator.credits() == stats["credits"]
