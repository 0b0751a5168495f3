"""The evidence rule, without HTTP: which names are an upload's, and when a read table holds the file."""

from __future__ import annotations

import pytest

from airflow_tables.evidence import FileFacts, stored_names, unlike
from airflow_tables.model import TableDetail


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
