"""SendOnce against the emulator: one protocol for a paid import, whoever sends it (issue 39).

The store is a plain dict here (a task's durable store has the same get/set); the tries are
calls in a row, as a task's tries are. The operators' and ``import_csv``'s runs through Airflow
are in tests/operators/ (test_recovery.py, test_safe_writes.py).
"""

from __future__ import annotations

import pytest

from airflow_tables.exceptions import DataTablesImportUncertainError
from airflow_tables.hooks.send_once import HOOK_NOTE_PREFIX, SendOnce, _ReleaseTwoNotes
from airflow_tables.sources import open_source

LOST = [{"methods": ["POST"], "path": "/data/import", "drop": "after", "times": 1}]


class Store(dict):
    def set(self, key, value):
        self[key] = value


def _credits_spent(emulator, before: int) -> int:
    return before - emulator.credits()


def test_a_lost_answer_is_adopted_by_the_next_try_and_paid_once(hook, emulator, csv_path, capsys):
    store, credits = Store(), emulator.credits()
    project, source = emulator.project_id, open_source(csv_path)
    emulator.set_faults(LOST)
    first = SendOnce(hook, store, "note", series=1, poll_interval=0.1, timeout=30)
    with pytest.raises(DataTablesImportUncertainError):
        first.send_new(project, source, table_name=None, facts=None)
    assert store["note"]["file"] == "sales.csv" and store["note"]["answer"] is None  # noted before it was sent

    retry = SendOnce(hook, store, "note", series=1, poll_interval=0.1, timeout=30)
    sent = retry.earlier(project, source)
    assert sent is not None and sent.answer in {c["CardID"] for c in emulator.list_cards(project)}
    assert store["note"]["answer"] == sent.answer and sent.facts is not None and sent.facts.rows == 3
    # The sentence a person (and the distributed end-to-end test) looks for in the retry's log.
    assert (
        f"The import of sales.csv, sent by an earlier try whose answer was lost, reached the service as {sent.answer}"
        in capsys.readouterr().out
    )
    assert _credits_spent(emulator, credits) == 1
    assert SendOnce(hook, store, "note", series=1).earlier(project, source) == sent  # answered: no look at all


def test_a_cleared_series_does_not_resume_and_a_foreign_note_fails_closed(hook, emulator, csv_path):
    source = open_source(csv_path)
    store = Store(note={"project_id": emulator.project_id, "file": "sales.csv", "before": [], "series": 1})
    assert SendOnce(hook, store, "note", series=2).earlier(emulator.project_id, source) is None
    store["note"] = {"project_id": emulator.project_id, "file": "sales.csv", "before": "CRD-1"}
    with pytest.raises(DataTablesImportUncertainError, match="is not one this provider wrote; nothing was sent"):
        SendOnce(hook, store, "note", series=1).earlier(emulator.project_id, source)


def test_a_note_the_release_0_2_hook_wrote_is_still_read(hook, emulator, csv_path):
    """A @task retried across the upgrade: its note had no department or file (the key held them)."""
    project, source = emulator.project_id, open_source(csv_path)
    card_id = hook.send_import(project, source)
    key = HOOK_NOTE_PREFIX + "0123"
    old = Store({key: {"before": [], "sent_at": "2026-11-26T00:00:00", "series": 1, "card_id": card_id}})
    credits = emulator.credits()
    sent = SendOnce(hook, _ReleaseTwoNotes(old, project, "sales.csv", None), key, series=1).earlier(project, source)
    assert sent is not None and sent.answer == card_id and sent.file == "sales.csv"
    assert emulator.credits() == credits


def test_find_lost_import_warns_naming_its_replacement(hook, emulator, csv_path):
    with pytest.warns(DeprecationWarning, match="SendOnce"):
        assert hook.find_lost_import(emulator.project_id, "never-sent.csv", before=[]) == []
