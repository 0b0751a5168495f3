"""One poll of a department's table list per interval, shared by every trigger waiting in it.

The seed's polling rule is "list the tables repeatedly and look for the entry with the
wanted CardID". A triggerer running 200 deferred imports in two departments would, the
way other providers do it, send 200 requests per interval. Here every trigger in the
same process that waits on the same connection and department registers with one
:class:`DepartmentPoller`, which lists the department once per interval (the shortest
interval any waiter asked for) and hands each waiter the entry for its table. When the
last waiter leaves, the poller stops.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from airflow_tables.exceptions import DataTablesError
from airflow_tables.hooks._http import is_transient

if TYPE_CHECKING:
    from airflow_tables.hooks.tables import DataTablesHook

log = logging.getLogger(__name__)

#: The shortest interval between two listings of a department, whatever a waiter asks for:
#: an interval of 0 (or a tiny one) must not make the triggerer spin.
MIN_INTERVAL = 0.1


@dataclass
class Snapshot:
    """One listing of a department: the summaries by CardID, or the error that stopped it."""

    version: int
    cards: dict[str, dict] = field(default_factory=dict)
    error: DataTablesError | None = None
    stale: bool = False  # the listing failed for now: these are the previous listing's cards


class DepartmentPoller:
    """Lists one department on a timer for as long as anyone is waiting in it."""

    def __init__(self, conn_id: str, project_id: str) -> None:
        self.conn_id = conn_id
        self.project_id = project_id
        self.waiters: dict[int, tuple[str, float]] = {}  # id -> (card_id, interval)
        self.snapshot = Snapshot(version=0)
        self.changed = asyncio.Condition()
        self.looks = 0  # department looks made (a listing, and a fetch for each wanted table it lacks)
        self._task: asyncio.Task | None = None

    def add(self, key: int, card_id: str, interval: float) -> None:
        self.waiters[key] = (card_id, max(float(interval), MIN_INTERVAL))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._poll_forever())

    def remove(self, key: int) -> bool:
        """Forget a waiter; True when nobody is left (the poller has stopped)."""
        self.waiters.pop(key, None)
        if self.waiters:
            return False
        if self._task is not None:
            self._task.cancel()
        return True

    async def next_snapshot(self, after: int) -> Snapshot:
        async with self.changed:
            await self.changed.wait_for(lambda: self.snapshot.version > after)
            return self.snapshot

    async def _poll_forever(self) -> None:
        from airflow_tables.hooks.tables import DataTablesHook

        hook = DataTablesHook(self.conn_id)
        async with hook.async_client():
            while self.waiters:
                snapshot = await self._poll_once(hook)
                async with self.changed:
                    self.snapshot = snapshot
                    self.changed.notify_all()
                await asyncio.sleep(min(interval for _, interval in self.waiters.values()) if self.waiters else 0)

    async def _poll_once(self, hook: DataTablesHook) -> Snapshot:
        version = self.snapshot.version + 1
        wanted = {card for card, _ in self.waiters.values()}
        try:
            self.looks += 1
            cards = await hook.a_find_cards(self.project_id, wanted)
        except DataTablesError as err:
            if not is_transient(err):  # a refused key, a missing department: no wait fixes it
                return Snapshot(version, error=err)
            log.warning("looking at department %s failed, trying again next interval: %s", self.project_id, err)
            return Snapshot(version, cards=dict(self.snapshot.cards), stale=True)
        return Snapshot(version, cards=cards)


_POLLERS: dict[tuple[int, str, str], DepartmentPoller] = {}


class Subscription:
    """A waiter's view of its department's poller: fresh snapshots, one after another."""

    def __init__(self, poller: DepartmentPoller) -> None:
        self._poller = poller
        self._seen = poller.snapshot.version  # only a listing taken after joining speaks for our table

    async def next(self, timeout: float | None = None) -> Snapshot | None:
        """The next snapshot, or ``None`` when ``timeout`` seconds pass first."""
        try:
            snapshot = await asyncio.wait_for(self._poller.next_snapshot(self._seen), timeout)
        except asyncio.TimeoutError:
            return None
        self._seen = snapshot.version
        return snapshot


@asynccontextmanager
async def watch(conn_id: str, project_id: str, card_id: str, interval: float) -> AsyncIterator[Subscription]:
    """Register as a waiter for ``card_id`` in its department's poller for the ``with`` block."""
    key = (id(asyncio.get_running_loop()), conn_id, project_id)
    poller = _POLLERS.get(key)
    if poller is None:
        poller = _POLLERS[key] = DepartmentPoller(conn_id, project_id)
    token = object()
    subscription = Subscription(poller)
    poller.add(id(token), card_id, interval)
    try:
        yield subscription
    finally:
        if poller.remove(id(token)) and _POLLERS.get(key) is poller:
            del _POLLERS[key]


def pollers() -> list[DepartmentPoller]:
    """The pollers alive in this process (for tests and the benchmark)."""
    return list(_POLLERS.values())
