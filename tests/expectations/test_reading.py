"""The expectations step on real files and a real GX: how columns are typed and read, the forms, the errors."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_tables.expectations import ExpectationsError, check
from airflow_tables.expectations.frames import ColumnReader
from airflow_tables.validation import types as column_types
from airflow_tables.validation import validate_csv

# id: signs and spaces around whole numbers; code: leading zeros next to a code that is not a
# number; amount: numbers whose text order is not their number order; label: "NA" is text;
# blank_ok: empty and whitespace-only cells; huge: past 64 bits, so text.
TYPED = "id,code,amount,label,blank_ok,huge\n1,007,9,NA,  ,9223372036854775808\n 2 ,010,10,x,,1\n+3,x1,100, y ,z,2\n"


def report_of(tmp_path: Path, text: str, name: str = "typed.csv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    report = validate_csv(path)
    assert report.ok, [str(p) for p in report.errors]
    return report


def expectation(kind: str, **kwargs) -> dict:
    return {"type": kind, "kwargs": kwargs}


def suite(name: str, *expectations: dict) -> dict:
    return {"name": name, "expectations": list(expectations)}


def results(outcome) -> dict[str, dict]:
    return {f"{e['expectation_type']}:{e['kwargs'].get('column')}": e for e in outcome.result["expectations"]}


def test_columns_are_typed_as_the_service_types_them(tmp_path):
    report = report_of(tmp_path, TYPED)
    reader = ColumnReader(report, report.columns)

    assert reader.sniff_types() == {
        "id": "long",
        "code": "string",
        "amount": "long",
        "label": "string",
        "blank_ok": "string",
        "huge": "string",
    }
    frame = reader.whole()
    assert frame["id"].tolist() == [1, 2, 3] and str(frame["id"].dtype) == "int64"
    assert frame["code"].tolist() == ["007", "010", "x1"]
    assert frame["label"].tolist() == ["NA", "x", " y "]  # text is kept as written
    assert frame["blank_ok"].isna().tolist() == [True, True, False]  # empty and whitespace-only are blank


def test_a_suite_on_long_columns_compares_numbers_and_on_text_compares_text(tmp_path):
    report = report_of(tmp_path, TYPED)
    outcome = check(
        report,
        suite(
            "typed",
            expectation("expect_column_values_to_be_between", column="amount", max_value=50),
            expectation("expect_column_values_to_be_between", column="id", min_value=1, max_value=3),
            expectation("expect_column_values_to_be_in_set", column="code", value_set=["007", "010"]),
            expectation("expect_column_values_to_not_be_null", column="label"),
            expectation("expect_column_values_to_not_be_null", column="blank_ok"),
        ),
    )

    got = results(outcome)
    amount = got["expect_column_values_to_be_between:amount"]["result"]
    assert amount["unexpected_count"] == 1 and amount["partial_unexpected_list"] == [100]  # 9 < 50 < 100, as numbers
    assert got["expect_column_values_to_be_between:id"]["success"] is True
    assert got["expect_column_values_to_be_in_set:code"]["result"]["partial_unexpected_list"] == ["x1"]
    assert got["expect_column_values_to_not_be_null:label"]["success"] is True  # "NA" is a value
    assert got["expect_column_values_to_not_be_null:blank_ok"]["result"]["unexpected_count"] == 2
    assert outcome.failures == [
        "expect_column_values_to_be_between(column='amount', max_value=50.0): 1 of 3 unexpected (33.3%), e.g. 100",
        "expect_column_values_to_be_in_set(column='code', value_set=['007', '010']): 1 of 3 unexpected (33.3%), "
        "e.g. 'x1'",
        "expect_column_values_to_not_be_null(column='blank_ok'): 2 of 3 unexpected (66.7%)",
    ]


def test_a_long_column_takes_its_type_from_the_first_rows_like_the_service(tmp_path, caplog):
    sample = column_types.sample_rows(2)
    rows = "".join(f"{i},r{i}\n" for i in range(sample)) + "n/a,late\n1.5,later\n7,last\n"
    report = report_of(tmp_path, "n,label\n" + rows, "late.csv")

    with caplog.at_level(logging.WARNING, logger="airflow_tables"):
        outcome = check(
            report, {"name": "late", "expectations": [expectation("expect_column_values_to_not_be_null", column="n")]}
        )

    result = outcome.result["expectations"][0]["result"]
    assert result["element_count"] == sample + 3 and result["unexpected_count"] == 2
    assert "column n is a long column" in caplog.text and "2 later values are not whole numbers" in caplog.text
    assert "'n/a', '1.5'" in caplog.text


def test_shape_and_row_count_are_answered_without_reading_values(tmp_path):
    report = report_of(tmp_path, TYPED)
    outcome = check(
        report,
        suite(
            "shape",
            expectation("expect_table_columns_to_match_ordered_list", column_list=report.columns),
            expectation("expect_table_column_count_to_equal", value=6),
            expectation("expect_table_row_count_to_equal", value=3),
            expectation("expect_column_to_exist", column="not_there"),
        ),
    )

    assert [e["success"] for e in outcome.result["expectations"]] == [True, True, True, False]
    assert "(0 of 6 columns" not in outcome.summary  # nothing read: no data expectation at all
    assert outcome.failures == ["expect_column_to_exist(column='not_there')"]


def test_an_aggregate_suite_reads_its_columns_whole(tmp_path, caplog):
    report = report_of(tmp_path, "k,v,w\n1,a,-\n2,b,-\n2,c,-\n")
    with caplog.at_level(logging.INFO, logger="airflow_tables"):
        outcome = check(
            report,
            suite(
                "agg",
                expectation("expect_column_values_to_be_unique", column="k"),
                expectation("expect_column_values_to_not_be_null", column="v"),
            ),
        )

    assert "2 of 3 columns read whole" in outcome.summary
    assert "need whole columns (expect_column_values_to_be_unique): reading k, v whole" in caplog.text
    unique = outcome.result["expectations"][0]
    assert unique["success"] is False and unique["result"]["partial_unexpected_list"] == [2, 2]


def test_a_file_with_no_rows_meets_row_wise_expectations_vacuously(tmp_path):
    report = report_of(tmp_path, "a,b\n")
    outcome = check(
        report, {"name": "empty", "expectations": [expectation("expect_column_values_to_not_be_null", column="a")]}
    )
    assert outcome.success and outcome.result["expectations"][0]["result"]["element_count"] == 0


def test_every_form(tmp_path):
    import great_expectations as gx

    report = report_of(tmp_path, TYPED)
    between = gx.expectations.ExpectColumnValuesToBeBetween(column="id", min_value=1)
    path = tmp_path / "suite.json"
    path.write_text(
        json.dumps({"name": "from_json", "expectations": [expectation("expect_column_to_exist", column="id")]})
    )
    forms = {
        "suite": gx.ExpectationSuite(name="object", expectations=[between]),
        "one expectation": gx.expectations.ExpectColumnValuesToNotBeNull(column="code"),
        "a list": [gx.expectations.ExpectColumnValuesToNotBeNull(column="code"), between],
        "a callable": lambda context: [gx.expectations.ExpectColumnValuesToNotBeNull(column="code")],
        "a JSON path": str(path),
        "a JSON Path": path,
    }
    for form, value in forms.items():
        outcome = check(report, value)
        assert outcome.success, form
        assert outcome.result["statistics"]["evaluated_expectations"] >= 1, form


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (42, "expectations= gave int; expectations must be an ExpectationSuite"),
        ("/nowhere/suite.json", "cannot read the suite file /nowhere/suite.json"),
        ({"name": "bad", "expectations": [expectation("expect_column_to_exist", column="id"),
                                          {"type": "expect_no_such_thing", "kwargs": {}}]},
         "expectations=: expectation 2 (expect_no_such_thing) is not a valid Great Expectations expectation"),
        ({"expectations": []}, "expectations= is not a valid Great Expectations suite"),
        (lambda context: None, "<lambda>(context) gave NoneType"),
        ({"name": "typo", "expectations": [expectation("expect_column_values_to_not_be_null", column="ID")]},
         "reads column 'ID' (expect_column_values_to_not_be_null) that typed.csv does not have; "
         "its columns, as the service names them: id, code, amount, label, blank_ok, huge"),
    ],
)  # fmt: skip
def test_a_suite_that_cannot_be_checked_says_why(tmp_path, value, message):
    report = report_of(tmp_path, TYPED)
    with pytest.raises(ExpectationsError) as raised:
        check(report, value)
    assert message in str(raised.value)


def test_without_great_expectations_the_error_names_the_extra(tmp_path, monkeypatch):
    report = report_of(tmp_path, TYPED)
    monkeypatch.setitem(sys.modules, "great_expectations", None)  # what an environment without it raises
    with pytest.raises(ExpectationsError, match=r"pip install 'airflow-tables\[gx\]'"):
        check(report, {"name": "s", "expectations": []})


def test_importing_gx_keeps_its_registration_noise_out_of_the_logs():
    code = (
        "import logging; logging.basicConfig(level=logging.INFO)\n"
        "from airflow_tables.expectations._gx import import_gx\n"
        "import_gx()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    logged = out.stdout + out.stderr
    assert "great_expectations" in logged  # GX's other INFO lines still come through
    assert "Skipping registering function" not in logged


def test_a_file_in_a_declared_encoding_is_read_from_its_utf8_copy(tmp_path):
    from airflow_tables.sources import open_source, staged
    from airflow_tables.validation import validate_source

    path = tmp_path / "cities.csv"
    path.write_bytes("city,n\nZürich,1\nGdańsk,2\n".replace("ń", "n").encode("cp1252"))
    with staged(open_source(path, encoding="cp1252")) as copy:
        report = validate_source(copy)
        assert report.ok, [str(p) for p in report.errors]
        outcome = check(
            report,
            suite("cities", expectation("expect_column_values_to_be_in_set", column="city", value_set=["Zürich"])),
            path=copy.local_path,
        )
    assert outcome.result["expectations"][0]["result"]["partial_unexpected_list"] == ["Gdansk"]


def test_a_byte_order_mark_is_not_part_of_the_first_column(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbfid,name\n1,a\n2,b\n")
    report = validate_csv(path)
    outcome = check(report, suite("bom", expectation("expect_column_values_to_be_between", column="id", max_value=1)))
    assert outcome.result["expectations"][0]["result"]["partial_unexpected_list"] == [2]
