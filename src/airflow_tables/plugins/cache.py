"""A small thread-safe cache with a time to live, loading each key once however many ask at once.

The page must never add polling load: twenty people watching a department must cost the
service what one waiting task costs, one list request per poll interval. The api-server
answers requests from a thread pool, so the cache is shared by every viewer and each key
is loaded by one thread while the others wait for its result ("single flight").
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Entry(Generic[T]):
    """A loaded value and when it was loaded (``loaded_at``: wall clock, for people; ``taken``: monotonic)."""

    value: T
    loaded_at: float
    taken: float


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
