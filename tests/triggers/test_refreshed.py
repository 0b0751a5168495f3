"""DataTablesTableRefreshedTrigger: an event per refresh, whoever made it; nothing else fires it."""

from __future__ import annotations

import asyncio
import json
import os
import time

import pytest
from tests.triggers.test_tables import small_csv

from airflow_tables.model import RefreshWatch
from airflow_tables.triggers import _department_poller
from airflow_tables.triggers.tables import DataTablesProcessedTrigger, DataTablesTableRefreshedTrigger


@pytest.fixture(autouse=True)
def low_floor(monkeypatch):
    """These watches poll every tenth of a second; the deployer's floor (1 s by default) has tests of its own."""
    monkeypatch.setenv("AIRFLOW__DATATABLES__MIN_POLL_INTERVAL", "0.1")


T0, T1, T2 = "2026-01-02T10:00:00", "2026-01-02T10:05:00", "2026-01-02T10:09:00"


def ok(completed):
    return {"Processed": True, "SuccessfulUpload": True, "UploadCompletionTime": completed, "Rows": 3}


READING = {"Processed": False, "SuccessfulUpload": False, "UploadCompletionTime": T0}


def fired(*summaries) -> list[bool]:
    watch, out = RefreshWatch("CRD-1"), []
    for summary in summaries:
        watch, refreshed = watch.observe(summary)
        out.append(refreshed)
    return out


def test_no_event_without_a_refresh():
    assert fired(ok(T0), ok(T0), ok(T0)) == [False, False, False]


def test_one_event_per_refresh():
    assert fired(ok(T0), ok(T1), ok(T1), ok(T2)) == [False, True, False, True]


def test_a_read_seen_in_progress_fires_when_it_ends_even_within_the_same_second():
    assert fired(ok(T0), READING, READING, ok(T0)) == [False, False, False, True]


def test_a_read_under_way_when_watching_starts_fires_when_it_ends():
    assert fired(READING, ok(T1)) == [False, True]


def test_a_failed_read_fires_nothing_but_moves_the_baseline():
    failed = {**ok(T1), "SuccessfulUpload": False}
    assert fired(ok(T0), READING, failed, failed, ok(T2)) == [False, False, False, False, True]


@pytest.mark.parametrize(
    "malformed",
    [
        None,
        "Processed",
        {"Processed": "true", "SuccessfulUpload": True, "UploadCompletionTime": T1},
        {"Processed": True, "SuccessfulUpload": True},
        {"Processed": True, "SuccessfulUpload": True, "UploadCompletionTime": 5},
        {"Processed": "false"},
    ],
)
def test_malformed_or_missing_summaries_fire_nothing_and_change_nothing(malformed):
    assert fired(ok(T0), malformed, ok(T0)) == [False, False, False]


def test_serialize_round_trip():
    kwargs = {"project_id": "PRJ-1", "card_id": "CRD-1", "datatables_conn_id": "dt", "poll_interval": 5.0}
    classpath, out = DataTablesTableRefreshedTrigger(**kwargs).serialize()
    assert classpath == "airflow_tables.triggers.tables.DataTablesTableRefreshedTrigger"
    assert out == kwargs and json.loads(json.dumps(out)) == out
    assert DataTablesTableRefreshedTrigger(**out).serialize() == (classpath, out)


async def _events(trigger, count: int, during, timeout: float = 30) -> list:
    """The first ``count`` events of ``trigger`` while ``during()`` (a blocking callable) runs in a thread."""
    gen = trigger.run()
    events = []

    async def collect():
        async for event in gen:
            events.append(event)
            if len(events) == count:
                return

    task = asyncio.ensure_future(collect())
    await asyncio.sleep(0)  # let the trigger take its first look before anything changes
    await asyncio.to_thread(during)
    try:
        await asyncio.wait_for(task, timeout)
    finally:
        await gen.aclose()
    return events


def test_a_replacement_made_directly_on_the_service_fires_once(datatables_conn, tmp_path):
    from airflow_tables.hooks.tables import DataTablesHook

    hook = DataTablesHook()
    card_id = hook.import_csv(None, small_csv(tmp_path))
    hook.wait_for_processed(None, card_id, poll_interval=0.05, timeout=30)
    datatables_conn.set_processing_delay(0.4)
    trigger = DataTablesTableRefreshedTrigger(project_id=datatables_conn.project_id, card_id=card_id, poll_interval=0.1)

    def replace_twice():
        for rows in (7, 9):
            # Replaced straight through the service, as a person in the application would.
            hook.wait_for_processed(None, card_id, poll_interval=0.05, timeout=30)
            # Completion times have whole seconds: a second apart, each refresh has a later one, so the
            # watch must see it even if a loaded machine makes it miss the read in progress.
            time.sleep(1.05)
            hook.import_csv(None, small_csv(tmp_path, rows=rows), card_id=card_id)
            hook.wait_for_processed(None, card_id, poll_interval=0.05, timeout=30, replaced_after=None)

    events = asyncio.run(_events(trigger, 2, replace_twice))
    assert [e.payload["rows"] for e in events] == [7, 9]
    assert all(e.payload["card_id"] == card_id and e.payload["summary"]["Processed"] is True for e in events)
    assert events[0].payload["completion_time"] < events[1].payload["completion_time"]
    assert _department_poller.pollers() == []


def test_errors_of_the_service_fire_nothing(datatables_conn, monkeypatch):
    conn = {"conn_type": "datatables", "host": datatables_conn.base_url, "password": "not-a-key"}
    monkeypatch.setenv("AIRFLOW_CONN_DATATABLES_DEFAULT", json.dumps(conn))
    trigger = DataTablesTableRefreshedTrigger(project_id=datatables_conn.project_id, card_id="CRD-1", poll_interval=0.1)

    async def watch_a_while():
        gen = trigger.run()
        try:
            return await asyncio.wait_for(anext(gen), 1.0)
        except asyncio.TimeoutError:
            return None
        finally:
            await gen.aclose()

    assert asyncio.run(watch_a_while()) is None


def test_watchers_and_waits_share_the_department_listing(datatables_conn, tmp_path):
    from airflow_tables.hooks.tables import DataTablesHook

    hook = DataTablesHook()
    datatables_conn.set_processing_delay(1.0)
    card_id = hook.import_csv(None, small_csv(tmp_path))
    datatables_conn.reset_stats()
    interval = 0.2

    async def both():
        watchers = [
            DataTablesTableRefreshedTrigger(
                project_id=datatables_conn.project_id, card_id=card_id, poll_interval=interval
            )
            for _ in range(5)
        ]
        wait = DataTablesProcessedTrigger(
            project_id=datatables_conn.project_id, card_id=card_id, poll_interval=interval
        )
        gens = [w.run() for w in watchers]
        tasks = [asyncio.ensure_future(anext(g)) for g in gens]
        started = asyncio.get_running_loop().time()
        event = await anext(wait.run())
        refreshes = await asyncio.wait_for(asyncio.gather(*tasks), 10)
        for g in gens:
            await g.aclose()
        return event, refreshes, asyncio.get_running_loop().time() - started

    event, refreshes, elapsed = asyncio.run(both())
    assert event.payload["status"] == "ready" and len(refreshes) == 5
    lists = [r for r in datatables_conn.stats()["requests"] if r["method"] == "GET" and r["path"].endswith("/cards")]
    assert len(lists) <= elapsed / interval + 2, (len(lists), elapsed)


def test_a_watch_refuses_a_malformed_card_id_when_built():
    with pytest.raises(ValueError, match="upper-case 'CRD-'"):
        DataTablesTableRefreshedTrigger(project_id="PRJ-1", card_id="crd-typo")


def test_a_watch_outlives_a_missing_connection_and_fires_once_it_is_back(datatables_conn, monkeypatch, tmp_path):
    """The asset watcher's poller cannot even build its hook; the watch logs it, keeps watching, then fires."""
    from airflow_tables.hooks.tables import DataTablesHook

    hook = DataTablesHook()
    card_id = hook.import_csv(None, small_csv(tmp_path))
    hook.wait_for_processed(None, card_id, poll_interval=0.05, timeout=30)
    monkeypatch.delenv("AIRFLOW_CONN_DT_WATCH", raising=False)
    trigger = DataTablesTableRefreshedTrigger(
        project_id=datatables_conn.project_id, card_id=card_id, datatables_conn_id="dt_watch", poll_interval=0.1
    )

    def connection_comes_back_then_a_refresh():
        deadline = time.monotonic() + 10
        while not any(p.snapshot.error for p in _department_poller.pollers()):  # the watch has seen the error
            assert time.monotonic() < deadline, "the watch never looked"
            time.sleep(0.02)
        monkeypatch.setenv("AIRFLOW_CONN_DT_WATCH", os.environ["AIRFLOW_CONN_DATATABLES_DEFAULT"])
        while not any(card_id in p.snapshot.cards for p in _department_poller.pollers()):  # its baseline, now
            assert time.monotonic() < deadline, "the watch never listed with the connection back"
            time.sleep(0.02)
        time.sleep(1.05)  # completion times have whole seconds: the refresh must read later than the baseline
        hook.import_csv(None, small_csv(tmp_path, rows=4), card_id=card_id)

    (event,) = asyncio.run(_events(trigger, 1, connection_comes_back_then_a_refresh))
    assert event.payload["card_id"] == card_id and event.payload["rows"] == 4
    assert _department_poller.pollers() == []
