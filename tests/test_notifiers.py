"""DataTablesFreshnessNotifier: one look at the table, one sentence saying its state, sync and async alike."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from tests.triggers.test_tables import imported

from airflow_tables.notifiers import DataTablesFreshnessNotifier

RUN = {"dag_run": {"dag_id": "orders_daily", "dag_run_id": "scheduled__2026-11-26"}}
CONTEXT = {**RUN, "deadline": {"id": "d1", "deadline_time": "2026-11-26T07:00:00+00:00"}}
GONE = "CRD-00000000-0000-4000-8000-00000000dead"


def said(card_id: str, context: dict = CONTEXT, **kwargs) -> str:
    """What the notifier says in the triggerer: built as AsyncCallback builds it, awaited, its result."""

    async def go():
        return await DataTablesFreshnessNotifier(card_id=card_id, context=dict(context), **kwargs)

    return asyncio.run(go())


def test_a_table_still_being_read_is_said_to_be_so(datatables_conn, tmp_path):
    datatables_conn.set_processing_delay(30)
    card_id = imported(datatables_conn, tmp_path)
    assert said(card_id) == (
        "DAG orders_daily run scheduled__2026-11-26 missed its deadline of 2026-11-26T07:00:00+00:00: "
        f"table {card_id} (t) is still being read."
    )


def test_a_table_not_read_since_the_instant_is_stale_since_its_last_read(datatables_conn, tmp_path):
    card_id = imported(datatables_conn, tmp_path)
    last = datatables_conn.wait_until_processed(datatables_conn.project_id, card_id)["UploadCompletionTime"]
    after = datetime.fromisoformat(last) + timedelta(hours=1)
    message = said(
        card_id,
        completed_after="{{ dag_run.logical_date }}",
        context={
            **CONTEXT,
            "dag_run": {**CONTEXT["dag_run"], "logical_date": after.replace(tzinfo=UTC).isoformat()},
        },
    )
    assert message.endswith(
        f"table {card_id} (t) is stale: not read since {last} UTC, which is not after {after.isoformat()} UTC."
    )


def test_a_table_read_after_the_instant_is_fresh_and_the_run_late_elsewhere(datatables_conn, tmp_path):
    card_id = imported(datatables_conn, tmp_path)
    last = datatables_conn.wait_until_processed(datatables_conn.project_id, card_id)["UploadCompletionTime"]
    message = said(card_id, completed_after=datetime.fromisoformat(last) - timedelta(seconds=1))
    assert message.endswith(
        f"table {card_id} (t) was read at {last} UTC (5 rows): the table is fresh; the run is late elsewhere."
    )


def test_a_gone_table_is_named_with_its_department_and_the_sync_path_logs_it(datatables_conn, capfd):
    notifier = DataTablesFreshnessNotifier(card_id=GONE, project_id=datatables_conn.project_id)
    notifier(dict(RUN))  # as an on_failure_callback calls it: no deadline in the context
    assert (
        f"DAG orders_daily run scheduled__2026-11-26: table {GONE} is not (or no longer) in department "
        f"{datatables_conn.project_id}." in "".join(capfd.readouterr())
    )


def test_a_completed_after_that_is_no_date_time_is_named_not_raised(datatables_conn, tmp_path):
    """docs/deadlines.md: the notifier never fails the callback (issue 37, point 10: it raised here)."""
    card_id = imported(datatables_conn, tmp_path)
    last = datatables_conn.wait_until_processed(datatables_conn.project_id, card_id)["UploadCompletionTime"]
    assert said(card_id, completed_after="soon").endswith(
        f"table {card_id} (t) was last read at {last} UTC; freshness was not judged: completed_after='soon' is "
        "not a date-time; give a datetime or ISO 8601 text (e.g. '{{ dag_run.data_interval_end }}')."
    )


@pytest.mark.parametrize("field", ["card_id", "completed_after"])
def test_an_argument_that_cannot_render_is_named_not_raised(datatables_conn, field):
    arguments = {"card_id": GONE, field: "{{ dag_run.no_such_key.deeper }}"}
    message = said(**arguments)
    assert message.startswith("DAG orders_daily run scheduled__2026-11-26 missed its deadline")
    assert "the notifier's arguments could not be rendered (UndefinedError: " in message
    assert message.endswith("; look at it.")


def test_airflow_lists_the_notifier_among_the_providers_notifications():
    from airflow.providers_manager import ProvidersManager

    assert "airflow_tables.notifiers.DataTablesFreshnessNotifier" in ProvidersManager().notification


def test_a_connection_that_does_not_exist_is_said_not_raised(datatables_conn):
    message = said(GONE, datatables_conn_id="no_such_connection")
    assert message.startswith(
        f"DAG orders_daily run scheduled__2026-11-26 missed its deadline of 2026-11-26T07:00:00+00:00: "
        f"table {GONE}: its state could not be read ("
    )
    assert "no_such_connection" in message and message.endswith("; look at it in the service.")
