"""The whole shared CSV corpus uploaded to the emulator.

For every file: the emulator accepts it exactly when ``validate_csv`` finds no
error (a refused file is 422 and costs nothing). For every file it accepts, its
``Rows`` and ``Columns`` equal ``validate_csv``'s, each column's ``DataType`` is
``validate_csv(..., column_types=True)``'s (one rule, the whole file), and the manifest's counts (or
its plain RFC 4180 reading, the one our rules follow, where the manifest gives
both); files the manifest marks uncertain are checked against ``validate_csv``
only.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from airflow_tables.emulator.testing import EmulatorProcess, make_test_config
from airflow_tables.validation import validate_csv

# The corpus sits beside the repository (../shared); AIRFLOW_TABLES_CORPUS points elsewhere.
CORPUS = Path(os.environ.get("AIRFLOW_TABLES_CORPUS", Path(__file__).resolve().parents[3] / "shared/corpus/csv"))
RECORDS = json.loads((CORPUS / "manifest.json").read_text(encoding="utf-8")) if CORPUS.is_dir() else []

pytestmark = pytest.mark.skipif(not RECORDS, reason=f"the shared CSV corpus is not at {CORPUS}")


@pytest.fixture(scope="module")
def corpus_emulator(tmp_path_factory):
    """An emulator of the module's own, so 113 imports do not spend the shared one's credits."""
    emu = EmulatorProcess(tmp_path_factory.mktemp("corpus"), config=make_test_config(credits=10_000)).start()
    yield emu
    emu.stop()


@pytest.fixture(scope="module")
def uploads(corpus_emulator):
    """Upload every file once; return {file: (status, body, detail or None)}."""
    import httpx

    results = {}
    with httpx.Client(base_url=corpus_emulator.base_url, timeout=60, trust_env=False) as http:
        headers = {"X-API-Key": corpus_emulator.api_key}
        for rec in RECORDS:
            content = (CORPUS / "files" / rec["file"]).read_bytes()
            response = http.post(
                "/v1.0/data/import",
                headers=headers,
                data={"ProjectID": corpus_emulator.project_id},
                files={"File": (rec["file"], content, "text/csv")},
            )
            results[rec["file"]] = [response.status_code, response.json(), None]
        for result in results.values():
            if result[0] == 200:
                card_id = result[1]["CardID"]
                corpus_emulator.wait_until_processed(corpus_emulator.project_id, card_id)
                result[2] = http.get(
                    f"/v1.0/projects/{corpus_emulator.project_id}/cards/{card_id}", headers=headers
                ).json()
    return results


def test_every_corpus_file_was_answered_and_refusals_cost_nothing(uploads, corpus_emulator):
    accepted = sum(1 for status, _, _ in uploads.values() if status == 200)
    assert len(uploads) == len(RECORDS) == 113
    assert corpus_emulator.credits() == 10_000 - accepted
    assert {status for status, _, _ in uploads.values()} <= {200, 422}


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: r["file"])
def test_corpus_file_reads_as_the_validator_and_the_manifest_say(uploads, rec):
    status, body, detail = uploads[rec["file"]]
    path = CORPUS / "files" / rec["file"]
    report = validate_csv(path)
    if not report.ok:
        assert status == 422, body
        assert all(p.message.split(";")[0] in body["Msg"] for p in report.errors)
        return
    assert status == 200, body
    assert detail["Processed"] is True and detail["SuccessfulUpload"] is True
    names = [c["ColumnName"] for c in detail["Columns"]]
    assert (detail["Rows"], names) == (report.rows, report.columns)
    assert len(set(names)) == len(names) and all(n.strip() for n in names)
    assert [c["DataType"] for c in detail["Columns"]] == validate_csv(path, column_types=True).column_types
    if rec["uncertain"]:
        return
    expected = {(rec["columns"], rec["rows"])}
    if "rfc4180" in rec:
        expected.add((rec["rfc4180"]["columns"], rec["rfc4180"]["rows"]))
    assert (len(names), detail["Rows"]) in expected


def test_a_value_past_any_sample_types_the_table_as_the_validator_does(corpus_emulator, tmp_path):
    """The table's DataType is the whole file's: one text value in the last of 30,000 rows makes the column string."""
    import httpx

    content = b"id,n\n" + b"".join(b"%d,%d\n" % (i, i % 7) for i in range(30_000)) + b"30000,late\n"
    path = tmp_path / "late.csv"
    path.write_bytes(content)
    with httpx.Client(base_url=corpus_emulator.base_url, timeout=60, trust_env=False) as http:
        headers = {"X-API-Key": corpus_emulator.api_key}
        response = http.post(
            "/v1.0/data/import",
            headers=headers,
            data={"ProjectID": corpus_emulator.project_id},
            files={"File": ("late.csv", content, "text/csv")},
        )
        card_id = response.json()["CardID"]
        corpus_emulator.wait_until_processed(corpus_emulator.project_id, card_id)
        detail = http.get(f"/v1.0/projects/{corpus_emulator.project_id}/cards/{card_id}", headers=headers).json()
    assert [c["DataType"] for c in detail["Columns"]] == ["long", "string"]
    assert validate_csv(path, column_types=True).column_types == ["long", "string"]
