"""import_dataframe against the emulator: the table has the frame's shape, or nothing is sent.

Each test reads back what the emulator made of the upload (rows, column names), the way
a pandas user would check it, and the refusals assert that no request was made.
"""

from __future__ import annotations

import sys

import pytest

from airflow_tables import exceptions as ex


@pytest.fixture(autouse=True)
def _clean_stats(emulator):
    emulator.reset_stats()


def _table(hook, card_id: str) -> tuple[str, int, list[str]]:
    hook.wait_for_processed(None, card_id, poll_interval=0.05, timeout=30)
    table = hook.get_card(None, card_id)
    hook.delete_card(None, card_id)
    return table["CardName"], table["Rows"], [c["ColumnName"] for c in table["Columns"]]


@pytest.fixture
def orders():
    import pandas as pd

    return pd.DataFrame(
        {
            "region": ["North", "South", "North", "East"],
            "channel": ["web", "store", "store", "web"],
            "amount": [10, 20, 30, 40],
        }
    )


def test_the_keys_of_a_groupby_are_columns_and_a_default_index_is_not(hook, orders):
    by_region = orders.groupby("region").sum(numeric_only=True)  # region is the (named) index
    assert _table(hook, hook.import_dataframe(None, by_region, "by_region")) == ("by_region", 3, ["region", "amount"])
    assert _table(hook, hook.import_dataframe(None, orders, "orders")) == ("orders", 4, ["region", "channel", "amount"])


def test_multiindex_columns_are_joined_with_underscores(hook, orders):
    stats = orders.groupby(["region", "channel"]).agg({"amount": ["sum", "max"]})
    assert list(stats.columns) == [("amount", "sum"), ("amount", "max")]
    expected = ["region", "channel", "amount_sum", "amount_max"]
    assert _table(hook, hook.import_dataframe(None, stats, "stats"))[1:] == (4, expected)
    flat = stats.reset_index()  # leaves ("region", "") and ("channel", "")
    assert _table(hook, hook.import_dataframe(None, flat, "flat"))[2] == expected


def test_an_unnamed_index_left_by_a_filter_is_not_uploaded_and_is_logged(hook, orders, capsys):
    kept = orders[orders["amount"] != 30]  # index 0, 1, 3
    assert _table(hook, hook.import_dataframe(None, kept, "kept")) == ("kept", 3, ["region", "channel", "amount"])
    assert "unnamed index level(s) are not uploaded" in capsys.readouterr().out


def test_a_name_that_ends_in_csv_in_any_case_is_kept(hook, orders):
    assert _table(hook, hook.import_dataframe(None, orders, "Daily.CSV"))[0] == "Daily"


def test_whole_number_column_names_are_written_as_digits(hook):
    import pandas as pd

    assert _table(hook, hook.import_dataframe(None, pd.DataFrame([[1, 2], [3, 4]]), "grid"))[1:] == (2, ["0", "1"])


def test_the_validators_warnings_are_logged_and_an_empty_table_keeps_its_columns(hook, orders, capsys):
    none = orders.iloc[0:0]
    assert _table(hook, hook.import_dataframe(None, none, "none")) == ("none", 0, ["region", "channel", "amount"])
    logged = capsys.readouterr().out
    assert "header but no data rows" in logged and "warning" in logged
    assert "validated none.csv: 3 columns, 0 rows" in logged


def _refused(hook, emulator, df, name: str = "t") -> str:
    credits = emulator.credits()
    with pytest.raises((ValueError, TypeError)) as info:
        hook.import_dataframe(None, df, name)
    assert emulator.stats()["requests"] == []
    assert emulator.credits() == credits
    return str(info.value)


@pytest.mark.parametrize(
    ("columns", "words"),
    [
        (["a", None, "c"], "column 2 has no name (None or NaN)"),
        (["a", float("nan")], "column 2 has no name (None or NaN)"),
        (["a", "  "], "column 2 has a blank name"),
        (["a", "Amount", "amount "], "columns 2 ('Amount') and 3 ('amount ') are one name to the service"),
        (["a", 1.5], "column 2 is named 1.5 (float)"),
        (["a", ("x", None)], None),  # a tuple joins to "x": accepted, checked below
    ],
)
def test_column_names_the_service_would_invent_or_change_are_refused(hook, emulator, columns, words):
    import pandas as pd

    df = pd.DataFrame([list(range(len(columns)))], columns=pd.Index(columns, tupleize_cols=False))
    if words is None:
        assert _table(hook, hook.import_dataframe(None, df, "tuple"))[2] == ["a", "x"]
        return
    assert words in _refused(hook, emulator, df)


def test_a_date_named_column_is_refused_with_what_to_do(hook, emulator):
    import pandas as pd

    df = pd.DataFrame({pd.Timestamp("2026-01-01"): [1]})
    assert "df.rename(columns=str)" in _refused(hook, emulator, df)


def test_an_index_level_named_like_a_column_is_refused(hook, emulator, orders):
    assert "same name as a column" in _refused(hook, emulator, orders.set_index(orders["region"].rename("region")))


def test_an_empty_dataframe_is_refused_clearly(hook, emulator):
    import pandas as pd

    message = _refused(hook, emulator, pd.DataFrame())
    assert "no columns" in message and "temporary" not in message and "tmp" not in message


@pytest.mark.parametrize("name", ["", "a/b", "..\\x", ".hidden"])
def test_a_name_that_is_not_a_plain_file_name_is_refused(hook, emulator, orders, name):
    assert "name" in _refused(hook, emulator, orders, name)


def test_something_that_is_not_a_dataframe_is_refused(hook, emulator):
    assert "df must be a pandas DataFrame, not dict" in _refused(hook, emulator, {"a": [1]})


def test_a_frame_the_rules_refuse_names_the_frame_not_a_temporary_file(hook, emulator):
    import pandas as pd

    credits = emulator.credits()
    with pytest.raises(ex.CsvValidationError) as info:
        hook.import_dataframe(None, pd.DataFrame({f"c{i}": [1] for i in range(301)}), "wide")
    assert str(info.value).startswith("the DataFrame for wide.csv would be refused")
    assert emulator.stats()["requests"] == [] and emulator.credits() == credits


def test_without_pandas_the_error_names_the_extra(hook, emulator, monkeypatch):
    from airflow.exceptions import AirflowOptionalProviderFeatureException

    monkeypatch.setitem(sys.modules, "pandas", None)  # what `import pandas` sees where it is not installed
    with pytest.raises(AirflowOptionalProviderFeatureException, match=r"pip install 'airflow-tables\[pandas\]'"):
        hook.import_dataframe(None, object(), "x")
    assert emulator.stats()["requests"] == []


def test_a_frame_and_its_parquet_file_make_the_same_table(hook, emulator, tmp_path):
    """import_dataframe writes by the Parquet conversion's rules (docs/sources.md): the same bytes reach the service."""
    import pandas as pd

    frame = pd.DataFrame(
        {
            "region": ["north", "south, east", 'the "west"'],
            "amount": [100.0, 0.1, float("nan")],
            "count": [3, 0, -7],
            "paid": [True, False, True],
            "at": pd.to_datetime(["2026-11-29 12:30:00", "2026-11-29 00:00:05", None]).tz_localize("Europe/Paris"),
        }
    )
    frame.to_parquet(tmp_path / "orders.parquet", index=False)

    from_frame = hook.import_dataframe(None, frame, "orders")
    from_file = hook.import_csv(None, tmp_path / "orders.parquet")

    sent = emulator.received_bytes(from_frame)
    assert sent == emulator.received_bytes(from_file)
    assert sent.decode().splitlines() == [
        "region,amount,count,paid,at",
        "north,100,3,true,2026-11-29T12:30:00+01:00",
        '"south, east",0.1,0,false,2026-11-29T00:00:05+01:00',
        '"the ""west""",,-7,true,',
    ]
