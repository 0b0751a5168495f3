"""The triggers: the processed wait (serialisation, every event it can fire, its deadline, shared polling)
and the refresh watch (an event per refresh, whoever made it; nothing else fires it)."""

from __future__ import annotations

import asyncio
import csv
import json
import os
import re
import time
from pathlib import Path

import pytest
from airflow.triggers.base import TriggerEvent

from airflow_tables.model import RefreshWatch, TableSummary
from airflow_tables.triggers import _department_poller
from airflow_tables.triggers.tables import ARGS_VERSION, DataTablesProcessedTrigger, DataTablesTableRefreshedTrigger

KWARGS = {
    "project_id": "PRJ-1",
    "card_id": "CRD-00000000-0000-4000-8000-000000000001",
    "datatables_conn_id": "datatables_default",
    "poll_interval": 0.2,
    "deadline": 1_900_000_000.5,
    "replaced_after": "2026-11-21T10:00:00",
}


@pytest.fixture(autouse=True)
def low_floor(monkeypatch):
    """These waits poll every tenth of a second; the deployer's floor (1 s by default) has tests of its own."""
    monkeypatch.setenv("AIRFLOW__DATATABLES__MIN_POLL_INTERVAL", "0.1")


def small_csv(directory: Path, rows: int = 5) -> Path:
    path = directory / "t.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "name"])
        writer.writerows([i, f"n{i}"] for i in range(rows))
    return path


def imported(emulator, directory: Path) -> str:
    """A fresh table in the emulator's department (made with the hook, not the trigger under test)."""
    from airflow_tables.hooks.tables import DataTablesHook

    return DataTablesHook().import_csv(None, small_csv(directory))


def first_event(trigger: DataTablesProcessedTrigger, timeout: float = 30) -> TriggerEvent:
    async def go():
        gen = trigger.run()
        try:
            return await asyncio.wait_for(anext(gen), timeout)
        finally:
            await gen.aclose()

    return asyncio.run(go())


def test_serialize_round_trip():
    classpath, kwargs = DataTablesProcessedTrigger(**KWARGS).serialize()
    assert classpath == "airflow_tables.triggers.tables.DataTablesProcessedTrigger"
    assert kwargs == {**KWARGS, "version": ARGS_VERSION}
    assert json.loads(json.dumps(kwargs)) == kwargs  # plain JSON, nothing else
    assert DataTablesProcessedTrigger(**kwargs).serialize() == (classpath, kwargs)


def test_ready_event(datatables_conn, tmp_path):
    datatables_conn.set_processing_delay(0.5)
    card_id = imported(datatables_conn, tmp_path)
    event = first_event(
        DataTablesProcessedTrigger(project_id=datatables_conn.project_id, card_id=card_id, poll_interval=0.1)
    )
    summary = next(c for c in datatables_conn.list_cards() if c["CardID"] == card_id)
    assert event == TriggerEvent(
        {
            "status": "ready",
            "project_id": datatables_conn.project_id,
            "card_id": card_id,
            "summary": summary,
            "message": f"table {card_id} is ready",
            "replaced_after": None,
            "deadline": None,
        }
    )


def test_failed_event(datatables_conn, tmp_path):
    datatables_conn.set_fail_readings(1)
    card_id = imported(datatables_conn, tmp_path)
    event = first_event(
        DataTablesProcessedTrigger(project_id=datatables_conn.project_id, card_id=card_id, poll_interval=0.1)
    )
    assert event.payload["status"] == "failed"
    assert event.payload["summary"]["SuccessfulUpload"] is False


def test_gone_event(datatables_conn):
    missing = "CRD-00000000-0000-4000-8000-00000000beef"
    event = first_event(DataTablesProcessedTrigger(project_id=datatables_conn.project_id, card_id=missing))
    assert event.payload == {
        "status": "gone",
        "project_id": datatables_conn.project_id,
        "card_id": missing,
        "summary": None,
        "message": f"table {missing} is not (or no longer) in department {datatables_conn.project_id}",
        "replaced_after": None,
        "deadline": None,
    }


def test_deadline_ends_in_a_timeout_event(datatables_conn, tmp_path):
    datatables_conn.set_processing_delay(30)
    card_id = imported(datatables_conn, tmp_path)
    started = time.monotonic()
    event = first_event(
        DataTablesProcessedTrigger(
            project_id=datatables_conn.project_id, card_id=card_id, poll_interval=0.1, deadline=time.time() + 1.0
        )
    )
    assert event.payload["status"] == "timeout"
    assert 0.9 <= time.monotonic() - started < 10


def test_an_unusable_key_ends_in_an_error_event(datatables_conn, monkeypatch):
    conn = {"conn_type": "datatables", "host": datatables_conn.base_url, "password": "nope"}
    monkeypatch.setenv("AIRFLOW_CONN_DATATABLES_DEFAULT", json.dumps(conn))
    event = first_event(DataTablesProcessedTrigger(project_id=datatables_conn.project_id, card_id=KWARGS["card_id"]))
    assert event.payload["status"] == "error"
    assert "401" in event.payload["message"] and "nope" not in event.payload["message"]


def test_waits_in_one_department_share_one_listing(datatables_conn, tmp_path):
    """Twenty triggers waiting in the same department cost one list request per interval, not twenty."""
    from airflow_tables.hooks.tables import DataTablesHook

    hook = DataTablesHook()
    datatables_conn.set_processing_delay(1.5)
    cards = [hook.import_csv(None, small_csv(tmp_path)) for _ in range(20)]
    datatables_conn.reset_stats()
    interval = 0.25

    async def wait_all():
        triggers = [
            DataTablesProcessedTrigger(project_id=datatables_conn.project_id, card_id=c, poll_interval=interval)
            for c in cards
        ]
        gens = [t.run() for t in triggers]
        events = await asyncio.gather(*(anext(g) for g in gens))
        for g in gens:
            await g.aclose()
        return events

    started = time.monotonic()
    events = asyncio.run(wait_all())
    elapsed = time.monotonic() - started
    assert {e.payload["status"] for e in events} == {"ready"}
    lists = [r for r in datatables_conn.stats()["requests"] if r["method"] == "GET" and r["path"].endswith("/cards")]
    assert len(lists) <= elapsed / interval + 2, (len(lists), elapsed)
    assert _department_poller.pollers() == []  # the poller stopped with its last waiter


# -- arguments are checked when the trigger is built ------------------------------------------------


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"card_id": "crd-typo"}, "upper-case 'CRD-'"),
        ({"card_id": None}, "card_id is empty"),
        ({"project_id": ""}, "project_id"),
        ({"project_id": {"id": "PRJ-1"}}, "project_id"),
        ({"poll_interval": 0}, "poll_interval"),
        ({"poll_interval": "soon"}, "poll_interval"),
        ({"poll_interval": float("nan")}, "poll_interval"),
        ({"deadline": "tomorrow"}, "deadline"),
        ({"deadline": True}, "deadline"),
        ({"deadline": float("nan")}, "deadline"),
    ],
)
def test_bad_arguments_are_refused_when_the_trigger_is_built(change, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        DataTablesProcessedTrigger(**{**KWARGS, **change})


# -- a poisoned wait next to a healthy one ----------------------------------------------------------

LATIN1_KEY = "clé-" + "x" * 40


def poison(kind: str, monkeypatch, hostile_url: str) -> str:
    """A connection id whose waits cannot succeed, for ``kind`` of reason."""
    from tests.triggers.test_department_poller import use_connection

    if kind == "missing connection":
        monkeypatch.delenv("AIRFLOW_CONN_DT_POISON", raising=False)
    elif kind == "latin-1 key":
        use_connection(monkeypatch, "dt_poison", hostile_url, LATIN1_KEY)
    else:  # a department listing answered with a body that says gzip and is not
        use_connection(monkeypatch, "dt_poison", hostile_url, "hostile-key-0123456789")
    return "dt_poison"


@pytest.mark.parametrize("kind", ["missing connection", "latin-1 key", "junk gzip body"])
def test_a_poisoned_wait_ends_in_an_error_and_a_healthy_one_in_its_event(datatables_conn, monkeypatch, tmp_path, kind):
    from tests.triggers.test_department_poller import hostile_server

    datatables_conn.set_processing_delay(0.5)
    card_id = imported(datatables_conn, tmp_path)
    with hostile_server([], junk_list=True) as url:
        conn_id = poison(kind, monkeypatch, url)

        async def both():
            project = datatables_conn.project_id
            healthy = DataTablesProcessedTrigger(project_id=project, card_id=card_id, poll_interval=0.1)
            poisoned = DataTablesProcessedTrigger(
                project_id=datatables_conn.project_id, card_id=card_id, datatables_conn_id=conn_id, poll_interval=0.1
            )
            gens = [healthy.run(), poisoned.run()]
            try:
                return await asyncio.wait_for(asyncio.gather(*(anext(g) for g in gens)), 20)
            finally:
                for g in gens:
                    await g.aclose()

        good, bad = asyncio.run(both())
    assert good.payload["status"] == "ready" and good.payload["card_id"] == card_id
    assert bad.payload["status"] == "error" and conn_id in bad.payload["message"]
    for key in (LATIN1_KEY, "hostile-key-0123456789", datatables_conn.api_key):
        assert key not in bad.payload["message"]
    assert _department_poller.pollers() == []


# -- DataTablesTableRefreshedTrigger --------------------------------------------------------------

T0, T1, T2 = "2026-01-02T10:00:00", "2026-01-02T10:05:00", "2026-01-02T10:09:00"


def ok(completed):
    return {"Processed": True, "SuccessfulUpload": True, "UploadCompletionTime": completed, "Rows": 3}


READING = {"Processed": False, "SuccessfulUpload": False, "UploadCompletionTime": T0}


def fired(*summaries) -> list[bool]:
    watch, out = RefreshWatch("CRD-1"), []
    for summary in summaries:
        watch, refreshed = watch.observe(
            None if summary is None else TableSummary.from_json({"CardID": "CRD-1", **summary})
        )
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
        None,  # gone, or the listing failed (a non-object is no table: TableSummary.from_json refuses it)
        {"Processed": "true", "SuccessfulUpload": True, "UploadCompletionTime": T1},
        {"Processed": True, "SuccessfulUpload": True},
        {"Processed": True, "SuccessfulUpload": True, "UploadCompletionTime": 5},
        {"Processed": "false"},
    ],
)
def test_malformed_or_missing_summaries_fire_nothing_and_change_nothing(malformed):
    assert fired(ok(T0), malformed, ok(T0)) == [False, False, False]


def test_refreshed_serialize_round_trip():
    kwargs = {"project_id": "PRJ-1", "card_id": "CRD-1", "datatables_conn_id": "dt", "poll_interval": 5.0}
    classpath, out = DataTablesTableRefreshedTrigger(**kwargs).serialize()
    assert classpath == "airflow_tables.triggers.tables.DataTablesTableRefreshedTrigger"
    assert out == {**kwargs, "version": ARGS_VERSION} and json.loads(json.dumps(out)) == out
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
        except TimeoutError:
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
