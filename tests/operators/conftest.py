"""Fixtures of the operators' tests: the emulator's counters before a test's run."""

from __future__ import annotations

import pytest


@pytest.fixture
def stats(datatables_conn):
    """The emulator's counters before the test's run, to compare with after."""
    datatables_conn.reset_stats()
    return {"imports_accepted": datatables_conn.stats()["imports_accepted"], "credits": datatables_conn.credits()}


@pytest.fixture
def counted(datatables_conn):
    """The shared emulator with its request log emptied."""
    datatables_conn.reset_stats()
    return datatables_conn
