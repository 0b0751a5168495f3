from __future__ import annotations

import pytest

from airflow_tables.hooks.status import TableStatus, find_summary


@pytest.mark.parametrize(
    ("summary", "expected"),
    [
        (None, TableStatus.GONE),
        ({"Processed": False, "SuccessfulUpload": False}, TableStatus.BEING_READ),
        ({"Processed": False, "SuccessfulUpload": True}, TableStatus.BEING_READ),
        ({}, TableStatus.BEING_READ),
        ({"Processed": "true", "SuccessfulUpload": True}, TableStatus.BEING_READ),
        ({"Processed": True, "SuccessfulUpload": True}, TableStatus.READY),
        ({"Processed": True, "SuccessfulUpload": False}, TableStatus.FAILED),
        ({"Processed": True}, TableStatus.FAILED),
        ({"Processed": True, "SuccessfulUpload": "false"}, TableStatus.FAILED),
    ],
)
def test_status_from_summary(summary, expected):
    assert TableStatus.from_summary(summary) is expected
    assert TableStatus.from_summary(summary).is_terminal is (expected is not TableStatus.BEING_READ)


def test_find_summary_picks_the_card_or_none():
    cards = [{"CardID": "CRD-a", "Processed": False}, {"CardID": "CRD-b", "Processed": True}]
    assert find_summary(cards, "CRD-b") == {"CardID": "CRD-b", "Processed": True}
    assert find_summary(cards, "CRD-c") is None
    assert find_summary([], "CRD-a") is None


def test_status_is_a_plain_string_for_xcom_and_trigger_events():
    assert TableStatus("ready") is TableStatus.READY
    assert TableStatus.READY == "ready"


OLD = "2026-01-02T10:00:00"


@pytest.mark.parametrize(
    ("completed", "expected"),
    [
        (None, TableStatus.BEING_READ),
        ("2026-01-02T09:59:59", TableStatus.BEING_READ),
        (OLD, TableStatus.BEING_READ),  # the previous file's "processed"
        ("2026-01-02T10:00:01", TableStatus.READY),
        ("2026-01-03T00:00:00", TableStatus.READY),
    ],
)
def test_a_replacement_is_not_ready_on_the_previous_files_completion(completed, expected):
    summary = {"Processed": True, "SuccessfulUpload": True, "UploadCompletionTime": completed}
    assert TableStatus.from_summary(summary, replaced_after=OLD) is expected
    assert TableStatus.from_summary(summary) is TableStatus.READY


def test_replaced_after_does_not_hide_gone_or_being_read():
    assert TableStatus.from_summary(None, replaced_after=OLD) is TableStatus.GONE
    assert TableStatus.from_summary({"Processed": False}, replaced_after=OLD) is TableStatus.BEING_READ
    failed = {"Processed": True, "SuccessfulUpload": False, "UploadCompletionTime": "2026-01-02T10:00:05"}
    assert TableStatus.from_summary(failed, replaced_after=OLD) is TableStatus.FAILED


def test_describe_names_the_table():
    for status in TableStatus:
        assert "CRD-1" in status.describe("CRD-1")
    assert "SuccessfulUpload" in TableStatus.FAILED.describe("CRD-1")
