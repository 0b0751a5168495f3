"""Triggers built from the arguments another release serialized: a deferred task outlives an upgrade.

The arguments below are exactly what the previous release (commit 2723615, no ``version``)
wrote for a deferred import and for an asset watcher; the upgrade itself, with a real
triggerer, is tests/packaged/test_upgrade.py.
"""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from airflow_tables.triggers.tables import ARGS_VERSION, DataTablesProcessedTrigger, DataTablesTableRefreshedTrigger

from .test_tables import first_event, imported

CARD = "CRD-00000000-0000-4000-8000-000000000001"
#: DataTablesProcessedTrigger(...).serialize()[1] of the previous release.
PREVIOUS_WAIT = {
    "project_id": "PRJ-1",
    "card_id": CARD,
    "datatables_conn_id": "datatables_default",
    "poll_interval": 0.2,
    "deadline": 1_900_000_000.5,
    "replaced_after": None,
}
#: DataTablesTableRefreshedTrigger(...).serialize()[1] of the previous release.
PREVIOUS_WATCH = {"project_id": "PRJ-1", "card_id": CARD, "datatables_conn_id": "dt", "poll_interval": 5.0}


@pytest.mark.parametrize(
    ("cls", "previous"),
    [(DataTablesProcessedTrigger, PREVIOUS_WAIT), (DataTablesTableRefreshedTrigger, PREVIOUS_WATCH)],
)
def test_arguments_of_the_previous_release_build_the_same_trigger_now_versioned(cls, previous, caplog):
    with caplog.at_level(logging.WARNING):
        _, kwargs = cls(**previous).serialize()
    assert kwargs == {**previous, "version": ARGS_VERSION} and ARGS_VERSION >= 2
    assert json.loads(json.dumps(kwargs)) == kwargs
    assert caplog.text == ""  # an older release's arguments are expected: nothing to warn about


@pytest.mark.parametrize("cls", [DataTablesProcessedTrigger, DataTablesTableRefreshedTrigger])
def test_missing_arguments_take_their_defaults(cls):
    _, kwargs = cls(project_id="PRJ-1", card_id=CARD).serialize()
    assert kwargs["datatables_conn_id"] == "datatables_default"
    assert kwargs["poll_interval"] == (30.0 if cls is DataTablesProcessedTrigger else 60.0)
    if cls is DataTablesProcessedTrigger:
        assert kwargs["deadline"] is None and kwargs["replaced_after"] is None


@pytest.mark.parametrize(
    ("cls", "previous"),
    [(DataTablesProcessedTrigger, PREVIOUS_WAIT), (DataTablesTableRefreshedTrigger, PREVIOUS_WATCH)],
)
def test_unknown_arguments_of_a_newer_release_are_ignored_with_a_warning(cls, previous, caplog):
    newer = {**previous, "version": ARGS_VERSION + 1, "partition_hint": "2026-11-26", "jitter": 0.5}
    with caplog.at_level(logging.WARNING):
        _, kwargs = cls(**newer).serialize()
    assert kwargs == {**previous, "version": ARGS_VERSION}
    assert "ignoring arguments this release does not know: jitter, partition_hint" in caplog.text
    assert f"version {ARGS_VERSION + 1}" in caplog.text


@pytest.mark.parametrize("version", [0, -1, "2", 2.0, True])
def test_a_version_that_is_not_one_is_refused(version):
    with pytest.raises(ValueError, match="version must be"):
        DataTablesProcessedTrigger(**PREVIOUS_WAIT, version=version)


def test_a_wait_deferred_by_the_previous_release_runs_to_its_event(datatables_conn, tmp_path):
    datatables_conn.set_processing_delay(0.3)
    card_id = imported(datatables_conn, tmp_path)
    previous = {**PREVIOUS_WAIT, "project_id": datatables_conn.project_id, "card_id": card_id, "deadline": None}
    event = first_event(DataTablesProcessedTrigger(**previous))
    assert event.payload["status"] == "ready" and event.payload["card_id"] == card_id


def test_a_watch_registered_by_the_previous_release_still_watches(datatables_conn, tmp_path):
    from airflow_tables.hooks.tables import DataTablesHook

    from .test_refresh_exactly_once import refresh, watch_for

    hook = DataTablesHook()
    card_id = imported(datatables_conn, tmp_path)
    hook.wait_for_processed(None, card_id, poll_interval=0.05, timeout=30)
    previous = {**PREVIOUS_WATCH, "project_id": datatables_conn.project_id, "card_id": card_id}
    previous.update(datatables_conn_id="datatables_default", poll_interval=0.1)
    events = asyncio.run(
        watch_for([DataTablesTableRefreshedTrigger(**previous)], 1.5, lambda: refresh(hook, card_id, tmp_path, 6))
    )
    assert [payload["rows"] for _, payload in events] == [6]
