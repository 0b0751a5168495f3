"""One test per row of the seed's state table (section 3), over real HTTP.

The processing delay (a test control) holds a table in *being read* for as long
as a test needs; setting it back to 0 releases it at once.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

NEW_FILE = b"a;b\n1;x\n2;y\n3;z\n4;w\n"


def _summary(client, card_id: str, project_id: str | None = None) -> dict:
    response = client.list(project_id)
    assert response.status_code == 200, response.text
    matches = [c for c in response.json()["Cards"] if c["CardID"] == card_id]
    assert len(matches) == 1, f"{card_id} listed {len(matches)} times"
    return matches[0]


def test_import_without_card_id_creates_a_table_being_read_with_a_new_card_id_for_one_credit(client, emulator):
    emulator.set_processing_delay(60)
    credits = emulator.credits()
    response = client.upload(name="sales_2024.csv")
    assert response.status_code == 200, response.text
    body = response.json()
    assert list(body) == ["Msg", "ExecTime", "Success", "CardID"]
    assert body["Msg"] == "OK" and body["Success"] is True
    assert client.CARD_ID.fullmatch(body["CardID"])
    assert emulator.credits() == credits - 1
    summary = _summary(client, body["CardID"])
    assert summary["Processed"] is False
    assert summary["CardName"] == "sales_2024"
    detail = client.get(body["CardID"]).json()
    assert (detail["Rows"], detail["Columns"], detail["UploadCompletionTime"]) == (0, [], None)


def test_reading_ends_ready_with_completion_time_and_successful_upload(client, emulator):
    emulator.set_processing_delay(60)
    card_id = client.import_ok()
    assert _summary(client, card_id)["Processed"] is False
    emulator.set_processing_delay(0)  # lowering the delay releases the waiting reading
    summary = emulator.wait_until_processed(emulator.project_id, card_id, timeout=10)
    assert summary["SuccessfulUpload"] is True
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", summary["UploadCompletionTime"])
    finished = datetime.strptime(summary["UploadCompletionTime"], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    assert abs(datetime.now(UTC) - finished) < timedelta(minutes=1)
    detail = client.get(card_id).json()
    assert detail["Rows"] == 3
    assert [c["ColumnName"] for c in detail["Columns"]] == ["id", "name", "qty"]


def test_replacing_a_ready_table_keeps_its_card_id_and_switches_data_when_read(client, emulator):
    card_id = client.import_ready(name="stock.csv")
    credits = emulator.credits()
    emulator.set_processing_delay(60)
    response = client.upload(NEW_FILE, name="other_name.csv", card_id=card_id)
    assert response.status_code == 200, response.text
    assert response.json()["CardID"] == card_id
    assert emulator.credits() == credits - 1
    during = client.get(card_id).json()
    assert during["Processed"] is False  # our choice for "Processed during a replacement: not shown"
    assert during["Rows"] == 3 and [c["ColumnName"] for c in during["Columns"]] == ["id", "name", "qty"]
    emulator.set_processing_delay(0)
    emulator.wait_until_processed(emulator.project_id, card_id, timeout=10)
    after = client.get(card_id).json()
    assert (after["Rows"], [c["ColumnName"] for c in after["Columns"]]) == (4, ["a", "b"])
    assert after["CardName"] == "stock" and after["SuccessfulUpload"] is True


def test_replacing_a_table_being_read_is_refused_and_it_stays_being_read(client, emulator):
    emulator.set_processing_delay(60)
    card_id = client.import_ok()
    credits = emulator.credits()
    client.assert_error(client.upload(NEW_FILE, card_id=card_id), 409, card_id, "being read")
    assert emulator.credits() == credits
    assert _summary(client, card_id)["Processed"] is False


def test_deleting_a_ready_table_removes_it_permanently(client, emulator):
    card_id = client.import_ready()
    response = client.delete(card_id)
    assert response.status_code == 200, response.text
    assert response.json() == {"Msg": "OK", "ExecTime": response.json()["ExecTime"], "Success": True}
    assert card_id not in [c["CardID"] for c in client.list().json()["Cards"]]
    client.assert_error(client.get(card_id), 404, card_id)


def test_deleting_a_table_being_read_is_refused_with_409_and_it_stays(client, emulator):
    emulator.set_processing_delay(60)
    card_id = client.import_ok()
    client.assert_error(client.delete(card_id), 409, "being read", "Processed is false")
    assert _summary(client, card_id)["Processed"] is False


def test_deleting_a_table_fed_by_an_active_connection_is_refused_and_it_is_unchanged(client, emulator):
    before = _summary(client, emulator.connector_card_id)
    assert before["LockedFromDelete"] is True and before["ConnectorStatus"] == "active"
    assert before["ConnectorSource"] == "Salesforce"
    client.assert_error(client.delete(emulator.connector_card_id), 409, "LockedFromDelete", "Salesforce")
    assert _summary(client, emulator.connector_card_id) == before


@pytest.mark.parametrize("status", ["paused", "active"])
def test_connector_status_sets_locked_from_delete(fresh_client, fresh_emulator, status):
    fresh_emulator.set_connector_status(fresh_emulator.connector_card_id, "paused")
    fresh_emulator.set_connector_status(fresh_emulator.connector_card_id, status)
    summary = _summary(fresh_client, fresh_emulator.connector_card_id)
    assert (summary["ConnectorStatus"], summary["LockedFromDelete"]) == (status, status == "active")
    response = fresh_client.delete(fresh_emulator.connector_card_id)
    assert response.status_code == (409 if status == "active" else 200), response.text


def test_a_reading_that_fails_ends_ready_with_unsuccessful_upload_and_a_reason(client, emulator):
    emulator.set_fail_readings(1)
    card_id = client.import_ok(name="broken.csv")
    summary = emulator.wait_until_processed(emulator.project_id, card_id, timeout=10)
    assert (summary["Processed"], summary["SuccessfulUpload"]) == (True, False)
    assert summary["UploadCompletionTime"] is not None
    assert "Reading broken.csv failed" in client.get(card_id).json()["Description"]


def test_a_failed_replacement_keeps_the_data_the_table_had(client, emulator):
    card_id = client.import_ready()
    emulator.set_fail_readings(1)
    client.import_ok(NEW_FILE, card_id=card_id)
    summary = emulator.wait_until_processed(emulator.project_id, card_id, timeout=10)
    assert summary["SuccessfulUpload"] is False
    detail = client.get(card_id).json()
    assert detail["Rows"] == 3 and [c["ColumnName"] for c in detail["Columns"]] == ["id", "name", "qty"]
    # and the table can be replaced again once ready
    client.import_ok(NEW_FILE, card_id=card_id)
    assert emulator.wait_until_processed(emulator.project_id, card_id, timeout=10)["SuccessfulUpload"] is True
    assert client.get(card_id).json()["Rows"] == 4
