"""The shared listing cache: one load per key per interval, however many viewers ask at once."""

from __future__ import annotations

import threading
import time

import pytest

from airflow_tables.plugins.cache import SharedCache


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_twenty_viewers_at_once_cause_one_load():
    cache: SharedCache[int] = SharedCache(30)
    started, release = threading.Event(), threading.Event()
    calls = []

    def load() -> int:
        calls.append(1)
        started.set()
        assert release.wait(10), "the test never released the load"
        return 42

    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(cache.get("dept", load).value)) for _ in range(20)]
    for thread in threads:
        thread.start()
    assert started.wait(10)
    release.set()
    for thread in threads:
        thread.join(10)
    assert results == [42] * 20
    assert len(calls) == 1 and cache.loads == 1


def test_an_entry_lives_for_the_interval_then_loads_again():
    clock = Clock()
    cache: SharedCache[int] = SharedCache(30, clock=clock)
    values = iter([1, 2])
    assert cache.get("k", lambda: next(values)).value == 1
    clock.now += 29.9
    assert cache.get("k", lambda: next(values)).value == 1
    clock.now += 0.1
    assert cache.get("k", lambda: next(values)).value == 2
    assert cache.loads == 2


def test_keys_are_separate_and_newer_than_forces_one_reload():
    cache: SharedCache[str] = SharedCache(30)
    assert cache.get(("a", "P1"), lambda: "a1").value == "a1"
    assert cache.get(("a", "P2"), lambda: "a2").value == "a2"
    later = time.time() + 1
    assert cache.get(("a", "P1"), lambda: "fresh", newer_than=later).value == "fresh"
    # Loaded after `later`? No: loaded now, before it; an older mark is satisfied by the new entry.
    assert cache.get(("a", "P1"), lambda: "again", newer_than=later - 5).value == "fresh"
    assert cache.loads == 3


def test_a_failing_load_is_not_cached():
    cache: SharedCache[int] = SharedCache(30)

    def broken() -> int:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        cache.get("k", broken)
    assert cache.get("k", lambda: 7).value == 7


def test_time_to_live_must_be_positive():
    with pytest.raises(ValueError, match="positive"):
        SharedCache(0)


def test_stale_entries_are_dropped_past_the_size_limit():
    clock = Clock()
    cache: SharedCache[int] = SharedCache(30, max_entries=3, clock=clock)
    for i in range(3):
        cache.get(i, lambda i=i: i)
    clock.now += 31
    cache.get("new", lambda: 99)
    assert len(cache) == 1
