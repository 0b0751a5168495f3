"""The operators check a declared encoding against the bytes as stored (issue 37, point 4).

They validate a staged copy already converted to UTF-8, whose bytes say nothing of the
declaration: a UTF-8 file declared ``cp1252`` was imported as ``ZÃ¼rich`` with "ok" in the
log, and one declared ``utf-16`` drew advice to declare another UTF-16. ``validate_csv``
judged the stored bytes all along; the operators now say what it says.
"""

from __future__ import annotations

from tests.operators._runs import imports_since, run

UTF8_TEXT = "id,city\n1,Zürich\n2,Genève\n"


def test_a_utf8_file_declared_cp1252_is_imported_with_validate_csvs_warning(
    dags_module, datatables_conn, stats, tmp_path, capfd
):
    from airflow_tables.validation import validate_csv

    path = tmp_path / "cities.csv"
    path.write_text(UTF8_TEXT, encoding="utf-8")
    (warning,) = validate_csv(path, encoding="cp1252").warnings

    dag_run = run(dags_module, "dt_import_cp1252", file_path=str(path))

    out = capfd.readouterr().out
    assert str(dag_run.get_task_instance("import").state) == "success", out[-3000:]
    assert warning.code == "mojibake" and "'Zürich'" in warning.message
    assert f"{path}: {warning}" in out  # the task's log carries the warning validate_csv gives
    assert imports_since(datatables_conn, stats) == 1


def test_a_utf8_file_declared_utf16_fails_saying_it_is_utf8(dags_module, datatables_conn, stats, tmp_path, capfd):
    path = tmp_path / "cities.csv"
    path.write_text(UTF8_TEXT, encoding="utf-8")

    dag_run = run(dags_module, "dt_import_utf16", file_path=str(path))

    out = capfd.readouterr().out
    ti = dag_run.get_task_instance("import")
    assert str(ti.state) == "failed" and ti.try_number == 1, out[-3000:]  # final: a retry reads the same bytes
    assert "the file is UTF-8, not utf-16" in out and "Leave encoding= out" in out
    assert "utf-16-le" not in out  # no advice to declare another UTF-16
    assert imports_since(datatables_conn, stats) == 0
