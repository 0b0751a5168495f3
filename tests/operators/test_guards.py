"""The guards before and after a send, as values: each decides on what it is handed, with no HTTP and no Airflow run.

And the table of refusals (``operators/_refusals.py``): which service error ends a task how, and
the final errors, which cross a process (pickle) with their class and message. The same rows
through real DAG runs are in ``test_tables.py``, ``test_safe_writes.py`` and ``test_schema_change.py``.
"""

from __future__ import annotations

import pickle
from datetime import UTC, datetime, timedelta

import pytest

from airflow_tables import exceptions as ex
from airflow_tables.model import Column, TableDetail, TableSummary
from airflow_tables.operators import _refusals
from airflow_tables.operators._backfill import BackfillGuard, holder
from airflow_tables.operators._checks import MappedUpload, ReadCheck, arguments_problem, replaced_already
from airflow_tables.operators._schema import APPROVE, Approval, SchemaGuard, approval_form, resume
from airflow_tables.version_compat import AirflowException, AirflowFailException, AirflowSkipException

KEY = "sk-live-0123456789abcdef"  # what must never be in an error
CARD = "CRD-00000000-0000-4000-8000-000000000001"


# -- arguments ----------------------------------------------------------------------------------------------------


def test_arguments_that_rendered_right_have_no_problem():
    assert arguments_problem("/data/orders.csv", None, False, None, 1.0, 10.0) is None


@pytest.mark.parametrize(
    ("file_path", "card_id", "replaces", "table_name", "says"),
    [
        (None, None, False, None, "file_path is None"),
        (["a.csv", "b.csv"], None, False, None, "map the operator"),
        ("/data/orders.csv\n", None, False, None, "surrounding whitespace"),
        ("/data/orders.csv", "", True, None, "card_id"),
        ("/data/orders.csv", None, False, "d1/orders", "may not hold a slash"),
    ],
)
def test_arguments_that_rendered_wrong_say_what(file_path, card_id, replaces, table_name, says):
    assert says in (arguments_problem(file_path, card_id, replaces, table_name, 1.0, 10.0) or "")


def test_wait_settings_are_part_of_the_arguments():
    assert arguments_problem("/data/orders.csv", None, False, None, 0, 10.0) is not None


# -- reading checked ----------------------------------------------------------------------------------------------


def _detail(rows: int, columns: int) -> TableDetail:
    names = [f"c{i}" for i in range(columns)]
    return TableDetail(CARD, "orders", rows=rows, completion_time="t1", columns=tuple(Column(n) for n in names))


def test_a_read_as_counted_passes_and_one_that_differs_says_both_counts():
    check = ReadCheck(rows=9, columns=4)
    assert check.counted and check.mismatch(_detail(9, 4), "PRJ-1", "orders.csv") is None
    said = check.mismatch(_detail(8, 4), "PRJ-1", "orders.csv")
    assert said is not None
    assert "was read with 8 rows and 4 columns, but validation counted 9 rows and 4 columns in orders.csv" in said
    assert f"table {CARD} (orders) in department PRJ-1" in said


def test_an_unvalidated_file_is_not_compared():
    check = ReadCheck(rows=None, columns=None, policy="warn")
    assert not check.counted and check.mismatch(_detail(1, 1), "PRJ-1", "orders.csv") is None


# -- schema -------------------------------------------------------------------------------------------------------

TABLE = (Column("id", "long"), Column("name", "string"))


def test_allow_new_columns_lets_an_added_column_through_and_refuses_a_retyped_one():
    guard = SchemaGuard("allow_new_columns")
    added = guard.decide(TABLE, ["id", "name", "city"], ["long", "string", "string"])
    assert not added.refused and added.accepted == ["city: added (string)"]
    retyped = guard.decide(TABLE, ["id", "name"], ["string", "string"], empty={"id"})
    assert [d.change for d in retyped.refused] == ["retyped"] and retyped.refused[0].empty
    said = guard.refusal(retyped, "orders.csv", CARD, "orders", "PRJ-1")
    assert f"would change the columns of table {CARD} (orders) in department PRJ-1: id: long -> string" in said


def test_fail_refuses_a_reorder_and_allow_checks_nothing():
    assert SchemaGuard("fail").decide(TABLE, ["name", "id"], ["string", "long"]).shown == [
        "name: moved from column 2 to 1",
        "id: moved from column 1 to 2",
    ]
    assert not SchemaGuard("allow").checks
    assert not SchemaGuard("allow").decide(TABLE, ["x"], None).refused


def test_an_approval_holds_only_for_what_was_shown():
    shown = Approval(CARD, ["id: long -> string"], "t1", "fp1", approved_by="ana")
    assert shown.answers(CARD) and not shown.answers("CRD-other")
    assert shown.changed_since(Approval(CARD, ["id: long -> string"], "t1", "fp1"), "f.csv") == []
    changed = shown.changed_since(Approval(CARD, ["id: long -> string"], "t2", "fp2"), "f.csv")
    assert changed == [
        "the file f.csv is not the one checked (its bytes differ)",
        f"table {CARD} was read again (at t2, not t1)",
    ]


def test_the_answer_is_a_decision_the_operator_acts_on():
    asked = Approval(CARD, ["id: long -> string"], "t1", "fp1")
    approved = resume(asked, {"chosen_options": [APPROVE], "responded_by_user": {"name": "ana"}}, "replace", None)
    assert approved == Approval(CARD, ["id: long -> string"], "t1", "fp1", approved_by="ana")
    with pytest.raises(AirflowFailException, match="ana rejected the change of the columns"):
        resume(asked, {"chosen_options": ["Reject"], "responded_by_user": {"name": "ana"}}, "replace", None)
    with pytest.raises(AirflowFailException, match="nobody answered .* within 1:00:00"):
        resume(asked, {"error": "timed out", "error_type": "timeout"}, "replace", 3600)
    with pytest.raises(AirflowFailException, match="replace: resumed with no schema change on record"):
        resume(None, {}, "replace", None)


def test_the_approval_form_quotes_every_name():
    subject, body = approval_form("[x](http://evil)", TableDetail(CARD, "# heading"), "PRJ-1", ["a: added"], None)
    assert subject == f"Replace table # heading ({CARD}) with a file whose columns changed?"
    assert "`[x](http://evil)`" in body and f"`# heading ({CARD})`" in body and body.endswith("so does no answer.")


# -- backfills ----------------------------------------------------------------------------------------------------

NOW = datetime(2025, 6, 1, tzinfo=UTC)
RECORD = {"logical_date": "2025-05-02T00:00:00+00:00", "dag_id": "d", "run_id": "r", "task_id": "t"}


def test_an_older_run_is_held_back_and_a_newer_or_undated_one_is_not():
    guard = BackfillGuard("skip")
    said = guard.held_back(datetime(2025, 5, 1, tzinfo=UTC), RECORD, "PRJ-1", CARD)
    assert said is not None and "holds newer data: run r of DAG d (task t, logical date 2025-05-02" in said
    assert guard.held_back(datetime(2025, 5, 2, tzinfo=UTC), RECORD, "PRJ-1", CARD) is None  # the same date
    assert guard.held_back(None, RECORD, "PRJ-1", CARD) is None
    assert guard.held_back(datetime(2025, 5, 1, tzinfo=UTC), None, "PRJ-1", CARD) is None
    assert BackfillGuard("replace").held_back(datetime(2025, 5, 1, tzinfo=UTC), RECORD, "PRJ-1", CARD) is None


@pytest.mark.parametrize(
    "logical_date", ["2025-05-02T00:00:00", (NOW + timedelta(days=1)).isoformat(), "yesterday", None]
)
def test_a_record_without_a_zone_or_in_the_future_holds_nothing(logical_date):
    assert holder({**RECORD, "logical_date": logical_date}, NOW) is None
    assert holder(RECORD, NOW) == RECORD


# -- mapped tasks -------------------------------------------------------------------------------------------------


def test_mapped_instances_that_send_alike_are_seen_whatever_their_order():
    mine = MappedUpload("PRJ-1", "orders.csv")
    assert not mine.alike([mine.to_json(), MappedUpload("PRJ-1", "other.csv").to_json()])
    assert mine.alike([MappedUpload("PRJ-1", "orders.csv").to_json(), mine.to_json()])
    assert "import[3]: another map index of this run also imports" in mine.refusal("import", 3)
    assert replaced_already(CARD, [CARD, "CRD-x", CARD]) == 2


# -- refusals: the table, and the final errors across a process ------------------------------------------------


def _refused(action: str, **options) -> _refusals.Refused:
    return _refusals.Refused(action, "datatables_default", "PRJ-1", CARD, "/data/orders.csv", **options)


@pytest.mark.parametrize(
    ("err", "action", "options", "ends", "says"),
    [
        (ex.DataTablesAuthenticationError(401, "unknown key"), "delete", {}, "fail", "does not accept the API key"),
        (ex.DataTablesPermissionError(403, "no"), "import", {}, "fail", "may not import into department PRJ-1"),
        (ex.DataTablesPermissionError(403, "no"), "replace", {}, "fail", "may not replace tables in department"),
        (ex.DataTablesPermissionError(403, "no"), "delete", {}, "fail", "may not delete tables in department"),
        (ex.DataTablesCreditsError(402, "0 left"), "import", {}, "fail", "no import credit left (0 left)"),
        (ex.DataTablesRejectedFileError(422, "bad"), "import", {"validate": False}, "fail", "validate=True finds"),
        (ex.DataTablesBusyError(409, "busy"), "replace", {}, "retry", f"{CARD} stayed busy: busy"),
        (ex.DataTablesBusyError(409, "busy"), "delete", {"if_processing": "fail"}, "fail", "if_processing='fail'"),
        (ex.DataTablesLockedError(409, "locked"), "delete", {"if_locked": "skip"}, "skip", "is locked from delete"),
        (ex.DataTablesLockedError(409, "locked"), "delete", {}, "fail", "or pass if_locked='skip'"),
        (ex.DataTablesConflictError(409, "no"), "replace", {}, "fail", f"the service refused to replace {CARD}: no"),
        (ex.DataTablesConflictError(409, "no"), "delete", {}, "fail", f"the service refused to delete {CARD}: no"),
        (ex.DataTablesNotFoundError(404, ""), "delete", {"missing_ok": True, "where": "department P"}, "succeed", ""),
        (ex.DataTablesNotFoundError(404, ""), "delete", {"where": "department P"}, "fail", "is not in department P"),
        (ex.DataTablesUploadFailedError(None, "read failed", seen=True), "import", {}, "fail", "read failed. Not"),
    ],
)
def test_the_table_says_how_each_refusal_ends_a_task(err, action, options, ends, says):
    found = _refusals.ending(err, _refused(action, **options))
    assert found is not None and found.ends == ends and says in found.sentence


def test_an_error_the_table_does_not_list_is_left_to_airflows_retries():
    assert _refusals.ending(ex.DataTablesServerError(503, "down"), _refused("import")) is None
    assert _refusals.ending(ex.DataTablesNotFoundError(404, "gone"), _refused("replace")) is None
    err = ex.DataTablesServerError(503, "down")
    with pytest.raises(ex.DataTablesServerError) as raised:
        _refusals.end(err, _refused("import"))
    assert raised.value is err


def test_ending_raises_the_final_class_a_retry_a_skip_or_nothing():
    with pytest.raises(ex.DataTablesPermissionError) as final:
        _refusals.end(ex.DataTablesPermissionError(403, "no", method="POST", url="/x"), _refused("import"))
    assert isinstance(final.value, AirflowFailException) and final.value.status_code == 403
    with pytest.raises(ex.DataTablesBusyError) as retried:
        _refusals.end(ex.DataTablesBusyError(409, "busy"), _refused("delete"))
    assert not isinstance(retried.value, AirflowException)
    with pytest.raises(AirflowSkipException, match="locked from delete"):
        _refusals.end(ex.DataTablesLockedError(409, ""), _refused("delete", if_locked="skip"))
    assert _refusals.end(ex.DataTablesNotFoundError(404, ""), _refused("delete", missing_ok=True)) is None


@pytest.mark.parametrize("kind", list(_refusals.FINAL), ids=lambda k: k.__name__)
def test_each_final_error_is_one_class_and_crosses_a_process(kind):
    assert _refusals.final(kind) is _refusals.final(kind)
    final = _refusals.final(kind)
    assert issubclass(final, kind) and issubclass(final, AirflowFailException)
    err = final(403, f"the API key of connection 'c' may not do this ({kind.__name__})", method="POST", url="/x")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is final and str(back) == str(err) and back.status_code == 403 and back.msg == err.msg
    assert KEY not in pickle.dumps(err).decode("latin-1")


def test_every_final_row_has_a_final_class():
    kinds = {kind for row in _refusals.ROWS if row.ends == _refusals.FAIL for kind in row.errors}
    assert kinds <= set(_refusals.FINAL)


def test_a_locked_sentence_names_the_connection_the_look_saw():
    table = TableSummary(CARD, "orders", connector_source="Salesforce")
    found = _refusals.ending(ex.DataTablesLockedError(None, "", seen=True), _refused("delete", table=table))
    assert found is not None
    assert found.sentence.startswith(
        f"table {CARD} (orders) is locked from delete: it is fed by an active connection to Salesforce."
    )
