"""DataTablesProcessedTrigger: serialisation, every event it can fire, its deadline, shared polling."""

from __future__ import annotations

import asyncio
import csv
import json
import re
import time
from pathlib import Path

import pytest
from airflow.triggers.base import TriggerEvent

from airflow_tables.triggers import _department_poller
from airflow_tables.triggers.tables import DataTablesProcessedTrigger

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
    assert kwargs == KWARGS
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
