"""One poll of a department's table list per interval, shared by every trigger waiting in it.

The seed's polling rule is "list the tables repeatedly and look for the entry with the
wanted CardID". A triggerer running 200 deferred imports in two departments would, the
way other providers do it, send 200 requests per interval. Here every trigger in the
same process that waits on the same connection and department registers with one
:class:`DepartmentPoller`, which lists the department once per interval and hands each
waiter the entry for its table. When the last waiter leaves, the poller stops.

Because one poller serves many waits, nothing one waiter brings may stop it or set its
pace: an exception of any kind becomes an error for the waiters it concerns (all of them
when the listing or the connection fails, one table's waiters when that table's own look
fails) and the poller goes on; and the interval is never below the deployer's floor,
``[datatables] min_poll_interval``, whatever a waiter asks for.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from airflow_tables.exceptions import DataTablesError, DataTablesNotFoundError
from airflow_tables.hooks._http import is_transient
from airflow_tables.model import by_card_id, missing_from

if TYPE_CHECKING:
    from airflow_tables.hooks.tables import DataTablesHook
    from airflow_tables.model import TableSummary

log = logging.getLogger(__name__)

#: The shortest interval whatever the setting says: a floor set to 0 must not make the triggerer spin.
MIN_INTERVAL = 0.1
#: ``[datatables] min_poll_interval`` when the setting is absent (the provider's declared default).
DEFAULT_FLOOR = 1.0


def min_poll_interval() -> float:
    """The deployer's floor for every department's interval (``[datatables] min_poll_interval``).

    Read when a poller starts, not at import, so a changed setting (or a test's) applies to
    the next poller without a restart of the triggerer's Python process.
    """
    from airflow_tables.version_compat import conf

    try:
        floor = conf.getfloat("datatables", "min_poll_interval", fallback=DEFAULT_FLOOR)
    except Exception as err:  # a typo in airflow.cfg must not stop every wait: say it, use the default
        log.warning("[datatables] min_poll_interval is not a number (%s); using %g s", err, DEFAULT_FLOOR)
        floor = DEFAULT_FLOOR
    return max(floor, MIN_INTERVAL)


@dataclass
class Snapshot:
    """One listing of a department: the tables (summaries) by CardID, and what went wrong, for whom.

    ``error`` concerns every waiter (the listing or the connection failed); ``problems`` one
    table's waiters each (its own look failed); ``unsure`` tables whose own look failed for
    now. ``stale``: the listing failed for now, the cards are the previous listing's.
    """

    version: int
    cards: dict[str, TableSummary] = field(default_factory=dict)
    error: str | None = None
    stale: bool = False
    problems: dict[str, str] = field(default_factory=dict)
    unsure: set[str] = field(default_factory=set)

    def error_for(self, card_id: str) -> str | None:
        """Why this listing says nothing about ``card_id`` for good, or ``None``."""
        return self.error or self.problems.get(card_id)

    def stale_for(self, card_id: str) -> bool:
        """Whether this listing has nothing new about ``card_id`` (a failure that may pass)."""
        return self.stale or card_id in self.unsure


class DepartmentPoller:
    """Lists one department on a timer for as long as anyone is waiting in it."""

    def __init__(self, conn_id: str, project_id: str) -> None:
        self.conn_id = conn_id
        self.project_id = project_id
        self.floor = min_poll_interval()
        self.waiters: dict[int, tuple[str, float]] = {}  # id -> (card_id, interval)
        self.snapshot = Snapshot(version=0)
        self.changed = asyncio.Condition()
        self._task: asyncio.Task | None = None
        self._scrub: Callable[[str], str] = str

    @property
    def interval(self) -> float:
        """Seconds between two listings: the shortest any waiter asked for, never below the floor."""
        return max(self.floor, min((interval for _, interval in self.waiters.values()), default=self.floor))

    def add(self, key: int, card_id: str, interval: float) -> None:
        self.waiters[key] = (card_id, float(interval))
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

    async def _publish(self, snapshot: Snapshot) -> None:
        async with self.changed:
            self.snapshot = snapshot
            self.changed.notify_all()

    async def _poll_forever(self) -> None:
        while self.waiters:
            try:
                await self._poll_with_one_client()
            except Exception as err:
                # No client to list with (the connection is gone or wrong, a CA file is missing on
                # the triggerer): everyone waiting hears it now; whoever stays (an asset watcher)
                # gets a new hook, with the connection read again, next interval.
                message = self._problem(err, f"connecting to department {self.project_id}")
                log.warning("%s; trying again in %g s", message, self.interval)
                await self._publish(Snapshot(self.snapshot.version + 1, error=message))
                await asyncio.sleep(self.interval)

    async def _poll_with_one_client(self) -> None:
        from airflow_tables.hooks.tables import DataTablesHook

        hook = DataTablesHook(self.conn_id)
        self._scrub = (await hook.asettings()).scrub
        async with hook.async_client():
            while self.waiters:
                await self._publish(await self._poll_once(hook))
                await asyncio.sleep(self.interval)

    async def _poll_once(self, hook: DataTablesHook) -> Snapshot:
        """List the department, then fetch each wanted table the list lacks (a list may lag a fresh import)."""
        version = self.snapshot.version + 1
        try:
            cards = by_card_id(await hook.a_tables(self.project_id))
        except Exception as err:
            if isinstance(err, DataTablesError) and is_transient(err):
                log.warning("looking at department %s failed, trying again next interval: %s", self.project_id, err)
                return Snapshot(version, cards=dict(self.snapshot.cards), stale=True)
            # A refused key, a missing department, an answer no one can read: no wait fixes it.
            return Snapshot(version, error=self._problem(err, f"listing department {self.project_id}"))
        snapshot = Snapshot(version, cards=cards)
        for card_id in missing_from(cards, {card for card, _ in self.waiters.values()}):
            try:
                cards[card_id] = (await hook.a_table(self.project_id, card_id)).summary
            except DataTablesNotFoundError:
                pass  # not in the list nor on its own: gone (the waiters say so)
            except Exception as err:
                if isinstance(err, DataTablesError) and is_transient(err):
                    snapshot.unsure.add(card_id)
                else:
                    snapshot.problems[card_id] = self._problem(err, f"looking at table {card_id!r}")
        return snapshot

    def _problem(self, err: Exception, doing: str) -> str:
        """Words for an error event: what failed, with which connection, why; never the key."""
        why = str(err) if isinstance(err, DataTablesError) else f"{type(err).__name__}: {err}"
        return self._scrub(
            f"{doing} with connection {self.conn_id!r} failed: {why} "
            f"(check the connection {self.conn_id!r} and the triggerer's access to the service)"
        )


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
        except TimeoutError:
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
