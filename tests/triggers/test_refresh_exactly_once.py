"""The refresh watch reports each refresh exactly once across restarts and between two triggerers.

Its state lives where the triggerer hands it (``asset_state_store`` on Airflow 3.3): here a
store with the same ``aget``/``aset`` interface, shared the way the metadata database is
shared between a killed triggerer and its successor, or between two triggerers. The real
store and the real kill are in tests/e2e/test_refresh_watcher.py.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from airflow_tables.triggers import _department_poller, _ledger
from airflow_tables.triggers.tables import DataTablesTableRefreshedTrigger

from .test_tables import small_csv


class SharedStore:
    """One asset's state store as the triggerer hands it to a watcher: ``aget``/``aset`` of JSON values."""

    def __init__(self) -> None:
        self.values: dict[str, object] = {}
        self.writes = 0
        self.broken = False

    async def aget(self, key: str, default=None):
        if self.broken:
            raise ConnectionError("the API server is down")
        await asyncio.sleep(0.01)  # a round trip, so that two claimants interleave
        return self.values.get(key, default)

    async def aset(self, key: str, value) -> None:
        if self.broken:
            raise ConnectionError("the API server is down")
        await asyncio.sleep(0.01)
        self.writes += 1
        self.values[key] = value


@pytest.fixture(autouse=True)
def short_settle(monkeypatch):
    monkeypatch.setattr(_ledger, "SETTLE_SECONDS", 0.3)


@pytest.fixture
def table(datatables_conn, tmp_path):
    from airflow_tables.hooks.tables import DataTablesHook

    hook = DataTablesHook()
    card_id = hook.import_csv(None, small_csv(tmp_path))
    hook.wait_for_processed(None, card_id, poll_interval=0.05, timeout=30)
    return hook, card_id


def watcher(emulator, card_id: str, store: SharedStore) -> DataTablesTableRefreshedTrigger:
    trigger = DataTablesTableRefreshedTrigger(project_id=emulator.project_id, card_id=card_id, poll_interval=0.1)
    trigger.asset_state_store = store  # as the triggerer does for an asset watcher (Airflow 3.3)
    return trigger


def refresh(hook, card_id: str, tmp_path, rows: int) -> None:
    """A replacement straight on the service, a second after the last read (completion times have whole seconds)."""
    time.sleep(1.05)
    hook.import_csv(None, small_csv(tmp_path, rows=rows), card_id=card_id)
    hook.wait_for_processed(None, card_id, poll_interval=0.05, timeout=30, replaced_after=None)


async def watch_for(triggers, seconds: float, during=None, *, until: int | None = None, then: float = 0.0) -> list:
    """Each event the triggers fire, as (index, payload), until ``seconds`` after ``during()`` (run meanwhile).

    ``until``: stop earlier, ``then`` seconds after that many events came (a deadline, not a wait to see).
    """
    events: list = []
    gens = [t.run() for t in triggers]

    async def collect(i, gen):
        async for event in gen:
            events.append((i, event.payload))

    tasks = [asyncio.ensure_future(collect(i, g)) for i, g in enumerate(gens)]
    if during is not None:
        await asyncio.to_thread(during)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline and (until is None or len(events) < until):
        await asyncio.sleep(min(0.05, max(0.0, deadline - loop.time())))
    if until is not None and len(events) >= until:
        await asyncio.sleep(then)  # long enough for a second event to show, were one fired
    for task in tasks:
        task.cancel()
    ended = await asyncio.gather(*tasks, return_exceptions=True)
    for gen in gens:
        await gen.aclose()
    failed = [e for e in ended if isinstance(e, BaseException) and not isinstance(e, asyncio.CancelledError)]
    if failed:  # a watch that died looks like one that saw nothing: say why
        raise failed[0]
    return events


def once_stored(store: SharedStore, then=None, *, deadline: float = 60.0):
    """A ``during`` for :func:`watch_for`: wait until the watch stored its baseline (polled), then ``then()``.

    A fixed half second was not always enough on a loaded machine: a watch whose first look came
    after the refresh took the refreshed read for its baseline, and fired nothing.
    """

    def during():
        until = time.monotonic() + deadline
        while store.writes == 0:
            assert time.monotonic() < until, f"the watch stored no baseline within {deadline:g} s"
            time.sleep(0.02)
        if then is not None:
            then()

    return during


def settled(store: SharedStore, key_part: str):
    return next(v for k, v in store.values.items() if key_part in k)


def test_a_refresh_made_while_the_watch_was_down_fires_once_and_an_earlier_one_never_again(
    datatables_conn, table, tmp_path
):
    hook, card_id = table
    store = SharedStore()
    # The first triggerer: its first look is the baseline; a refresh; the event.
    first = asyncio.run(
        watch_for(
            [watcher(datatables_conn, card_id, store)],
            60.0,
            once_stored(store, lambda: refresh(hook, card_id, tmp_path, 7)),
            until=1,
            then=1.0,
        )
    )
    assert [payload["rows"] for _, payload in first] == [7]
    assert settled(store, card_id)["baseline"] == first[0][1]["completion_time"]
    # Down (its task gone, as with SIGKILL: nothing runs on the way out): a refresh nobody watches.
    refresh(hook, card_id, tmp_path, 9)
    # The next triggerer builds the trigger from its arguments and finds the stored baseline.
    second = asyncio.run(watch_for([watcher(datatables_conn, card_id, store)], 60.0, until=1, then=1.0))
    assert [payload["rows"] for _, payload in second] == [9]
    assert second[0][1]["completion_time"] > first[0][1]["completion_time"]
    # And once more with nothing new: the refresh reported before is never reported again.
    assert asyncio.run(watch_for([watcher(datatables_conn, card_id, store)], 1.0)) == []
    assert _department_poller.pollers() == []


def test_two_triggerers_running_the_same_watch_report_a_refresh_once(datatables_conn, table, tmp_path):
    hook, card_id = table
    store = SharedStore()
    both = [watcher(datatables_conn, card_id, store), watcher(datatables_conn, card_id, store)]
    events = asyncio.run(watch_for(both, 1.5, lambda: [refresh(hook, card_id, tmp_path, rows) for rows in (4, 6)]))
    assert sorted(payload["rows"] for _, payload in events) == [4, 6], events
    assert len({payload["completion_time"] for _, payload in events}) == 2


class StalledView:
    """One triggerer's view of a :class:`SharedStore` that stalls ``stall`` s between reading and writing a claim.

    What a triggerer does when its process is paused (a long GC, a swapped-out VM) right after it
    read the stored watch and before its claim is written: longer than the claim's settle time.
    """

    def __init__(self, shared: SharedStore, stall: float) -> None:
        self.shared = shared
        self.stall = stall

    async def aget(self, key: str, default=None):
        return await self.shared.aget(key, default)

    async def aset(self, key: str, value) -> None:
        if isinstance(value, dict) and value.get("reported") is False:
            await asyncio.sleep(self.stall)
        await self.shared.aset(key, value)


def test_a_triggerer_stalled_past_the_settle_time_reports_at_least_once_with_the_read_to_deduplicate_on(
    datatables_conn, table, tmp_path
):
    """Issue 36 point 11: neither store has a compare-and-set, so a stall longer than the settle time between a
    read and its claim lets both triggerers fire; each event names the read (``completion_time``), which is
    what a consumer de-duplicates on (docs/operators/triggers.md, "Two triggerers")."""
    hook, card_id = table
    store = SharedStore()
    asyncio.run(watch_for([watcher(datatables_conn, card_id, store)], 60.0, once_stored(store), until=0))  # baseline
    prompt, stalled = watcher(datatables_conn, card_id, store), watcher(datatables_conn, card_id, store)
    prompt.asset_state_store = StalledView(store, stall=0.1)  # both have read the watch before either claims
    stalled.asset_state_store = StalledView(store, stall=3 * _ledger.SETTLE_SECONDS)
    events = asyncio.run(watch_for([prompt, stalled], 3.0, lambda: refresh(hook, card_id, tmp_path, 4)))
    assert sorted(i for i, _ in events) == [0, 1]  # at least once: both fired
    assert [payload["rows"] for _, payload in events] == [4, 4]
    assert len({payload["completion_time"] for _, payload in events}) == 1  # one read, to de-duplicate on


def test_without_its_store_the_watch_fires_nothing_and_reports_once_the_store_is_back(datatables_conn, table, tmp_path):
    hook, card_id = table
    store = SharedStore()
    asyncio.run(watch_for([watcher(datatables_conn, card_id, store)], 60.0, once_stored(store), until=0))  # baseline
    writes = store.writes
    store.broken = True

    def refresh_then_store_back():
        refresh(hook, card_id, tmp_path, 5)
        time.sleep(0.5)  # looks made while the store is down: no claim, so no event
        assert store.writes == writes
        store.broken = False

    # Up to a minute once the store is back, then two seconds more for a second event: loaded machines (CI's
    # matrix runs) took more than 1.5 s, then more than 5 s, to look again.
    events = asyncio.run(
        watch_for([watcher(datatables_conn, card_id, store)], 60.0, refresh_then_store_back, until=1, then=2.0)
    )
    assert [payload["rows"] for _, payload in events] == [5]


def test_outside_a_triggerer_the_watch_keeps_its_baseline_in_memory(datatables_conn, table, tmp_path, caplog):
    hook, card_id = table
    trigger = DataTablesTableRefreshedTrigger(project_id=datatables_conn.project_id, card_id=card_id, poll_interval=0.1)
    with caplog.at_level("WARNING"):
        events = asyncio.run(watch_for([trigger], 1.5, lambda: refresh(hook, card_id, tmp_path, 3)))
    assert [payload["rows"] for _, payload in events] == [3]
    assert "kept in memory only" in caplog.text


def signed(emulator, card_id: str, value: dict) -> dict:
    """``value`` as a watch with the emulator's connection stores it (see _ledger, "Signed and checked")."""
    key = _ledger.state_key("datatables_default", emulator.project_id, card_id)
    return {**value, _ledger.SIGNATURE: _ledger.Ledger(key, card_id, emulator.api_key)._signature(value)}


def test_a_stored_state_of_another_shape_starts_the_watch_over(datatables_conn, table, tmp_path, caplog):
    hook, card_id = table
    store = SharedStore()
    key = _ledger.state_key("datatables_default", datatables_conn.project_id, card_id)
    store.values[key] = signed(datatables_conn, card_id, {"baseline": 42})
    with caplog.at_level("WARNING"):
        events = asyncio.run(watch_for([watcher(datatables_conn, card_id, store)], 1.5))
    assert events == []  # the first look is the new baseline, not a refresh
    assert "not one this release reads" in caplog.text
    assert isinstance(settled(store, card_id)["baseline"], str)


def claimed_earlier(store: SharedStore, emulator, card_id: str, baseline: str, age: float) -> None:
    """What a triggerer leaves when it stops between claiming a refresh and firing its event, ``age`` seconds ago."""
    key = _ledger.state_key("datatables_default", emulator.project_id, card_id)
    value = {
        "baseline": baseline,
        "reading": False,
        "claim": "a-stopped-triggerer",
        "claimed_at": time.time() - age,
        "reported": False,
        "version": _ledger.STATE_VERSION,
    }
    store.values[key] = signed(emulator, card_id, value)


def test_a_refresh_claimed_by_a_triggerer_that_stopped_before_firing_it_fires_once(datatables_conn, table):
    _, card_id = table
    last_read = next(c for c in datatables_conn.list_cards() if c["CardID"] == card_id)["UploadCompletionTime"]
    store = SharedStore()
    claimed_earlier(store, datatables_conn, card_id, last_read, age=60)
    events = asyncio.run(watch_for([watcher(datatables_conn, card_id, store)], 1.5))
    assert [payload["completion_time"] for _, payload in events] == [last_read]
    assert settled(store, card_id)["reported"] is True
    assert asyncio.run(watch_for([watcher(datatables_conn, card_id, store)], 1.0)) == []  # and never again


def test_a_claim_in_progress_elsewhere_is_left_to_its_triggerer(datatables_conn, table):
    _, card_id = table
    last_read = next(c for c in datatables_conn.list_cards() if c["CardID"] == card_id)["UploadCompletionTime"]
    store = SharedStore()
    claimed_earlier(store, datatables_conn, card_id, last_read, age=0)
    assert asyncio.run(watch_for([watcher(datatables_conn, card_id, store)], 1.0)) == []
    assert settled(store, card_id)["claim"] == "a-stopped-triggerer"  # untouched


# -- what another task may write in the store (issue 36 point 10) ------------------------------------------------


@pytest.mark.parametrize("signed_by_us", [False, True], ids=["written by hand", "signed, but impossible"])
def test_a_baseline_in_the_future_does_not_silence_the_watch(datatables_conn, table, tmp_path, caplog, signed_by_us):
    hook, card_id = table
    store = SharedStore()
    key = _ledger.state_key("datatables_default", datatables_conn.project_id, card_id)
    future = {"baseline": "2099-01-01T00:00:00", "reading": False, "claim": None, "claimed_at": None}
    future |= {"reported": True, "version": _ledger.STATE_VERSION}
    store.values[key] = signed(datatables_conn, card_id, future) if signed_by_us else future
    with caplog.at_level("WARNING"):
        events = asyncio.run(
            watch_for(
                [watcher(datatables_conn, card_id, store)], 1.5, during=lambda: refresh(hook, card_id, tmp_path, 4)
            )
        )
    assert [payload["rows"] for _, payload in events] == [4]  # the refresh is reported
    why = "later than the table's last read" if signed_by_us else "was not written by airflow-tables"
    assert why in caplog.text
    assert settled(store, card_id)["baseline"] < "2099"


def test_reading_written_before_a_restart_does_not_fire_the_same_refresh_again(datatables_conn, table, caplog):
    """A task writes ``reading: true`` over the watch's state before each triggerer restart: nothing fires."""
    _, card_id = table
    store = SharedStore()
    assert asyncio.run(watch_for([watcher(datatables_conn, card_id, store)], 1.0)) == []  # the baseline
    key = _ledger.state_key("datatables_default", datatables_conn.project_id, card_id)
    for _ in range(2):
        unsigned = {k: v for k, v in store.values[key].items() if k != _ledger.SIGNATURE}
        store.values[key] = {**unsigned, "reading": True}
        with caplog.at_level("WARNING"):
            assert asyncio.run(watch_for([watcher(datatables_conn, card_id, store)], 1.0)) == []
        assert "was not written by airflow-tables" in caplog.text


LEDGER_DAG = '''
import asyncio
from datetime import datetime

from airflow.sdk import DAG, task

from airflow_tables.model import RefreshWatch
from airflow_tables.triggers._ledger import VariableLedger

with DAG(dag_id="refresh_ledger_in_variables", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:

    @task
    def claim_twice(card_id: str) -> list:
        """What a watch does through the Task SDK below Airflow 3.3 (the triggerer forwards the same requests)."""
        old, new = RefreshWatch(card_id, "2026-01-01T00:00:00"), RefreshWatch(card_id, "2026-01-02T00:00:00")

        async def go():
            ledger = VariableLedger(f"refresh_watch.dt.PRJ-1.{card_id}", card_id)
            empty = await ledger.load()
            await ledger.save(old)
            stored = await ledger.load()
            won = await ledger.claim(stored, new)
            lost = await ledger.claim(stored, new)  # the same refresh again: the store has moved on
            await ledger.save(new)  # reported
            return [empty is None, won, lost, (await ledger.load()).watch.baseline]

        return asyncio.run(go())

    claim_twice("{card_id}")
'''


def test_below_airflow_3_3_the_state_is_a_variable_and_a_refresh_is_claimed_once(dags_module):
    """The Variable store, through the Task SDK's real comms (a task of dag.test()), on every minor of the matrix."""
    import importlib.util
    import os
    import uuid
    from pathlib import Path

    from airflow.models.variable import Variable
    from tests.operators._runs import xcom

    card_id = f"CRD-{uuid.uuid4()}"
    path = Path(os.environ["AIRFLOW_HOME"]) / "dags" / "refresh_ledger_in_variables.py"
    path.write_text(LEDGER_DAG.replace("{card_id}", card_id))
    spec = importlib.util.spec_from_file_location("refresh_ledger_in_variables", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    dag_run = module.dag.test()
    assert xcom(dag_run, "claim_twice") == [True, True, False, "2026-01-02T00:00:00"]
    stored = Variable.get(f"airflow_tables.refresh.refresh_watch.dt.PRJ-1.{card_id}", deserialize_json=True)
    assert stored["baseline"] == "2026-01-02T00:00:00" and stored["version"] == _ledger.STATE_VERSION
    assert stored["reported"] is True and stored["claim"] is None
