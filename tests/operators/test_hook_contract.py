"""What the operators rely on from the hook and the trigger, against the emulator.

These test hooks/tables.py and triggers/ (they came from the operators' first review); their home
is tests/hooks/test_tables.py and tests/triggers/, where they move when those files are next changed.
"""

from __future__ import annotations

import pytest
from tests.hooks.conftest import make_hook  # noqa: F401  (the fixture, reused)
from tests.operators._runs import import_table, orders_csv


def test_the_hook_calls_a_refused_delete_of_a_table_being_read_busy_not_locked(counted, tmp_path):
    from airflow_tables.exceptions import DataTablesBusyError, DataTablesLockedError
    from airflow_tables.hooks.tables import DataTablesHook

    emulator = counted
    emulator.set_processing_delay(5.0)
    emulator.set_settings(lock_while_reading=True)
    card_id = import_table(emulator, orders_csv(tmp_path))
    with pytest.raises(DataTablesBusyError) as refused:
        DataTablesHook().delete_card(None, card_id)
    assert not isinstance(refused.value, DataTablesLockedError)
    assert "being read" in refused.value.msg


def test_timeout_none_means_no_deadline_on_the_worker(counted, tmp_path, caplog):
    from airflow_tables.hooks.tables import DataTablesHook

    counted.set_processing_delay(0.5)
    card_id = import_table(counted, orders_csv(tmp_path))
    look = DataTablesHook().wait_for_table(None, card_id, poll_interval=0.1, timeout=None)
    assert look.status.value == "ready"


def test_the_shared_poller_never_spins(counted, tmp_path):
    """A trigger asking for a 1 ms interval gets the poller's floor, not a busy loop."""
    import asyncio

    from airflow_tables.triggers import _department_poller
    from airflow_tables.triggers.tables import DataTablesProcessedTrigger

    counted.set_processing_delay(1.0)
    card_id = import_table(counted, orders_csv(tmp_path))
    counted.reset_stats()

    async def first_event():
        trigger = DataTablesProcessedTrigger(project_id=counted.project_id, card_id=card_id, poll_interval=0.001)
        return await asyncio.wait_for(trigger.run().__anext__(), 30)

    event = asyncio.run(first_event())
    assert event.payload["status"] == "ready"
    gets = [r for r in counted.stats()["requests"] if r["method"] == "GET"]
    assert len(gets) <= 1.0 / _department_poller.MIN_INTERVAL + 3, len(gets)  # not thousands


def test_the_hook_refuses_an_explicit_empty_project_id(counted):
    from airflow_tables.hooks.tables import DataTablesHook

    with pytest.raises(ValueError, match="project_id is empty"):
        DataTablesHook().list_cards("")
    assert counted.stats()["requests"] == []


def test_an_https_host_against_plain_http_says_tls_failed_and_is_not_retried(counted, make_hook):  # noqa: F811
    from airflow_tables.exceptions import DataTablesConnectionError

    bare = counted.base_url.split("://", 1)[1]  # no scheme: read as https
    hook = make_hook(bare, counted.api_key, max_retries=5)
    with pytest.raises(DataTablesConnectionError) as error:
        hook.list_cards(counted.project_id)
    text = str(error.value)
    assert "TLS handshake" in text and "nothing was sent" in text
    assert f"http://{bare}" in text
    assert error.value.retryable is False and error.value.request_sent is False
    assert counted.stats()["requests"] == []


def test_a_host_ending_in_the_api_version_is_told_to_drop_it(counted, make_hook):  # noqa: F811
    hook = make_hook(counted.base_url + "/v1.0", counted.api_key)
    with pytest.raises(ValueError, match=r"drop '/v1.0'"):
        hook.list_cards(counted.project_id)


def test_a_timeout_message_says_how_long_it_waited(counted, tmp_path):
    from airflow_tables.exceptions import DataTablesTimeoutError
    from airflow_tables.hooks.tables import DataTablesHook

    counted.set_processing_delay(5.0)
    card_id = import_table(counted, orders_csv(tmp_path))
    with pytest.raises(DataTablesTimeoutError, match=r"after 0\.3 s"):
        DataTablesHook().wait_for_processed(None, card_id, poll_interval=0.1, timeout=0.3)
