from __future__ import annotations

import pytest

from airflow_tables.model import Column, TableDetail, TableStatus, TableSummary, TableWatch, cards_of, check_wait

BEING, READY = TableStatus.BEING_READ, TableStatus.READY


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


def test_status_is_a_plain_string_for_xcom_and_trigger_events():
    assert TableStatus("ready") is TableStatus.READY
    assert TableStatus.READY == "ready"


OLD = "2026-01-02T10:00:00"
READ = {"Processed": False, "SuccessfulUpload": False, "UploadCompletionTime": OLD}


def done(completed, ok=True):
    return {"Processed": True, "SuccessfulUpload": ok, "UploadCompletionTime": completed}


def walk(watch, *summaries):
    """Feed a watch one summary after another, as a waiter does; return the statuses it decided."""
    statuses = []
    for summary in summaries:
        look = watch.observe(summary)
        statuses.append(look.status)
        watch = look.watch
    return statuses


def test_a_new_table_is_read_then_ready():
    assert walk(TableWatch("CRD-1"), READ, READ, done(OLD)) == [BEING, BEING, READY]


@pytest.mark.parametrize(
    ("completed", "expected"),
    [
        (None, TableStatus.BEING_READ),
        ("2026-01-02T09:59:59", TableStatus.BEING_READ),
        (OLD, TableStatus.BEING_READ),  # the previous file's "processed"
        ("2026-01-02T10:00:01", TableStatus.READY),
        ("2026-01-03T00:00:00", TableStatus.READY),
        ("not a time", TableStatus.READY),  # unparsable: compared as text ("n" > "2")
    ],
)
def test_a_replacement_is_not_ready_on_the_previous_files_completion(completed, expected):
    assert TableWatch("CRD-1", replaced_after=OLD).observe(done(completed)).status is expected
    assert TableWatch("CRD-1").observe(done(completed)).status is TableStatus.READY


def test_a_replacement_read_within_the_same_second_is_ready_once_seen_being_read():
    # The previous read finished at OLD; the new one is seen in progress, then finishes at OLD too.
    assert walk(TableWatch("CRD-1", OLD), done(OLD), READ, done(OLD)) == [BEING, BEING, READY]


def test_a_replacement_never_seen_being_read_waits_for_a_later_completion():
    # Without seeing the read, an equal completion time is the previous file's (see REPLACEMENT_SPACING).
    assert walk(TableWatch("CRD-1", OLD), done(OLD), done(OLD), done("2026-01-02T10:00:02")) == [BEING, BEING, READY]


def test_the_watch_forgets_replaced_after_once_the_new_file_is_seen():
    look = TableWatch("CRD-1", OLD).observe(READ)
    assert look.watch == TableWatch("CRD-1", None)
    assert TableWatch("CRD-1", OLD).observe(done(OLD)).watch == TableWatch("CRD-1", OLD)


@pytest.mark.parametrize("replaced_after", [None, OLD])
def test_failure_and_gone_end_every_wait(replaced_after):
    watch = TableWatch("CRD-1", replaced_after)
    assert watch.observe(None).status is TableStatus.GONE
    assert walk(watch, READ, done("2026-01-02T10:00:05", ok=False)) == [BEING, TableStatus.FAILED]


@pytest.mark.parametrize(
    "summary",
    [
        "Processed",  # not an object at all
        ["Processed", True],
        {"Processed": "true", "SuccessfulUpload": True},
        {"Processed": 1, "SuccessfulUpload": True},
        {"SuccessfulUpload": True},
    ],
)
def test_malformed_summaries_read_as_still_being_read(summary):
    look = TableWatch("CRD-1").observe(summary)
    assert look.status is TableStatus.BEING_READ and not look.status.is_terminal
    assert look.summary is None or isinstance(look.summary, dict)


def test_a_look_copies_the_summary_and_says_what_it_saw():
    summary = done(OLD)
    look = TableWatch("CRD-1").observe(summary)
    summary["Rows"] = 5
    assert "Rows" not in look.summary
    assert look.message == "table CRD-1 is ready"


def test_describe_names_the_table_and_the_department():
    for status in TableStatus:
        assert "CRD-1" in status.describe("CRD-1")
    assert "SuccessfulUpload" in TableStatus.FAILED.describe("CRD-1")
    assert TableStatus.GONE.describe("CRD-1", "PRJ-9").endswith("in department PRJ-9")
    assert [s.label for s in TableStatus] == ["Being read", "Ready", "Failed", "Gone"]


@pytest.mark.parametrize(
    ("poll_interval", "timeout", "wrong"),
    [
        (0, 10, "poll_interval"),
        (-1, 10, "poll_interval"),
        (True, 10, "poll_interval"),
        ("5", 10, "poll_interval"),
        (1, 0, "timeout"),
        (1, -5, "timeout"),
        (1, "60", "timeout"),
    ],
)
def test_wait_settings_that_spin_or_never_wait_are_refused(poll_interval, timeout, wrong):
    with pytest.raises(ValueError, match=wrong):
        check_wait(poll_interval, timeout)


def test_wait_settings_that_work():
    check_wait(0.05, None)
    check_wait(30, 3600.0)


# -- the typed summary and detail -------------------------------------------------------------------

SUMMARY = {
    "CardID": "CRD-1",
    "CardName": "orders",
    "Rows": 3,
    "Domain": "sales",
    "Processed": True,
    "SuccessfulUpload": True,
    "ConnectorSource": "",
    "ConnectorStatus": None,
    "UploadCompletionTime": "2026-11-25T10:00:00",
    "LockedFromDelete": False,
}


def test_a_summary_reads_every_field_of_the_seed():
    table = TableSummary.from_json(SUMMARY)
    assert table == TableSummary("CRD-1", "orders", 3, "sales", True, True, None, None, "2026-11-25T10:00:00", False)
    assert table.status is TableStatus.READY and not table.fed_by_live_connection


@pytest.mark.parametrize(
    ("field", "value", "attribute"),
    [
        ("Processed", "true", "processed"),  # a string is not a JSON boolean
        ("Rows", "3", "rows"),
        ("Rows", True, "rows"),  # bool is an int in Python, not a count
        ("LockedFromDelete", 1, "locked_from_delete"),
        ("UploadCompletionTime", "", "completion_time"),
    ],
)
def test_a_field_of_the_wrong_type_reads_as_unknown(field, value, attribute):
    assert getattr(TableSummary.from_json({**SUMMARY, field: value}), attribute) is None


def test_a_summary_without_a_card_id_is_refused():
    with pytest.raises(ValueError, match="CardID"):
        TableSummary.from_json({"CardName": "orders"})


@pytest.mark.parametrize(
    ("changes", "fed"),
    [({"LockedFromDelete": True}, True), ({"ConnectorStatus": "active"}, True), ({"ConnectorStatus": "paused"}, False)],
)
def test_a_live_connection_is_seen_from_either_field(changes, fed):
    assert TableSummary.from_json({**SUMMARY, **changes}).fed_by_live_connection is fed


def test_a_detail_reads_its_description_and_columns():
    detail = TableDetail.from_json(
        {
            **SUMMARY,
            "Description": "Orders by region",
            "Columns": [
                {"ColumnName": "id", "DataType": "long", "ColumnDescription": "the order"},
                "not a record",
            ],
        }
    )
    assert detail.description == "Orders by region" and detail.rows == 3
    assert detail.columns == (Column("id", "long", "the order"), Column(None))


def test_statuses_carry_their_label_and_the_order_people_read_them_in():
    assert [s.label for s in sorted(TableStatus, key=lambda s: s.rank)] == ["Failed", "Being read", "Ready", "Gone"]


def test_a_listing_is_read_only_when_every_entry_names_its_table():
    assert cards_of({"Cards": [SUMMARY]}) == [SUMMARY]
    assert cards_of({"Cards": [SUMMARY, {"CardName": "x"}]}) is None
    assert cards_of({"Cards": "nope"}) is None
