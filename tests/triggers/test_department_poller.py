"""The department poller: one waiter's problem never stalls the others, and no waiter sets the pace.

Against the emulator, and against a small hostile server started here for answers the
emulator never gives (a body that says gzip and is not).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from tests.triggers.test_tables import imported

from airflow_tables.triggers import _department_poller
from airflow_tables.triggers._department_poller import watch

JUNK_GZIP = b"this is not gzip at all" * 8


@pytest.fixture(autouse=True)
def low_floor(monkeypatch):
    """The tests here wait with tenths of a second; the deployer's floor (1 s by default) is a test of its own."""
    monkeypatch.setenv("AIRFLOW__DATATABLES__MIN_POLL_INTERVAL", "0.1")


@contextmanager
def hostile_server(
    cards: list[dict], junk_for: set[str] = frozenset(), junk_list: bool = False, details: dict | None = None
) -> Iterator[str]:
    """A service on 127.0.0.1 that lists ``cards`` and answers a junk "gzip" body for the tables in ``junk_for``.

    With ``junk_list`` the listing itself is the junk. ``details``: tables fetched by CardID
    though the list lacks them. Every other table is a 404.
    """

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the http.server API)
            last = self.path.rstrip("/").rsplit("/", 1)[-1]
            if (last == "cards" and junk_list) or last in junk_for:
                self._answer(200, JUNK_GZIP, gzip=True)
            elif last == "cards":
                self._answer(200, json.dumps({"Success": True, "Msg": "OK", "Cards": cards}).encode())
            elif last in (details or {}):
                self._answer(200, json.dumps({"Msg": "OK", **details[last]}).encode())
            else:
                self._answer(404, json.dumps({"Success": False, "Msg": "no such table"}).encode())

        def _answer(self, status: int, body: bytes, gzip: bool = False) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            if gzip:
                self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # keep the test output quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def use_connection(monkeypatch, conn_id: str, host: str, key: str) -> None:
    conn = {"conn_type": "datatables", "host": host, "password": key, "extra": {"max_retries": 0}}
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))


async def first_word(conn_id: str, project_id: str, card_id: str, *, deadline: float = 60):
    """The first snapshot that says something for good about ``card_id``: its error, or its summary."""
    async with watch(conn_id, project_id, card_id, 0.1) as subscription:
        until = time.monotonic() + deadline
        while (left := until - time.monotonic()) > 0:
            snapshot = await subscription.next(timeout=left)
            if snapshot is None:
                break
            if snapshot.error_for(card_id) is not None:
                return "error", snapshot.error_for(card_id)
            if not snapshot.stale_for(card_id) and card_id in snapshot.cards:
                return "card", snapshot.cards[card_id].to_json()  # the table as the service wrote it
    return "nothing", None


def test_a_waiter_for_a_malformed_card_id_does_not_stall_its_department(datatables_conn, tmp_path):
    """A CardID the hook refuses to put in a URL (``crd-typo``) concerns its waiter only."""
    card_id = imported(datatables_conn, tmp_path)

    async def both():
        return await asyncio.gather(
            first_word("datatables_default", datatables_conn.project_id, "crd-typo"),
            first_word("datatables_default", datatables_conn.project_id, card_id),
        )

    (typo, typo_word), (healthy, summary) = asyncio.run(both())
    assert (typo, healthy) == ("error", "card")
    assert "crd-typo" in typo_word and "upper-case 'CRD-'" in typo_word
    assert summary["CardID"] == card_id
    assert _department_poller.pollers() == []


def test_one_table_answered_with_junk_concerns_its_waiters_only(monkeypatch):
    healthy = {"CardID": "CRD-healthy", "Processed": True, "SuccessfulUpload": True, "Rows": 3}
    with hostile_server([healthy], junk_for={"CRD-poisoned"}) as url:
        use_connection(monkeypatch, "dt_hostile", url, "hostile-key-0123456789")

        async def both():
            return await asyncio.gather(
                first_word("dt_hostile", "PRJ-h", "CRD-poisoned"), first_word("dt_hostile", "PRJ-h", "CRD-healthy")
            )

        (poisoned, message), (ok, summary) = asyncio.run(both())
    assert (poisoned, ok) == ("error", "card")
    assert "CRD-poisoned" in message and "dt_hostile" in message and "hostile-key" not in message
    assert summary == healthy


def test_a_connection_that_cannot_be_built_is_an_error_for_each_waiter_and_is_tried_again(
    datatables_conn, monkeypatch, tmp_path
):
    """Each waiter hears that the connection is missing; once it exists, the same poller lists with it."""
    monkeypatch.delenv("AIRFLOW_CONN_DT_LATER", raising=False)
    card_id = imported(datatables_conn, tmp_path)

    async def scenario():
        async with watch("dt_later", datatables_conn.project_id, card_id, 0.1) as subscription:
            first = await subscription.next(timeout=10)
            use_connection(monkeypatch, "dt_later", datatables_conn.base_url, datatables_conn.api_key)
            until = time.monotonic() + 10
            while time.monotonic() < until:
                later = await subscription.next(timeout=10)
                if later is not None and later.error is None:
                    return first, later
            return first, None

    first, later = asyncio.run(scenario())
    assert first is not None and first.error_for(card_id) is not None
    assert "dt_later" in first.error and "isn't defined" in first.error
    assert later is not None and later.cards[card_id].card_id == card_id


def test_a_missing_ca_file_on_the_triggerer_is_an_error_not_a_hang(datatables_conn, monkeypatch, tmp_path):
    conn = {
        "conn_type": "datatables",
        "host": datatables_conn.base_url.replace("http://", "https://"),
        "password": datatables_conn.api_key,
        "extra": {"verify": str(tmp_path / "no-such-ca.pem"), "max_retries": 0},
    }
    monkeypatch.setenv("AIRFLOW_CONN_DT_NO_CA", json.dumps(conn))
    word, message = asyncio.run(first_word("dt_no_ca", datatables_conn.project_id, "CRD-1"))
    assert word == "error"
    assert "dt_no_ca" in message and datatables_conn.api_key not in message


# -- the floor ------------------------------------------------------------------------------------


def test_the_floor_of_the_interval_is_the_deployers_setting(monkeypatch):
    monkeypatch.delenv("AIRFLOW__DATATABLES__MIN_POLL_INTERVAL")
    assert _department_poller.min_poll_interval() == 1.0  # the declared default
    monkeypatch.setenv("AIRFLOW__DATATABLES__MIN_POLL_INTERVAL", "0.5")
    assert _department_poller.min_poll_interval() == 0.5
    monkeypatch.setenv("AIRFLOW__DATATABLES__MIN_POLL_INTERVAL", "0")
    assert _department_poller.min_poll_interval() == _department_poller.MIN_INTERVAL  # never a busy loop
    monkeypatch.setenv("AIRFLOW__DATATABLES__MIN_POLL_INTERVAL", "soon")
    assert _department_poller.min_poll_interval() == 1.0  # a typo falls back to the default, with a warning


def test_one_waiters_tiny_interval_does_not_set_the_departments_rate(datatables_conn, monkeypatch, tmp_path):
    """A waiter asking for 0.01 s next to one asking 30 s: the department is listed every floor (0.5 s)."""
    monkeypatch.setenv("AIRFLOW__DATATABLES__MIN_POLL_INTERVAL", "0.5")
    card_id = imported(datatables_conn, tmp_path)
    datatables_conn.reset_stats()

    async def wait_a_while():
        async with (
            watch("datatables_default", datatables_conn.project_id, card_id, 30.0),
            watch("datatables_default", datatables_conn.project_id, card_id, 0.01) as hasty,
        ):
            (poller,) = _department_poller.pollers()
            assert poller.interval == 0.5
            started, seen = time.monotonic(), 0
            while time.monotonic() - started < 1.6:
                seen += await hasty.next(timeout=2) is not None
            return seen, time.monotonic() - started

    seen, elapsed = asyncio.run(wait_a_while())
    lists = [r for r in datatables_conn.stats()["requests"] if r["method"] == "GET" and r["path"].endswith("/cards")]
    assert 2 <= len(lists) <= elapsed / 0.5 + 2, (len(lists), elapsed)
    assert seen == len(lists)


def test_a_waiter_slower_than_the_floor_keeps_its_own_interval(monkeypatch):
    monkeypatch.setenv("AIRFLOW__DATATABLES__MIN_POLL_INTERVAL", "0.2")

    async def interval():
        poller = _department_poller.DepartmentPoller("nobody", "PRJ-x")
        poller.waiters[1] = ("CRD-1", 0.7)
        return poller.interval

    assert asyncio.run(interval()) == 0.7


def test_a_table_the_list_lacks_is_fetched_and_handed_on_as_its_summary(monkeypatch):
    """A list may lag a fresh import: the table is fetched, and its waiters see a summary, as the list shows it."""
    summary = {"CardID": "CRD-fresh", "Processed": True, "SuccessfulUpload": True, "Rows": 3}
    detail = {**summary, "Description": "Fresh.", "Columns": [{"ColumnName": "id", "DataType": "long"}]}
    with hostile_server([], details={"CRD-fresh": detail}) as url:
        use_connection(monkeypatch, "dt_lagging", url, "k-0123456789")
        word = asyncio.run(first_word("dt_lagging", "P", "CRD-fresh"))
    assert word == ("card", summary)
    assert _department_poller.pollers() == []


def test_the_shared_poller_never_spins(datatables_conn, tmp_path):
    """A trigger asking for a 1 ms interval gets the poller's floor, not a busy loop."""
    from airflow_tables.triggers.tables import DataTablesProcessedTrigger

    datatables_conn.set_processing_delay(1.0)
    card_id = imported(datatables_conn, tmp_path)
    datatables_conn.reset_stats()

    async def first_event():
        project_id = datatables_conn.project_id
        trigger = DataTablesProcessedTrigger(project_id=project_id, card_id=card_id, poll_interval=0.001)
        return await asyncio.wait_for(trigger.run().__anext__(), 30)

    assert asyncio.run(first_event()).payload["status"] == "ready"
    gets = [r for r in datatables_conn.stats()["requests"] if r["method"] == "GET"]
    assert len(gets) <= 1.0 / _department_poller.MIN_INTERVAL + 3, len(gets)  # not thousands
