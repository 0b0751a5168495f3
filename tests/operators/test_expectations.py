"""``expectations=`` in real DAG runs (dag.test()) against the emulator: every form, the XCom, failures.

A suite that fails, or cannot be checked, must fail the task without retry and before any
request: the emulator's request log stays empty and no credit is spent.
"""

from __future__ import annotations

import json
import re

import pytest
from tests._dag_files import imported
from tests.operators._runs import imports_since, orders_csv, run, state, xcom


@pytest.fixture(scope="module")
def gx_dags(dags_module):
    """tests/operators/dags/gx_test_dags.py, as installed in Airflow's dags folder by ``dags_module``."""
    return imported("gx_test_dags.py")


@pytest.fixture
def stats(datatables_conn):
    """The emulator's counters before the test's run, to compare with after."""
    datatables_conn.reset_stats()
    return {"imports_accepted": datatables_conn.stats()["imports_accepted"], "credits": datatables_conn.credits()}


def nothing_sent(emulator, before: dict) -> bool:
    return emulator.stats()["requests"] == [] and emulator.credits() == before["credits"]


@pytest.mark.parametrize("form", ["callable", "dict", "json", "suite"])
def test_each_form_passes_then_imports_and_pushes_the_result(gx_dags, datatables_conn, stats, tmp_path, form):
    dag_run = run(gx_dags, f"dt_gx_{form}", file_path=str(orders_csv(tmp_path)))

    assert state(dag_run, "import") == "success"
    assert imports_since(datatables_conn, stats) == 1
    result = xcom(dag_run, "import", key="gx_result")
    assert json.loads(json.dumps(result)) == result  # JSON-able as it is
    assert result["success"] is True
    assert result["statistics"]["unsuccessful_expectations"] == 0
    between = next(e for e in result["expectations"] if e["expectation_type"] == "expect_column_values_to_be_between")
    assert between["kwargs"]["column"] == "amount"
    assert between["result"]["element_count"] == 20 and between["result"]["unexpected_count"] == 0


def test_the_callable_gets_the_context_and_shape_questions_are_answered(gx_dags, datatables_conn, stats, tmp_path):
    dag_run = run(gx_dags, "dt_gx_callable", file_path=str(orders_csv(tmp_path, rows=7)))

    result = xcom(dag_run, "import", key="gx_result")
    observed = {e["expectation_type"]: e["result"].get("observed_value") for e in result["expectations"]}
    assert observed["expect_table_columns_to_match_ordered_list"] == ["order_id", "region", "amount", "note"]
    assert observed["expect_table_row_count_to_be_between"] == 7
    assert result["statistics"]["evaluated_expectations"] == 5


def test_a_failed_suite_fails_without_retry_before_any_request(gx_dags, datatables_conn, stats, tmp_path, capfd):
    negative = orders_csv(tmp_path, amount=-50)  # amounts -50 .. -31
    dag_run = run(gx_dags, "dt_gx_callable", file_path=str(negative))

    ti = dag_run.get_task_instance("import")
    assert str(ti.state) == "failed" and ti.try_number == 1  # retries=1, yet no second try
    assert nothing_sent(datatables_conn, stats)
    result = xcom(dag_run, "import", key="gx_result")
    assert result["success"] is False
    failed = [e for e in result["expectations"] if not e["success"]]
    assert [e["expectation_type"] for e in failed] == ["expect_column_values_to_be_between"]
    assert failed[0]["result"]["unexpected_count"] == 20
    assert failed[0]["result"]["partial_unexpected_list"][:3] == [-50, -49, -48]
    out = capfd.readouterr().out
    assert "4 of 5 met on 20 rows of orders.csv" in out
    assert "expect_column_values_to_be_between(column='amount'" in out
    assert "20 of 20 unexpected (100.0%), e.g. -50, -49, -48, -47, -46" in out
    assert "nothing was uploaded" in out


def test_a_suite_naming_a_missing_column_fails_clearly(gx_dags, datatables_conn, stats, tmp_path, capfd):
    dag_run = run(gx_dags, "dt_gx_missing_column", file_path=str(orders_csv(tmp_path)))

    ti = dag_run.get_task_instance("import")
    assert str(ti.state) == "failed" and ti.try_number == 1
    assert nothing_sent(datatables_conn, stats)
    out = capfd.readouterr().out
    assert "reads column 'amount_usd' (expect_column_values_to_not_be_null) that orders.csv does not have" in out
    assert "its columns, as the service names them: order_id, region, amount, note" in out


def test_an_expectation_that_raises_is_reported_as_gx_does(gx_dags, datatables_conn, stats, tmp_path, capfd):
    """Issue 24 point 15: an expectation GX cannot evaluate is a failed result naming the exception, not a crash."""
    dag_run = run(gx_dags, "dt_gx_raises", file_path=str(orders_csv(tmp_path)))

    ti = dag_run.get_task_instance("import")
    assert str(ti.state) == "failed" and ti.try_number == 1  # no retry: the suite will not change
    assert nothing_sent(datatables_conn, stats)
    result = xcom(dag_run, "import", key="gx_result")
    assert result["success"] is False and result["statistics"]["unsuccessful_expectations"] == 1
    regex, between = result["expectations"]
    assert regex["expectation_type"] == "expect_column_values_to_match_regex" and regex["success"] is False
    assert regex["exception_info"]["raised_exception"] is True
    # pandas 3 says "Invalid regular expression"; pandas 2 passes on Python's re wording.
    reason = re.compile(r"Invalid regular expression|unterminated character set")
    assert reason.search(regex["exception_info"]["exception_message"])
    assert between["success"] is True and between["result"]["element_count"] == 20
    out = capfd.readouterr().out
    assert "expect_column_values_to_match_regex(column='region', regex='([')" in out
    assert re.search(r"could not be evaluated: (Invalid regular expression|unterminated character set)", out)
    assert "KeyError" not in out
