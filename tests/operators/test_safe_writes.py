"""Safe writes (issue 26 points 1, 2, 3 and 6), through real DAG runs against the emulator.

A lost answer is adopted only on evidence (never another import's table, never paid twice),
for the operators and the hook in a ``@task``; a retry resumes while a clear starts a new job;
``table_name``; a read that differs from validation's counts, and a failed read's reason.
"""

from __future__ import annotations

import json
import re
import threading
import time

import pytest
from tests.operators._runs import (
    clear_and_run,
    import_table,
    imports_since,
    orders_csv,
    run,
    state,
    xcom,
    xcom_all,
)
from tests.operators.test_recovery import asset_events

LOST = [{"methods": ["POST"], "path": "/data/import", "drop": "after", "times": 1}]  # handled, answer lost
NEVER_HANDLED = [{"methods": ["POST"], "path": "/data/import", "drop": "before", "times": 1}]


def _ti(dag_run, task_id: str):
    return dag_run.get_task_instance(task_id)


def _table(emulator, card_id: str) -> dict:
    return next(c for c in emulator.list_cards() if c["CardID"] == card_id)


def _ready_table(emulator, tmp_path, rows: int = 2) -> str:
    card_id = import_table(emulator, orders_csv(tmp_path, "start.csv", rows=rows))
    emulator.wait_until_processed(emulator.project_id, card_id)
    return card_id


# -- 1. adoption only on evidence -------------------------------------------------------------------


def test_a_lost_answer_never_adopts_a_sibling_file_of_the_same_name(dags_module, datatables_conn, stats, tmp_path):
    """d1/orders.csv's answer is lost unhandled; d2/orders.csv (another task's) lands meanwhile: never claimed."""
    emulator = datatables_conn
    (tmp_path / "d1").mkdir()
    (tmp_path / "d2").mkdir()
    mine = orders_csv(tmp_path / "d1", "orders.csv", rows=3)
    sibling = orders_csv(tmp_path / "d2", "orders.csv", rows=7)
    known = {c["CardID"] for c in emulator.list_cards()}
    emulator.set_faults(NEVER_HANDLED)
    dag_run = run(dags_module, "dt_import_sibling", file_path=str(mine), sibling=str(sibling))

    ti = _ti(dag_run, "import")
    assert str(ti.state) == "failed" and ti.try_number == 2  # refused at the retry, not retried again
    others = [c for c in emulator.list_cards() if c["CardID"] not in known]
    assert [(c["CardName"], c["Rows"]) for c in others] == [("orders", 7)]  # the sibling's table only
    assert xcom(dag_run, "import") is None and xcom(dag_run, "import", key="card_id") is None
    assert asset_events(emulator, others[0]["CardID"]) == []
    assert imports_since(emulator, stats) == 1  # the sibling's: the retry sent nothing
    assert stats["credits"] - emulator.credits() == 1
    assert _table(emulator, others[0]["CardID"])["Rows"] == 7


@pytest.mark.parametrize("name", ["données.csv", 'say "hi".csv', "back\\slash.csv"])
def test_a_name_the_service_stores_differently_is_adopted_not_imported_twice(
    dags_module, datatables_conn, stats, tmp_path, name
):
    emulator = datatables_conn
    emulator.set_faults(LOST)
    dag_run = run(dags_module, "dt_import_once", file_path=str(orders_csv(tmp_path, name, rows=4)))

    ti = _ti(dag_run, "import")
    assert str(ti.state) == "success" and ti.try_number == 2
    assert imports_since(emulator, stats) == 1 and stats["credits"] - emulator.credits() == 1
    table = _table(emulator, xcom(dag_run, "import"))
    assert table["Rows"] == 4


@pytest.mark.parametrize(
    ("dag_id", "task_id"),
    [("dt_hook_task", "hook_import"), ("dt_hook_retries_lowered", "hook_import_lowered")],
    ids=["retries as they were", "retries lowered between the tries"],  # issue 36 point 4: the series is the TI's
)
def test_the_hook_in_a_task_with_retries_imports_once_after_a_lost_answer(
    dags_module, datatables_conn, stats, tmp_path, dag_id, task_id
):
    emulator = datatables_conn
    emulator.set_faults(LOST)
    dag_run = run(dags_module, dag_id, file_path=str(orders_csv(tmp_path, "hooked.csv", rows=5)))

    ti = _ti(dag_run, task_id)
    assert str(ti.state) == "success" and ti.try_number == 2
    assert imports_since(emulator, stats) == 1 and stats["credits"] - emulator.credits() == 1
    assert _table(emulator, xcom(dag_run, task_id))["Rows"] == 5


def test_the_hook_in_a_task_imports_again_when_the_service_never_got_the_file(
    dags_module, datatables_conn, stats, tmp_path
):
    emulator = datatables_conn
    emulator.set_faults(NEVER_HANDLED)
    dag_run = run(dags_module, "dt_hook_task", file_path=str(orders_csv(tmp_path, "unsent.csv", rows=5)))

    assert state(dag_run, "hook_import") == "success"
    assert imports_since(emulator, stats) == 1 and stats["credits"] - emulator.credits() == 1


def test_a_replace_wait_never_takes_another_clients_later_read_for_its_own(dags_module, datatables_conn, tmp_path):
    """Our read ends; another client replaces the table before our wait looks again: not recorded as ours.

    Our read takes 2.5 s, so the wait's first look (right after the send) sees it in progress even
    on a loaded machine; its next look, 4 s later, comes after the other client's replacement.
    (With 0.8 s, a first look delayed past our read's end on Airflow 3.4 under load saw our own
    read, and the task rightly succeeded: the premise of the test did not hold.)
    """
    from airflow_tables.hooks.tables import DataTablesHook

    emulator = datatables_conn
    card_id = _ready_table(emulator, tmp_path)
    ours, theirs = orders_csv(tmp_path, "ours.csv", rows=3), orders_csv(tmp_path, "theirs.csv", rows=7)
    emulator.set_processing_delay(2.5)
    emulator.reset_stats()

    def other_client() -> None:
        hook = DataTablesHook()
        deadline = time.monotonic() + 30
        while emulator.stats()["imports_accepted"] < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        hook.wait_for_table(None, card_id, poll_interval=0.05, timeout=30)  # our read has ended
        hook.send_import(None, theirs, card_id=card_id)

    thread = threading.Thread(target=other_client)
    thread.start()
    try:
        dag_run = run(dags_module, "dt_replace_late_look", card_id=card_id, file_path=str(ours))
    finally:
        thread.join(timeout=60)
    ti = _ti(dag_run, "replace")
    assert str(ti.state) == "failed" and ti.try_number == 1  # a mismatch is not retried
    assert _table(emulator, card_id)["Rows"] == 7
    assert asset_events(emulator, card_id) == []  # nothing recorded: skip_if_unchanged has no record to trust
    emulator.set_processing_delay(0.0)
    before = emulator.credits()
    again = run(dags_module, "dt_replace_skip", card_id=card_id, file_path=str(ours))
    assert state(again, "replace") == "success" and before - emulator.credits() == 1  # sent, not skipped
    assert _table(emulator, card_id)["Rows"] == 3


def test_one_service_spelled_two_ways_shares_the_skip_record(dags_module, datatables_conn, tmp_path, monkeypatch):
    emulator = datatables_conn
    card_id = _ready_table(emulator, tmp_path)
    path = orders_csv(tmp_path, rows=5)
    before = emulator.credits()
    assert state(run(dags_module, "dt_replace_skip", card_id=card_id, file_path=str(path)), "replace") == "success"
    conn = json.loads(__import__("os").environ["AIRFLOW_CONN_DATATABLES_DEFAULT"])
    conn["host"] = emulator.base_url.replace("127.0.0.1", "localhost")
    monkeypatch.setenv("AIRFLOW_CONN_DATATABLES_DEFAULT", json.dumps(conn))
    assert state(run(dags_module, "dt_replace_skip", card_id=card_id, file_path=str(path)), "replace") == "success"
    assert before - emulator.credits() == 1  # the second run skipped: same service, same record


@pytest.mark.parametrize(
    ("spelling", "same_as"),
    [
        ("https://tables.example.com:443", "https://tables.example.com"),
        ("http://tables.example.com:80/", "http://tables.example.com"),
        ("http://localhost:8765", "http://127.0.0.1:8765"),
        ("http://[::1]:8765", "http://127.0.0.1:8765"),
        ("tables.example.com", "https://TABLES.example.com:443/"),
    ],
)
def test_a_service_has_one_identity_however_its_url_is_spelled(spelling, same_as):
    from airflow_tables.assets import service_of

    assert service_of(spelling) == service_of(same_as)
    assert service_of("https://tables.example.com:8443") != service_of("https://tables.example.com")


# -- 2. a retry resumes, a clear starts a new job ---------------------------------------------------


def test_a_cleared_successful_import_imports_again(dags_module, datatables_conn, stats, tmp_path):
    emulator = datatables_conn
    dag_run = run(dags_module, "dt_import_once", file_path=str(orders_csv(tmp_path, "cleared.csv", rows=3)))
    first = xcom(dag_run, "import")
    assert state(dag_run, "import") == "success"

    again = clear_and_run(dags_module, "dt_import_once", dag_run.run_id, "import")
    assert state(again, "import") == "success"
    second = xcom(again, "import")
    assert second != first  # a new job: a new table, one more credit
    assert imports_since(emulator, stats) == 2 and stats["credits"] - emulator.credits() == 2
    assert len(asset_events(emulator, second)) == 1


def test_a_cleared_replace_of_an_unchanged_file_sends_nothing_and_records_no_event(
    dags_module, datatables_conn, tmp_path
):
    emulator = datatables_conn
    card_id = _ready_table(emulator, tmp_path)
    path = orders_csv(tmp_path, rows=5)
    dag_run = run(dags_module, "dt_replace_skip", card_id=card_id, file_path=str(path))
    assert state(dag_run, "replace") == "success"
    before, events = emulator.credits(), len(asset_events(emulator, card_id))

    again = clear_and_run(dags_module, "dt_replace_skip", dag_run.run_id, "replace")
    assert state(again, "replace") == "success"
    assert emulator.credits() == before  # checked again, and skipped: the table holds this file
    assert len(asset_events(emulator, card_id)) == events


def test_a_cleared_replace_whose_read_failed_sends_again(dags_module, datatables_conn, tmp_path):
    emulator = datatables_conn
    card_id = _ready_table(emulator, tmp_path)
    emulator.set_fail_readings(1)
    dag_run = run(dags_module, "dt_replace_once", card_id=card_id, file_path=str(orders_csv(tmp_path, rows=6)))
    assert state(dag_run, "replace") == "failed"
    before = emulator.credits()

    again = clear_and_run(dags_module, "dt_replace_once", dag_run.run_id, "replace")
    assert state(again, "replace") == "success"
    assert before - emulator.credits() == 1
    assert _table(emulator, card_id)["Rows"] == 6


# -- 3. table names ----------------------------------------------------------------------------------


def test_table_name_is_the_name_people_see(dags_module, datatables_conn, tmp_path):
    emulator = datatables_conn
    path = orders_csv(tmp_path, "export_0001.csv", rows=2)
    dag_run = run(dags_module, "dt_import_named", file_path=str(path), table_name="Daily orders")
    assert state(dag_run, "import") == "success"
    assert _table(emulator, xcom(dag_run, "import"))["CardName"] == "Daily orders"


def test_a_mapped_replace_warns_when_it_meets_the_same_table_twice(dags_module, datatables_conn, tmp_path, capfd):
    emulator = datatables_conn
    card_id = _ready_table(emulator, tmp_path)
    dag_run = run(dags_module, "dt_replace_mapped_twice", card_id=card_id, file_path=str(orders_csv(tmp_path)))
    assert set(xcom_all(dag_run, "replace", key="card_id").values()) == {card_id}
    out = "".join(capfd.readouterr())
    # dag.test() runs the mapped tries in no fixed order: whichever ran second names the first.
    # dag.test() runs the mapped tries in no fixed order: whichever ran second warns, once.
    warned = re.findall(rf"replace\[(\d)\] replaces {card_id}, which 1 other map index\(es\) of this run", out)
    assert warned in (["0"], ["1"])


def test_mapped_imports_that_would_name_two_tables_alike_send_one_and_refuse_the_other(
    dags_module, datatables_conn, tmp_path, capfd
):
    """Issue 37, point 9: a table_name in partial(), or one base name in two folders, names tables alike."""
    emulator = datatables_conn
    emulator.reset_stats()
    credits = emulator.credits()
    for folder in ("d1", "d2"):
        (tmp_path / folder).mkdir()
        orders_csv(tmp_path / folder)  # d1/orders.csv and d2/orders.csv, the same shape

    dag_run = run(dags_module, "dt_import_mapped_alike", file_path=str(tmp_path))

    out = capfd.readouterr().out
    for task_id, name in (("by_file_name", "orders.csv"), ("named_in_partial", "daily.csv")):
        tis = sorted((ti for ti in dag_run.get_task_instances() if ti.task_id == task_id), key=lambda t: t.map_index)
        states = sorted((str(ti.state), ti.try_number) for ti in tis)
        assert states == [("failed", 1), ("success", 1)], (task_id, states)  # refused for good, before sending
        (refused,) = (ti.map_index for ti in tis if str(ti.state) == "failed")
        assert (
            f"{task_id}[{refused}]: another map index of this run also imports a new table named after {name!r}" in out
        )
    posts = [r for r in emulator.stats()["requests"] if r["method"] == "POST"]
    assert len(posts) == 2 and credits - emulator.credits() == 2  # one table each, not four


def test_a_replace_given_a_table_name_says_the_table_keeps_its_name(dags_module, datatables_conn, tmp_path, capfd):
    emulator = datatables_conn
    card_id = _ready_table(emulator, tmp_path)
    name = _table(emulator, card_id)["CardName"]

    dag_run = run(dags_module, "dt_replace_named", card_id=card_id, file_path=str(orders_csv(tmp_path, rows=3)))

    assert state(dag_run, "replace") == "success"
    assert "table_name='renamed' is not used by a replacement: the table keeps its name" in capfd.readouterr().out
    assert _table(emulator, card_id)["CardName"] == name


def test_table_name_refuses_a_path_when_the_dag_is_parsed_or_run(datatables_conn, tmp_path):
    from airflow_tables.hooks.tables import DataTablesHook

    with pytest.raises(ValueError, match="may not hold a slash"):
        DataTablesHook().import_csv(None, orders_csv(tmp_path), table_name="d1/orders")


# -- 6. reading checked ------------------------------------------------------------------------------


@pytest.mark.parametrize("dag_id", ["dt_import_read_fail", "dt_import_read_fail_defer"])
@pytest.mark.parametrize(
    ("reading", "error", "says"),
    [
        (
            {"lose_rows": 1},
            "DataTablesReadMismatchError",
            "was read with 8 rows and 4 columns, but validation counted 9 rows and 4 columns",
        ),
        (
            {"fail_readings": 1, "failure_reason": "row 3 has a date the service cannot read"},
            "DataTablesUploadFailedError",
            'its explanation: "Reading bad.csv failed: row 3 has a date the service cannot read."',
        ),
    ],
    ids=["a read that lost a row", "a failed read"],
)
def test_a_bad_read_fails_without_retry_saying_why(
    dags_module, datatables_conn, stats, tmp_path, capfd, dag_id, reading, error, says
):
    emulator = datatables_conn
    emulator.set_settings(**reading)
    dag_run = run(dags_module, dag_id, file_path=str(orders_csv(tmp_path, "bad.csv", rows=9)))

    ti = _ti(dag_run, "import")
    assert str(ti.state) == "failed" and ti.try_number == 1
    out = "".join(capfd.readouterr())
    assert error in out and says in out
    assert "failed (no response)" not in out  # what a look showed, not a request that got no answer
    assert imports_since(emulator, stats) == 1 and stats["credits"] - emulator.credits() == 1


def test_a_read_mismatch_can_be_only_a_warning(dags_module, datatables_conn, tmp_path, capfd):
    emulator = datatables_conn
    emulator.set_lose_rows(2)
    dag_run = run(dags_module, "dt_import_read_warn", file_path=str(orders_csv(tmp_path, "short.csv", rows=9)))
    assert state(dag_run, "import") == "success"
    assert "on_read_mismatch='warn', so the task goes on" in "".join(capfd.readouterr())
    assert _table(emulator, xcom(dag_run, "import"))["Rows"] == 7


def test_the_emulator_settings_refuse_nonsense(datatables_conn):
    from airflow_tables.emulator.testing import EmulatorError

    for bad in ({"lose_rows": -1}, {"lose_rows": True}, {"failure_reason": ""}, {"failure_reason": 3}):
        with pytest.raises(EmulatorError, match="400"):
            datatables_conn.set_settings(**bad)
    datatables_conn.set_settings(lose_rows=0, failure_reason="x")
    datatables_conn.reset_settings()


@pytest.mark.parametrize(
    ("table_name", "says"),
    [
        ("d1/orders", "may not hold a slash"),
        (None, "table_name rendered as 'None': its template found nothing"),  # issue 37, point 9
        ("orders.csv", "ends in .csv: the table would be named 'orders.csv'"),
        ('say "hi"', "may not hold a double quote: the file part's header carries it as %22"),
    ],
)
def test_a_table_name_that_renders_wrong_fails_without_a_request_or_a_retry(
    dags_module, datatables_conn, tmp_path, capfd, table_name, says
):
    emulator = datatables_conn
    emulator.reset_stats()
    credits = emulator.credits()
    dag_run = run(dags_module, "dt_import_named", file_path=str(orders_csv(tmp_path)), table_name=table_name)
    ti = _ti(dag_run, "import")
    assert str(ti.state) == "failed" and ti.try_number == 1
    assert says in capfd.readouterr().out
    assert [r for r in emulator.stats()["requests"] if r["method"] == "POST"] == []
    assert emulator.credits() == credits


def test_a_mapped_import_lists_its_department_once(dags_module, datatables_conn, tmp_path):
    """Issue 37, point 8: the list before sending (what a lost answer is judged against), then fetches.

    The wait's looks fetch the one table: a list per look costs as much as the department is large,
    for every mapped instance (each import listed the department twice before).
    """
    emulator = datatables_conn
    for region in ("north", "south", "east"):
        orders_csv(tmp_path, name=f"orders_{region}.csv")
    emulator.reset_stats()

    dag_run = run(dags_module, "dt_fault_suite", file_path=str(tmp_path))

    assert sorted(str(ti.state) for ti in dag_run.get_task_instances() if ti.task_id == "import") == ["success"] * 3
    requests = emulator.stats()["requests"]
    lists = [r for r in requests if r["method"] == "GET" and r["path"].endswith("/cards")]
    imports = [r for r in requests if r["method"] == "POST"]
    fetches = [r for r in requests if r["method"] == "GET" and "/cards/CRD-" in r["path"]]
    assert (len(imports), len(lists)) == (3, 3), [r["path"] for r in requests]
    assert len(fetches) >= 3  # each wait looked at its own table
