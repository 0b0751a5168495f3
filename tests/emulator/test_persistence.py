"""State survives the process: kill -9 at any moment loses no table, and readings resume.

Every test runs its own emulator (``fresh_emulator``) because it kills it.
"""

from __future__ import annotations

import socket
import time

NEW_FILE = b"a;b\n1;x\n2;y\n3;z\n4;w\n"


def _details(client) -> dict[str, dict]:
    cards = client.list().json()["Cards"]
    return {c["CardID"]: {k: v for k, v in client.get(c["CardID"]).json().items() if k != "ExecTime"} for c in cards}


def test_kill_9_loses_no_table_credit_or_connector_status(fresh_client, fresh_emulator):
    emu = fresh_emulator
    first = fresh_client.import_ready(name="first.csv")
    fresh_client.import_ready(NEW_FILE, name="second.csv")
    fresh_client.import_ready(NEW_FILE, card_id=first)
    emu.set_connector_status(emu.connector_card_id, "paused")
    before, credits, url = _details(fresh_client), emu.credits(), emu.base_url
    assert len(before) == 3 and credits == 997

    emu.kill()
    emu.restart()

    assert emu.base_url == url
    assert _details(fresh_client) == before
    assert emu.credits() == credits
    assert before[emu.connector_card_id]["ConnectorStatus"] == "paused"


def test_kill_9_during_reading_then_restart_the_table_is_there_and_finishes(fresh_client, fresh_emulator):
    emu = fresh_emulator
    emu.set_processing_delay(60)
    card_id = fresh_client.import_ok(NEW_FILE, name="interrupted.csv")
    assert fresh_client.get(card_id).json()["Processed"] is False
    credits = emu.credits()

    emu.kill()
    emu.restart()  # started with the same delay: the table is still being read

    summary = fresh_client.get(card_id).json()
    assert (summary["Processed"], summary["CardName"]) == (False, "interrupted")
    emu.set_processing_delay(0)
    summary = emu.wait_until_processed(emu.project_id, card_id, timeout=10)
    assert summary["SuccessfulUpload"] is True
    detail = fresh_client.get(card_id).json()
    assert detail["Rows"] == 4 and [c["ColumnName"] for c in detail["Columns"]] == ["a", "b"]
    assert emu.credits() == credits  # resuming does not charge again


def test_an_interrupted_reading_whose_file_is_gone_ends_failed_not_stuck(fresh_client, fresh_emulator):
    emu = fresh_emulator
    emu.set_processing_delay(60)
    card_id = fresh_client.import_ok(name="lost.csv")
    emu.kill()
    for path in (emu.data_dir / "files").iterdir():
        path.unlink()
    emu.processing_delay = 0
    emu.restart()
    summary = emu.wait_until_processed(emu.project_id, card_id, timeout=10)
    assert summary["SuccessfulUpload"] is False
    assert "no longer in the emulator's data directory" in fresh_client.get(card_id).json()["Description"]


def test_an_upload_cut_short_costs_nothing_and_leaves_no_file(fresh_client, fresh_emulator):
    emu = fresh_emulator
    body = (
        b'--XyZ\r\nContent-Disposition: form-data; name="ProjectID"\r\n\r\n' + emu.project_id.encode() + b"\r\n"
        b'--XyZ\r\nContent-Disposition: form-data; name="File"; filename="cut.csv"\r\n'
        b"Content-Type: text/csv\r\n\r\nid,name\n1,a\n"
    )
    with fresh_client.costs_nothing():
        with socket.create_connection(("127.0.0.1", emu.port)) as sock:
            sock.sendall(
                b"POST /v1.0/data/import HTTP/1.1\r\nHost: x\r\nX-API-Key: " + emu.api_key.encode() + b"\r\n"
                b"Content-Type: multipart/form-data; boundary=XyZ\r\n"
                b"Content-Length: %d\r\n\r\n" % (len(body) + 100_000) + body
            )
        # the server notices the disconnect and removes the partial file
        files = emu.data_dir / "files"
        deadline = time.monotonic() + 10
        while list(files.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert fresh_client.list().status_code == 200
    assert [c for c in fresh_client.list().json()["Cards"] if c["CardName"] == "cut"] == []


def test_files_no_table_points_to_are_removed_at_start(fresh_client, fresh_emulator):
    emu = fresh_emulator
    card_id = fresh_client.import_ready()
    emu.kill()
    stray = emu.data_dir / "files" / "0123456789abcdef.csv"
    stray.write_bytes(b"a\n1\n")
    emu.restart()
    assert not stray.exists()
    assert fresh_client.get(card_id).json()["Rows"] == 3  # the table's own file is kept


def test_a_changed_balance_in_the_config_resets_the_stored_credits(fresh_client, fresh_emulator):
    emu = fresh_emulator
    fresh_client.import_ok()
    emu.restart()
    assert emu.credits() == 999  # unchanged config: the spent credit stays spent
    emu.config["organisations"][emu.organisation]["credits"] = 5
    emu.restart()
    assert emu.credits() == 5
