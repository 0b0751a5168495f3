"""The evidence rule, without HTTP: which names are an upload's, and when a read table holds the file."""

from __future__ import annotations

import json

import pytest

from airflow_tables.evidence import FileFacts, SentImport, candidates, judge, stored_names, unlike
from airflow_tables.model import TableDetail, TableSummary


def _table(rows: int, columns: list[tuple[str, str]]) -> TableDetail:
    return TableDetail.from_json(
        {
            "CardID": "CRD-1",
            "CardName": "orders",
            "Rows": rows,
            "Processed": True,
            "SuccessfulUpload": True,
            "Columns": [{"ColumnName": n, "DataType": t} for n, t in columns],
        }
    )


FACTS = FileFacts(5, ("order_id", "region", "amount"), ("long", "string", "long"))


@pytest.mark.parametrize(
    ("upload", "names"),
    [
        ("orders.csv", {"orders"}),
        ('say "hi".csv', {'say "hi"', "say %22hi%22"}),  # the interface shows neither: both are evidence
        ("back\\slash.csv", {"back\\slash", "back\\\\slash", "slash"}),
        ("Orders.CSV", {"Orders"}),
    ],
)
def test_every_spelling_a_service_may_store_is_the_uploads_name_and_no_other(upload, names):
    assert stored_names(upload) == names


def test_a_table_holding_the_files_rows_names_and_types_is_the_files():
    assert unlike(_table(5, [("order_id", "long"), ("region", "string"), ("amount", "long")]), FACTS) is None


@pytest.mark.parametrize(
    ("table", "why"),
    [
        (_table(6, [("order_id", "long"), ("region", "string"), ("amount", "long")]), "it has 6 rows, the file 5"),
        (_table(5, [("order_id", "long"), ("region", "string")]), "it has 2 columns, the file 3"),
        (
            _table(5, [("order_id", "long"), ("region", "string"), ("units", "long")]),
            "its column 3 is named 'units', the file's 'amount'",
        ),
        (
            _table(5, [("order_id", "long"), ("region", "string"), ("amount", "string")]),
            "its column 'amount' holds string values, the file's long values",
        ),
    ],
)
def test_a_same_shape_sibling_is_told_apart_with_the_reason(table, why):
    assert unlike(table, FACTS) == why


def test_untyped_facts_compare_rows_and_names_only():
    untyped = FileFacts(5, ("order_id", "region", "amount"))
    assert unlike(_table(5, [("order_id", "long"), ("region", "string"), ("amount", "string")]), untyped) is None
    assert (
        unlike(_table(5, [("order_id", "long")]), None) == "the file's rows and columns could not be counted to compare"
    )


@pytest.mark.parametrize(
    "stored",
    [
        None,
        [],
        {"rows": "5", "columns": ["a"]},
        {"rows": True, "columns": ["a"]},
        {"rows": 5, "columns": "a"},
        {"rows": 5, "columns": ["a"], "types": ["long", "long"]},
    ],
)
def test_facts_a_note_did_not_hold_are_none(stored):
    assert FileFacts.from_json(stored) is None


def test_facts_travel_through_a_note_unchanged():
    assert FileFacts.from_json(FACTS.to_json()) == FACTS
    assert FileFacts.from_json(FileFacts(1, ("a",)).to_json()) == FileFacts(1, ("a",))


# -- the note and the judge (issue 39: one home for "a paid import is sent once") ----------------

SENT_AT = "2026-11-29T10:00:00"
NOTE = SentImport("sales", "orders.csv", ("CRD-OLD",), sent_at=SENT_AT, series=1, facts=FACTS)
COLUMNS = [("order_id", "long"), ("region", "string"), ("amount", "long")]


def _summary(card_id: str, name: str = "orders", *, read_at: str | None = "2026-11-29T10:00:05", rows: int = 5):
    fields = {"CardID": card_id, "CardName": name, "Rows": rows, "Processed": read_at is not None}
    if read_at is not None:
        fields |= {"SuccessfulUpload": True, "UploadCompletionTime": read_at}
    return TableSummary.from_json(fields)


def test_a_sent_note_reads_back_as_written_and_fails_closed_otherwise():
    for note in (NOTE, SentImport("sales", card_id="CRD-1", replaced_after="t", answer="CRD-1")):
        assert SentImport.from_json(json.loads(json.dumps(note.to_json()))) == note
    assert SentImport.from_json(None) is None
    for bad in (
        {"project_id": "sales"},
        {"project_id": "sales", "file": "a.csv", "before": [1]},
        [],
        {**NOTE.to_json(), "answer": 1},
    ):
        with pytest.raises(ValueError, match="is not one this provider wrote"):
            SentImport.from_json(bad)


def test_the_one_new_table_named_read_and_shaped_as_the_file_is_proven():
    ours = _summary("CRD-NEW")
    found = candidates(NOTE, [_summary("CRD-OLD"), ours, _summary("CRD-X", "invoices")])
    assert found == [ours]  # the table known before the send and another file's table are no candidates
    verdict = judge(NOTE, [(ours, _detail(ours, COLUMNS))])
    assert verdict.proven == ours and not verdict.nothing_arrived


def test_no_candidate_means_the_file_never_arrived():
    verdict = judge(NOTE, [])
    assert verdict.proven is None and verdict.nothing_arrived


@pytest.mark.parametrize(
    ("table", "columns", "why"),
    [
        (
            _summary("CRD-2", read_at="2026-11-29T09:59:59"),
            COLUMNS,
            "before this import was sent at 2026-11-29T10:00:00",
        ),
        (_summary("CRD-2", read_at=None), COLUMNS, "it is still being read"),
        (_summary("CRD-2", rows=6), COLUMNS, "it has 6 rows, the file 5"),
        (_summary("CRD-2", "ORDERS"), COLUMNS, "its name is not 'orders'"),
        (_summary("CRD-2"), [*COLUMNS[:2], ("amount", "string")], "its column 'amount' holds string values"),
    ],
)
def test_a_doubtful_candidate_is_uncertain_with_its_reason_and_nothing_is_sent(table, columns, why):
    verdict = judge(NOTE, [(table, _detail(table, columns))])
    assert verdict.proven is None and not verdict.nothing_arrived
    sentence = verdict.uncertainty()
    assert why in sentence and "CRD-2" in sentence and "Nothing was imported again (no credit spent)" in sentence


def test_two_matching_candidates_are_uncertain_not_a_guess():
    one, two = _summary("CRD-1"), _summary("CRD-2")
    verdict = judge(NOTE, [(one, _detail(one, COLUMNS)), (two, _detail(two, COLUMNS))])
    assert verdict.proven is None and verdict.uncertainty().count("matches, but so does another") == 2


def test_a_replacement_is_a_candidate_only_once_the_table_shows_a_read_since_the_note():
    note = SentImport("sales", card_id="CRD-1", replaced_after="2026-11-29T09:00:00", sent_at=SENT_AT, facts=FACTS)
    unchanged = _summary("CRD-1", read_at="2026-11-29T09:00:00")
    assert candidates(note, [unchanged]) == [] and candidates(note, []) == []
    refreshed = _summary("CRD-1")
    assert candidates(note, [refreshed]) == [refreshed]
    assert judge(note, [(refreshed, _detail(refreshed, COLUMNS))]).proven == refreshed
    theirs = _summary("CRD-1", rows=7)
    assert "the replacement of CRD-1" in judge(note, [(theirs, None)]).uncertainty()


def _detail(table: TableSummary, columns: list[tuple[str, str]]) -> TableDetail:
    described = [{"ColumnName": n, "DataType": t} for n, t in columns]
    return TableDetail.from_json({"CardID": table.card_id, "Rows": table.rows, "Processed": True, "Columns": described})


def test_a_file_that_could_not_be_counted_proves_nothing():
    uncounted = SentImport("sales", "orders.csv", (), sent_at=SENT_AT)
    table = _summary("CRD-9")
    verdict = judge(uncounted, [(table, _detail(table, COLUMNS))])
    assert verdict.proven is None and "could not be counted" in verdict.uncertainty()
