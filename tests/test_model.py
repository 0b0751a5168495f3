from __future__ import annotations

import itertools

import pytest

from airflow_tables.model import (
    Column,
    RefreshWatch,
    TableDetail,
    TableStatus,
    TableSummary,
    TableWatch,
    by_card_id,
    cards_of,
    check_wait,
)

BEING, READY = TableStatus.BEING_READ, TableStatus.READY
ABSENT = object()  # a field the answer leaves out


def table(**fields) -> TableSummary:
    """A summary read from the service's JSON (``CRD-1``, with ``fields`` and none left ``ABSENT``)."""
    return TableSummary.from_json({"CardID": "CRD-1", **{k: v for k, v in fields.items() if v is not ABSENT}})


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
def test_status_of_a_table(summary, expected):
    seen = None if summary is None else table(**summary)
    assert TableStatus.of(seen) is expected
    assert TableStatus.of(seen).is_terminal is (expected is not TableStatus.BEING_READ)


# Every value the seed's two fields may take, as JSON brings them (and left out).
PROCESSED = [True, False, "true", "false", 1, 0, None, ABSENT]
SUCCESSFUL = [True, False, "true", "false", 1, None, ABSENT]


@pytest.mark.parametrize(("processed", "successful"), list(itertools.product(PROCESSED, SUCCESSFUL)))
def test_one_ladder_every_combination_of_the_seeds_fields_gives_one_status(processed, successful):
    """The summary, the detail, a look and the table's own status agree, and only the JSON ``true`` counts."""
    fields = {"Processed": processed, "SuccessfulUpload": successful, "UploadCompletionTime": OLD}
    expected = BEING if processed is not True else READY if successful is True else TableStatus.FAILED
    summary = table(**fields)
    detail = TableDetail.from_json({"CardID": "CRD-1", **{k: v for k, v in fields.items() if v is not ABSENT}})
    seen = {
        TableStatus.of(summary),
        summary.status,
        detail.status,
        detail.summary.status,
        TableWatch("CRD-1").observe(summary).status,
    }
    assert seen == {expected}


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
        look = watch.observe(table(**summary))
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
    assert TableWatch("CRD-1", replaced_after=OLD).observe(table(**done(completed))).status is expected
    assert TableWatch("CRD-1").observe(table(**done(completed))).status is TableStatus.READY


def test_a_replacement_read_within_the_same_second_is_ready_once_seen_being_read():
    # The previous read finished at OLD; the new one is seen in progress, then finishes at OLD too.
    assert walk(TableWatch("CRD-1", OLD), done(OLD), READ, done(OLD)) == [BEING, BEING, READY]


def test_a_replacement_never_seen_being_read_waits_for_a_later_completion():
    # Without seeing the read, an equal completion time is the previous file's (see REPLACEMENT_SPACING).
    assert walk(TableWatch("CRD-1", OLD), done(OLD), done(OLD), done("2026-01-02T10:00:02")) == [BEING, BEING, READY]


def test_the_watch_forgets_replaced_after_once_the_new_file_is_seen():
    look = TableWatch("CRD-1", OLD).observe(table(**READ))
    assert look.watch == TableWatch("CRD-1", None)
    assert TableWatch("CRD-1", OLD).observe(table(**done(OLD))).watch == TableWatch("CRD-1", OLD)
    assert TableWatch("CRD-1", OLD).observe(table(**done(OLD))).idle_before


@pytest.mark.parametrize("replaced_after", [None, OLD])
def test_failure_and_gone_end_every_wait(replaced_after):
    watch = TableWatch("CRD-1", replaced_after)
    assert watch.observe(None).status is TableStatus.GONE
    assert walk(watch, READ, done("2026-01-02T10:00:05", ok=False)) == [BEING, TableStatus.FAILED]


@pytest.mark.parametrize(
    "summary",
    [
        {"Processed": "true", "SuccessfulUpload": True},
        {"Processed": 1, "SuccessfulUpload": True},
        {"SuccessfulUpload": True},
    ],
)
def test_malformed_summaries_read_as_still_being_read(summary):
    look = TableWatch("CRD-1").observe(table(**summary))
    assert look.status is TableStatus.BEING_READ and not look.status.is_terminal
    assert look.summary == {"CardID": "CRD-1", **summary}  # the dict edge: what the service said


@pytest.mark.parametrize("answer", ["Processed", ["Processed", True], {"Processed": True}, {"CardID": 7}])
def test_an_answer_that_names_no_table_is_not_a_table(answer):
    with pytest.raises(ValueError, match="CardID"):
        TableSummary.from_json(answer)


def test_a_look_copies_the_summary_and_says_what_it_saw():
    summary = {"CardID": "CRD-1", **done(OLD)}
    look = TableWatch("CRD-1").observe(TableSummary.from_json(summary))
    summary["Rows"] = 5
    assert "Rows" not in look.summary and look.table.rows is None
    look.summary["Rows"] = 6  # each read of the edge is a copy
    assert "Rows" not in look.summary
    assert look.message == "table CRD-1 is ready"
    assert TableWatch("CRD-1").observe(None).summary is None


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


# -- the dict edge: to_json gives back what the service said ------------------------------------------

DETAIL = {
    **SUMMARY,
    "Description": "Orders by region",
    "Columns": [{"ColumnName": "id", "DataType": "long", "ColumnDescription": "the order", "Extra": 1}],
    "Unknown": {"a field": "a later service may add"},
}


@pytest.mark.parametrize("body", [SUMMARY, {**SUMMARY, "Processed": "true", "Rows": "3", "Unknown": [1]}, DETAIL])
def test_to_json_returns_exactly_what_was_read(body):
    assert TableSummary.from_json(body).to_json() == body
    assert TableDetail.from_json(body).to_json() == body
    copy = TableSummary.from_json(body).to_json()
    copy["CardID"] = "CRD-2"
    assert TableSummary.from_json(body).card_id == "CRD-1"


def test_a_fetched_tables_summary_is_what_the_list_shows():
    detail = TableDetail.from_json(DETAIL)
    summary = detail.summary
    assert type(summary) is TableSummary and summary == TableSummary.from_json(SUMMARY)
    assert summary.to_json() == {k: v for k, v in DETAIL.items() if k not in ("Description", "Columns")}


def test_a_table_built_in_code_gives_its_known_fields_under_the_services_names():
    built = TableSummary("CRD-1", name="orders", processed=True, rows=0)
    assert built.to_json() == {"CardID": "CRD-1", "CardName": "orders", "Processed": True, "Rows": 0}
    assert TableSummary.from_json(built.to_json()) == built


def test_tables_by_card_id():
    first, second = TableSummary("CRD-1"), TableSummary("CRD-2", rows=2)
    assert by_card_id([first, second]) == {"CRD-1": first, "CRD-2": second}


@pytest.mark.parametrize(
    ("looks", "refreshed"),
    [
        ([done(OLD), done("2026-01-02T10:00:05")], [False, True]),  # baseline, then a later read
        ([done(OLD), READ, done(OLD)], [False, False, True]),  # a read seen, ending in the same second
        ([done(OLD), {"Processed": "true", "UploadCompletionTime": "2026-01-03T00:00:00"}], [False, False]),
        ([done(OLD), done("2026-01-02T10:00:05", ok=False)], [False, False]),  # a failed read
        ([done(OLD), None, done(OLD)], [False, False, False]),  # gone for a look: nothing
    ],
)
def test_a_refresh_watch_reads_the_typed_table(looks, refreshed):
    watch, seen = RefreshWatch("CRD-1"), []
    for summary in looks:
        watch, fired = watch.observe(None if summary is None else table(**summary))
        seen.append(fired)
    assert seen == refreshed


@pytest.mark.parametrize(
    ("served_at", "needed"),
    [
        (None, True),  # the service did not date its answer: wait
        (OLD, True),  # still the second the last read ended in
        ("2026-01-02T10:00:01", False),  # a later second: whatever starts now ends later
        ("2026-01-02T09:59:59", True),  # a clock behind the completion time: no proof, wait
    ],
)
def test_a_replacement_waits_the_spacing_only_while_the_services_clock_is_in_the_last_reads_second(served_at, needed):
    from airflow_tables.model import Look

    look = TableWatch("CRD-1").observe(table(**done(OLD)))
    assert Look(look.status, look.table, look.watch, served_at=served_at).needs_spacing is needed
    assert Look(TableStatus.READY, table(**done(None)), look.watch, served_at="2027-01-01T00:00:00").needs_spacing
