"""Thread-safe caches with a time to live, loading each key once however many ask at once.

The page must never add polling load: twenty people watching a department must cost the
service what one waiting task costs, one list request per poll interval. The api-server
answers requests from a thread pool, so the cache is shared by every viewer and each key
is loaded by one thread while the others wait for its result ("single flight").

:class:`BackgroundCache` (the departments' listings, a table's details) also bounds how long
a request waits: the load runs in a background thread, a request waits for it at most
``wait`` seconds and then answers with the last value it has (its age shown by the page),
so a hung or slow service never holds an api-server worker. A load also says how long its
value must be kept (a ``Retry-After``, a department the service does not know): no request
loads it again before then.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as WaitedTooLong
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Entry(Generic[T]):
    """A loaded value and when it was loaded (``loaded_at``: wall clock, for people; ``taken``: monotonic)."""

    value: T
    loaded_at: float
    taken: float
    #: (:class:`BackgroundCache`) monotonic time before which the value is not loaded again.
    hold_until: float = 0.0


class SharedCache(Generic[T]):
    """Values by key for ``ttl`` seconds; a loader's errors are the loader's to turn into values.

    :param max_entries: past this many keys, entries older than ``ttl`` are dropped (a viewer
        can name any department; the cache must not grow with every name ever asked for).
    :param clock: the monotonic clock (a test may pass its own).
    """

    def __init__(self, ttl: float, *, max_entries: int = 1024, clock: Callable[[], float] = time.monotonic) -> None:
        if ttl <= 0:
            raise ValueError(f"the cache's time to live must be positive, not {ttl!r}")
        self.ttl = ttl
        self.max_entries = max_entries
        self._clock = clock
        self._entries: dict[Hashable, Entry[T]] = {}
        self._key_locks: dict[Hashable, threading.Lock] = {}
        self._lock = threading.Lock()
        self.loads = 0

    def get(self, key: Hashable, load: Callable[[], T], *, newer_than: float | None = None) -> Entry[T]:
        """The cached entry for ``key``, loading it if missing, older than ``ttl``, or loaded before ``newer_than``.

        :param newer_than: a wall-clock time (``time.time()``): an entry loaded before it is stale
            whatever its age (the task view asks for a table imported after the last listing).
        """
        entry = self._fresh(key, newer_than)
        if entry is not None:
            return entry
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            entry = self._fresh(key, newer_than)  # loaded by another thread while this one waited
            if entry is not None:
                return entry
            value = load()
            entry = Entry(value, time.time(), self._clock())
            with self._lock:
                self._entries[key] = entry
                self.loads += 1
                if len(self._entries) > self.max_entries:
                    self._drop_stale()
            return entry

    def _drop_stale(self) -> None:
        now = self._clock()
        for stale in [key for key, entry in self._entries.items() if now - entry.taken >= self.ttl]:
            del self._entries[stale]
            self._key_locks.pop(stale, None)

    def _fresh(self, key: Hashable, newer_than: float | None) -> Entry[T] | None:
        with self._lock:
            entry = self._entries.get(key)
        if entry is None or self._clock() - entry.taken >= self.ttl:
            return None
        if newer_than is not None and entry.loaded_at < newer_than:
            return None
        return entry

    def __len__(self) -> int:
        return len(self._entries)


@dataclass
class _Slot(Generic[T]):
    entry: Entry[T] | None = None
    loading: Future[Entry[T]] | None = None


#: A loader gets the value it replaces (``None`` the first time) and returns the new value with
#: the seconds it must be kept at least (the cache's ``ttl``, or longer: ``Retry-After``).
Loader = Callable[["T | None"], "tuple[T, float]"]


class BackgroundCache(Generic[T]):
    """Values by key for ``ttl`` seconds, loaded in background threads; a request waits at most ``wait``.

    :meth:`get` returns ``(entry, pending)``: the newest entry (``None`` before the first load
    ends) and whether a load is still running. A loader must not raise (it turns errors into
    values, keeping what it can of the previous one); one that does is logged and its key
    loaded again at the next request.

    Loads run in *lanes* (the page gives each connection its own): ``workers`` threads per lane,
    so that a slow service, or many departments asked of one, delays only its own lane's loads,
    never another connection's.
    """

    def __init__(
        self,
        ttl: float,
        *,
        wait: float,
        workers: int = 4,
        max_entries: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl <= 0:
            raise ValueError(f"the cache's time to live must be positive, not {ttl!r}")
        self.ttl = ttl
        self.wait = max(0.0, wait)
        self.max_entries = max_entries
        self._clock = clock
        self._slots: dict[Hashable, _Slot[T]] = {}
        self._lock = threading.Lock()
        self._workers = workers
        self._lanes: dict[Hashable, ThreadPoolExecutor] = {}
        self.loads = 0

    def peek(self, key: Hashable) -> Entry[T] | None:
        """The entry held for ``key``, whatever its age, loading nothing."""
        with self._lock:
            slot = self._slots.get(key)
            return None if slot is None else slot.entry

    def get(
        self,
        key: Hashable,
        load: Loader[T],
        *,
        newer_than: float | None = None,
        wait: float | None = None,
        lane: Hashable = None,
    ) -> tuple[Entry[T] | None, bool]:
        """The entry for ``key`` (loading it when older than ``ttl``), and whether a load is still running.

        :param newer_than: a wall-clock time: an entry loaded before it is loaded again (once its
            hold has passed), whatever its age.
        :param lane: whose threads load it (see the class): the loads of one lane never wait for another's.
        """
        now = self._clock()
        with self._lock:
            slot = self._slots.setdefault(key, _Slot())
            entry = slot.entry
            if entry is not None and not self._due(entry, now, newer_than):
                return entry, slot.loading is not None
            if slot.loading is None:
                slot.loading = self._lane(lane).submit(self._load, key, load, None if entry is None else entry.value)
                self.loads += 1
                if len(self._slots) > self.max_entries:
                    self._drop_stale(now)
            loading = slot.loading
        try:
            return loading.result(timeout=self.wait if wait is None else wait), False
        except WaitedTooLong:
            return entry, True
        except Exception:  # noqa: BLE001 - logged by _load; the last entry stands
            return entry, False

    def _lane(self, lane: Hashable) -> ThreadPoolExecutor:
        """The lane's threads (made on its first load; called with the lock held)."""
        pool = self._lanes.get(lane)
        if pool is None:
            pool = self._lanes[lane] = ThreadPoolExecutor(max_workers=self._workers, thread_name_prefix="datatables-ui")
        return pool

    def _due(self, entry: Entry[T], now: float, newer_than: float | None) -> bool:
        if now < entry.hold_until:
            return False
        if now - entry.taken >= self.ttl:
            return True
        return newer_than is not None and entry.loaded_at < newer_than

    def _load(self, key: Hashable, load: Loader[T], previous: T | None) -> Entry[T]:
        # The interval counts from when the load began: a listing that takes a while is not
        # listed again later for it (one request per interval), nor is it older than it says.
        began, began_at = self._clock(), time.time()
        try:
            value, hold = load(previous)
            entry = Entry(value, began_at, began, began + max(0.0, hold))
            with self._lock:
                self._slots.setdefault(key, _Slot()).entry = entry
            return entry
        except Exception:
            import logging

            logging.getLogger(__name__).exception("loading %r for the Data Tables page failed", key)
            raise
        finally:
            with self._lock:
                slot = self._slots.get(key)
                if slot is not None:
                    slot.loading = None

    def _drop_stale(self, now: float) -> None:
        stale = [
            key
            for key, slot in self._slots.items()
            if slot.loading is None
            and (slot.entry is None or now - slot.entry.taken >= max(self.ttl, 0.0))
            and (slot.entry is None or now >= slot.entry.hold_until)
        ]
        for key in stale:
            del self._slots[key]

    def __len__(self) -> int:
        return len(self._slots)
