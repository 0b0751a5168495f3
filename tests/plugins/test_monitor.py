"""What the Data Tables page shows, gathered from the emulator and Airflow's own database.

A real DAG run (``dag.test()``) imports a table, so the asset event the page reads is the
one the operator records; the emulator makes the failed and the being-read tables.
"""

from __future__ import annotations

import threading
from datetime import UTC

from tests.conftest import APP_URL
from tests.operators._runs import import_table, orders_csv
from tests.plugins.conftest import BAD_KEY, DOWN_KEY

from airflow_tables.plugins.connections import env_conn_ids
from airflow_tables.plugins.monitor import Monitor
from airflow_tables.plugins.overview import page_of


def default_view(monitor: Monitor, emulator):
    info = monitor.connection("datatables_default")
    assert info is not None and info.error is None, info
    return monitor.department(info, emulator.project_id)


def test_env_connections_of_the_datatables_type_are_found():
    environ = {
        "AIRFLOW_CONN_DATATABLES_DEFAULT": '{"conn_type": "datatables", "host": "http://x"}',
        "AIRFLOW_CONN_SALES": "datatables://:key@tables.example.com",
        "AIRFLOW_CONN_POSTGRES_DEFAULT": "postgres://u:p@db/x",
        "AIRFLOW_CONN_BROKEN": "{not json",
        "AIRFLOW_CONN_": '{"conn_type": "datatables"}',
    }
    assert env_conn_ids(environ) == ["datatables_default", "sales"]


def test_the_page_shows_ready_failed_and_being_read_tables_and_the_importing_dag(imported, connections, tmp_path):
    emulator = connections
    dag_run, ready_id = imported
    emulator.set_fail_readings(1)
    failed_id = import_table(emulator, orders_csv(tmp_path, "failed.csv"))
    emulator.wait_until_processed(emulator.project_id, failed_id)
    emulator.set_processing_delay(3600)
    reading_id = import_table(emulator, orders_csv(tmp_path, "reading.csv"))

    monitor = Monitor(30, base_path="/airflow", ui_timeout=30)
    view = default_view(monitor, emulator)
    listed = page_of(view, limit=500)
    assert listed.total <= 500, "the shared emulator's department outgrew one page"
    rows = listed.rows
    states = {row.card_id: (row.state, row.state_label) for row in rows}
    assert states[ready_id] == ("ready", "Ready")
    assert states[failed_id] == ("failed", "Failed")
    assert states[reading_id] == ("being_read", "Being read")
    assert view.being_read and view.counts["being_read"] >= 1 and view.counts["failed"] >= 1
    ranks = [row.state.rank for row in rows]
    assert rows[0].state == "failed" and ranks == sorted(ranks), "failed first, then being read (TableStatus.rank)"

    ready = view.find(ready_id)
    last = ready.last
    assert (last.dag_id, last.task_id, last.run_id) == ("dt_import_poke", "import", dag_run.run_id)
    assert last.run_link.startswith("/airflow/dags/dt_import_poke/runs/")
    assert last.task_link.endswith("/tasks/import")
    assert ready.app_link == f"{APP_URL}/projects/{emulator.project_id}/cards/{ready_id}"
    assert view.find(failed_id).last is None, "imported outside Airflow: no DAG to name"
    assert view.credits is not None and view.credits.today >= 1 and view.credits.last_7_days >= view.credits.today

    connector = view.find(emulator.connector_card_id)
    assert connector.connector.model_dump() == {"source": "Salesforce", "status": "active"}
    assert connector.locked is True


def test_viewers_share_one_list_request_per_interval(imported, connections):
    emulator = connections
    monitor = Monitor(30, ui_timeout=30)
    info = monitor.connection("datatables_default")
    emulator.reset_stats()
    threads = [threading.Thread(target=monitor.department, args=(info, emulator.project_id)) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    lists = [r for r in emulator.stats()["requests"] if r["method"] == "GET" and r["path"].endswith("/cards")]
    assert len(lists) == 1, lists
    assert monitor.list_requests == 1


def test_a_service_that_is_down_or_refuses_the_key_is_a_message_without_the_key(connections):
    monitor = Monitor(30, ui_timeout=30)
    down = monitor.department(monitor.connection("datatables_down"), "PRJ-test")
    refused = monitor.department(monitor.connection("datatables_refused"), "PRJ-test")
    assert down.error and "did not answer" in down.error and not down.tables
    assert refused.error and "HTTP 401" in refused.error
    text = "\n".join(model.model_dump_json() for model in [page_of(down), page_of(refused), *monitor.connections()])
    for key in (DOWN_KEY, BAD_KEY, connections.api_key):
        assert key not in text
    assert "Traceback" not in text


def test_a_department_the_key_may_not_read_is_a_403_message(connections):
    monitor = Monitor(30, ui_timeout=30)
    view = monitor.department(monitor.connection("datatables_default"), "PRJ-nobody")
    assert view.error and "HTTP 403" in view.error and "PRJ-nobody" in view.error


def test_pages_filter_by_state_and_text(imported, connections, tmp_path):
    emulator = connections
    emulator.set_fail_readings(1)
    failed_id = import_table(emulator, orders_csv(tmp_path, "another_failed.csv"))
    emulator.wait_until_processed(emulator.project_id, failed_id)
    view = default_view(Monitor(30, ui_timeout=30), emulator)

    failed = page_of(view, state="failed")
    assert failed.rows and {row.state for row in failed.rows} == {"failed"}
    assert failed.total == len(view.tables) and failed.matching == view.counts["failed"]
    by_dag = page_of(view, text="DT_IMPORT_POKE")
    assert by_dag.rows and all(row.last.dag_id == "dt_import_poke" for row in by_dag.rows)
    one = page_of(view, offset=1, limit=1)
    assert one.rows == [view.row(view.tables[1])] and one.limit == 1


def test_the_task_view_finds_the_table_of_an_import_task(imported, connections):
    dag_run, card_id = imported
    monitor = Monitor(30, ui_timeout=30)
    answer = monitor.task_table(dag_run.dag_id, dag_run.run_id, "import", -1, readable=lambda conn_id: True)
    assert answer.card_id == card_id and answer.conn_id == "datatables_default"
    assert answer.table.state_label == "Ready"
    assert answer.project_id == connections.project_id

    hidden = monitor.task_table(dag_run.dag_id, dag_run.run_id, "import", -1, readable=lambda conn_id: False)
    assert hidden.table is None and "not listed" in hidden.message
    other = monitor.task_table(dag_run.dag_id, dag_run.run_id, "no_such_task", -1, readable=lambda conn_id: True)
    assert other.card_id is None and "no card_id" in other.message


def test_credits_sum_the_credits_extra_of_the_last_seven_days(dags_module):
    """Signed events of one department only; ``credits`` counted where present, 1 where absent."""
    from datetime import datetime, timedelta

    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    from airflow_tables._durable import signature
    from airflow_tables.assets import table_ref
    from airflow_tables.plugins.events import credits_spent

    key = "dtk_credits_key"

    def signed(extra: dict, with_key: str = key) -> dict:
        return {**extra, "signature": signature(with_key, "upload records", [extra, "d", "t", "r"])}

    now = datetime(2026, 5, 20, 12, 0, tzinfo=UTC)
    events = [  # (department, hours before now, extra, from a task?)
        ("PRJ-credits", 1, signed({"credits": 2}), True),
        ("PRJ-credits", 2, signed({}), True),  # no credits extra: one
        ("PRJ-credits", 3, signed({"credits": 0}), True),  # skipped as unchanged: free
        ("PRJ-credits", 30, signed({"credits": 1}), True),  # yesterday: the week only
        ("PRJ-credits", 24 * 8, signed({"credits": 5}), True),  # older than 7 days
        ("PRJ-credits", 1, signed({"credits": 7}), False),  # a watcher's event: not Airflow's import
        ("PRJ-credits-other", 1, signed({"credits": 9}), True),  # another department with a longer name
        ("PRJ-credits", 1, {"credits": 11}, True),  # unsigned: any DAG can record it
        ("PRJ-credits", 1, signed({"credits": 13}, "another key"), True),  # signed for another connection
        ("PRJ-credits", 1, {**signed({"credits": 1}), "credits": 17}, True),  # signed, then changed
    ]
    with create_session() as session:
        for i, (project, hours, extra, by_task) in enumerate(events):
            ref = table_ref(project, f"CRD-credits-{i}", service="https://credits.example")
            asset = AssetModel(uri=ref.uri, name=f"credits test {i}", group="datatables")
            session.add(asset)
            session.flush()
            session.add(
                AssetEvent(
                    asset_id=asset.id,
                    extra=extra,
                    timestamp=now - timedelta(hours=hours),
                    source_dag_id="d" if by_task else None,
                    source_task_id="t" if by_task else None,
                    source_run_id="r" if by_task else None,
                )
            )
    with create_session() as session:
        credits = credits_spent(session, "credits.example", "PRJ-credits", key, now=now)
    assert (credits.today, credits.last_7_days) == (3, 4)


def test_an_unkeyed_twin_is_not_a_second_import(dags_module):
    """A keyed upload's unkeyed twin (issue 37, point 2) is the same import: the page shows and counts the keyed one."""
    from datetime import datetime, timedelta

    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    from airflow_tables._durable import signature
    from airflow_tables.assets import table_ref
    from airflow_tables.plugins.events import credits_spent, last_imports

    key = "dtk_twin_key"

    def signed(extra: dict) -> dict:
        return {**extra, "signature": signature(key, "upload records", [extra, "d", "t", "r"])}

    now = datetime(2026, 5, 20, 12, 0, tzinfo=UTC)
    ref = table_ref("PRJ-twin", "CRD-twin-1", service="https://twin.example")
    with create_session() as session:
        asset = AssetModel(uri=ref.uri, name="twin test", group="datatables")
        session.add(asset)
        session.flush()
        keyed = signed({"credits": 1, "partition_key": "north", "fingerprint": "f"})
        twin = signed({"credits": 0, "partition_twin": "north", "fingerprint": "f"})
        for extra in (keyed, twin):  # the twin recorded last: the newest event of the table
            session.add(
                AssetEvent(
                    asset_id=asset.id,
                    extra=extra,
                    timestamp=now - timedelta(minutes=1),
                    source_dag_id="d",
                    source_task_id="t",
                    source_run_id="r",
                )
            )
    with create_session() as session:
        last = last_imports(session, "twin.example", "PRJ-twin", key)
        credits = credits_spent(session, "twin.example", "PRJ-twin", key, now=now)
    assert last["CRD-twin-1"].credits == 1
    assert (credits.today, credits.last_7_days) == (1, 1)


def test_another_dags_event_with_an_import_s_extras_is_neither_the_importer_nor_credits(
    dags_module, connections, tmp_path
):
    """Issue 36 point 9: the page names and counts only the records the provider signed.

    A DAG that records an event on a table's asset with the extras of the provider's own record
    (the signature copied along, or the credits raised) leaves "imported by" and the credits as
    the real import made them.
    """
    from tests.operators._runs import run, xcom
    from tests.operators.test_recovery import asset_events

    emulator = connections
    dag_run = run(dags_module, "dt_import_poke", file_path=str(orders_csv(tmp_path, "signed.csv")))
    card_id = xcom(dag_run, "import")
    before = default_view(Monitor(30, ui_timeout=30), emulator)
    assert before.find(card_id).last.dag_id == "dt_import_poke"
    recorded = asset_events(emulator, card_id)[-1]
    assert recorded["signature"]

    run(dags_module, "dt_forge_upload_record", card_id=card_id, extra=recorded)  # an exact copy, signature and all
    run(dags_module, "dt_forge_upload_record", card_id=card_id, extra={**recorded, "credits": 50})
    assert [event.get("credits") for event in asset_events(emulator, card_id)[-2:]] == [recorded["credits"], 50]

    after = default_view(Monitor(30, ui_timeout=30), emulator)
    last = after.find(card_id).last
    assert (last.dag_id, last.run_id) == ("dt_import_poke", dag_run.run_id), "a forger's event named as the importer"
    assert after.credits.today == before.credits.today, "a forger's event counted as credits spent"


# -- one connection cannot hold up another, nor make the page ask without bound (issue 36 point 13) ----------


def test_a_slow_connection_does_not_delay_another_connections_listing(dags_module, connections):
    """24 departments asked on a connection whose service hangs; the default connection still lists at once."""
    from airflow_tables.plugins import monitor as monitor_module

    emulator = connections
    released = threading.Event()
    asked: list[str] = []

    def list_cards(conn_id: str, project_id: str, timeout: float):
        if conn_id == "datatables_down":  # a service that hangs until the test ends
            asked.append(project_id)
            released.wait(60)
            raise TimeoutError("the service did not answer")
        return monitor_module.list_cards(conn_id, project_id, timeout)

    monitor = Monitor(30, ui_timeout=0.2, list_cards=list_cards)
    slow = monitor.connection("datatables_down")
    try:
        for i in range(24):
            view, pending = monitor.department_state(slow, f"PRJ-slow-{i}")
            assert not view.tables and (pending if i < 16 else "to spare the service" in (view.error or ""))
        default = monitor.connection("datatables_default")
        monitor._departments.wait = 30  # the default connection's answer: waited for, as long as it takes
        view = monitor.department(default, emulator.project_id)
        assert view.listed and view.error is None and view.tables
        assert 1 <= len(asked) <= monitor_module.LANE_WORKERS  # the slow lane's threads, no more, are held
    finally:
        released.set()


def test_departments_typed_by_a_viewer_cost_at_most_a_bounded_number_of_requests(dags_module, connections):
    from airflow_tables.plugins.monitor import NEW_DEPARTMENTS_PER_INTERVAL

    emulator = connections
    monitor = Monitor(30, ui_timeout=5)
    info = monitor.connection("datatables_default")
    emulator.reset_stats()
    views = [monitor.department(info, f"PRJ-typed-{i}") for i in range(200)]
    lists = [r for r in emulator.stats()["requests"] if r["method"] == "GET" and r["path"].endswith("/cards")]
    assert len(lists) == NEW_DEPARTMENTS_PER_INTERVAL
    refused = [view for view in views if view.error and "to spare the service" in view.error]
    assert len(refused) == 200 - NEW_DEPARTMENTS_PER_INTERVAL
    assert "HTTP 403" in (views[0].error or "")  # the first ones were asked, and answered
    again = monitor.department(info, "PRJ-typed-0")  # one already asked: its answer, no new request
    assert "HTTP 403" in (again.error or "")
    assert len([r for r in emulator.stats()["requests"] if r["path"].endswith("/cards")]) == len(lists)


def test_the_page_reads_an_events_credits_and_fingerprint_through_the_upload_record():
    """Issue 39 point 4: no raw reading of the extras by key in the plugin: the record's reader, its defaults."""
    from datetime import datetime

    from airflow_tables.assets import UploadRecord, table_ref
    from airflow_tables.plugins.events import recorded_import

    ref = table_ref("sales", "CRD-1", service="https://tables.example.com")
    at = datetime(2026, 5, 20, tzinfo=UTC)
    written = UploadRecord.of(ref, None, replaced=False, fingerprint="xxh3-128:ab:5")
    each = recorded_import(ref, "d", "t", "r", None, at, {**written.to_extra(), "credits": 0}, "success")
    assert (each.card_id, each.credits, each.fingerprint, each.map_index) == ("CRD-1", 0, "xxh3-128:ab:5", -1)
    odd = recorded_import(ref, "d", "t", "r", 2, at, {"credits": "2", "fingerprint": None})
    assert (odd.credits, odd.fingerprint) == (1, "")  # as the record's defaults: one credit, no fingerprint
