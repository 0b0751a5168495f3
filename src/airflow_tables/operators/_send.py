"""Sending an import's file once: a new table, or a replacement once its table is not being read; or, in a dry
run, deciding it (:func:`decide_import`, the same steps up to the send).

What the import operator (:mod:`airflow_tables.operators.tables`) calls once its checks have
passed: the paid request goes through :class:`~airflow_tables.hooks.send_once.SendOnce` (a lost
answer is adopted, not paid for again), and a refusal that no later try could change ends the
task without retry (:mod:`~airflow_tables.operators._refusals`). The guards that stand right before
a replacement (a table fed by a live connection, an older run, a changed schema) run here, on the
look that found the table idle.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from airflow_tables.evidence import FileFacts
from airflow_tables.model import TableStatus
from airflow_tables.operators import _backfill, _schema
from airflow_tables.operators._budget import waiting_for_budget
from airflow_tables.operators._checks import (
    Checked,
    check_arguments,
    check_file,
    opened_source,
    refuse_if_mapped_alike,
    warn_if_mapped_twice,
)
from airflow_tables.operators._dry_run import Plan, Planned, PlannedSend, decided
from airflow_tables.operators._job import Job
from airflow_tables.operators._recovery import unchanged_since_recorded
from airflow_tables.operators._refusals import ending_the_task
from airflow_tables.version_compat import AirflowFailException

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_tables.hooks.send_once import SendOnce
    from airflow_tables.model import Look, TableSummary
    from airflow_tables.operators.tables import DataTablesImportOperator
    from airflow_tables.sources import Source

    #: What sends the import: the task's :class:`SendOnce`, or a dry run's stand-in that raises its decision.
    Sender = SendOnce | PlannedSend


def send_file(
    task: DataTablesImportOperator, context: Context, project: str, once: Sender, source: Source, checked: Checked
) -> Job:
    """Send the file once, failing without retry on a refusal that no later try could change.

    In a dry run ``once`` is a :class:`~airflow_tables.operators._dry_run.PlannedSend`, which raises
    the decision where the file would be sent.
    """
    from airflow_tables.evidence import upload_name

    facts = FileFacts.of(checked.report)
    with ending_the_task(task._refused(project), task.log), waiting_for_budget(task):
        if task.replaces:
            return _replace(task, context, project, once, source, checked)
        refuse_if_mapped_alike(task, context, project, upload_name(source.name, task.table_name))
        sent = once.send_new(project, source, table_name=task.table_name, facts=facts)
        return Job(project, sent, rows=checked.rows, columns=checked.columns, series=once.series)


def _replace(
    task: DataTablesImportOperator, context: Context, project: str, once: Sender, source: Source, checked: Checked
) -> Job:
    """Replace the table's data once it is not being read (the service refuses it meanwhile).

    ``send_when_idle`` keeps the replacement rule of :mod:`airflow_tables.model` (a second after
    the look that saw the last read end); a table that stays busy, or a refusal, ends the task as
    :mod:`~airflow_tables.operators._refusals` says.
    """
    card_id = task.card_id
    assert card_id is not None  # check_arguments made sure
    warn_if_mapped_twice(task, context, card_id)
    facts = FileFacts.of(checked.report)

    def send(look: Look) -> Job:
        if look.status is TableStatus.GONE:
            raise AirflowFailException(f"cannot replace {card_id}: it is not in department {project}")
        table = look.table
        _refuse_if_connected(card_id, table)
        _backfill.check_not_older(task, context, project, card_id)
        _schema.check_schema(task, context, project, card_id, source, table, checked.report)
        after = table.completion_time if table else None
        once.send_replacement(project, source, card_id, replaced_after=after, table_name=task.table_name, facts=facts)
        job = Job(project, card_id, after, rows=checked.rows, columns=checked.columns, series=once.series)
        _backfill.record_replaced(task, context, project, card_id)
        return job

    if isinstance(once, PlannedSend):  # a dry run decides on one look, without waiting out a read
        once.seen = task.hook.look(project, card_id)
        return send(once.seen)
    return task.hook.send_when_idle(
        project,
        card_id,
        send,
        attempts=task.conflict_retries,
        poll_interval=task.poll_interval,
        timeout=task.timeout,
    )


def decide_import(task: Any, context: Context) -> Plan:
    """What an import or a replacement would do: its checks and looks as ``submit_job`` makes them, up to the send.

    What a retry would find of an earlier try is not looked for: a dry run sends nothing to find.
    """

    def flow() -> Plan | None:
        check_arguments(task)
        with opened_source(task) as source, check_file(task, context, source) as checked:
            task._learn_input(source, checked)  # what the checks found, for lineage: as the real run says it
            project = task.department
            aside = ""
            if checked.bad_rows:
                aside = f"; {checked.bad_rows} bad row(s) set aside in {checked.rejects}"
            if checked.fingerprint is not None and unchanged_since_recorded(task, project, checked.fingerprint):
                reason = f"{task.card_id} holds this file already and was not refreshed since (skip_if_unchanged)"
                return Plan("skip", task.card_id, 0, reason + aside, project)
            try:
                send_file(task, context, project, PlannedSend(), checked.sent or source, checked)
            except Planned as planned:
                raise Planned(replace(planned.plan, reason=planned.plan.reason + aside)) from None
        return None

    nothing = Plan("refuse", task.card_id, 0, "the checks ended without a decision")
    return decided(flow, lambda: task.department, nothing)


def bytes_sent(sent: Source, checked: Checked) -> int | None:
    """The bytes the service received, where known without reading the file again (for lineage's statistics).

    A file sent as stored (or its staged copy) is its size; one converted to UTF-8 on the way is the
    size validation counted after conversion; an unvalidated converted file is not known.
    """
    if sent.codec is None and sent.size_known:
        return sent.stored_size
    report = checked.report
    if report is not None and report.converted_bytes is not None:
        return int(report.converted_bytes)
    return None


def _refuse_if_connected(card_id: str, table: TableSummary | None) -> None:
    """Fail, before anything is sent, a replace of a table the look shows fed by a live connection.

    Such a table's data comes from the connected system; the service refuses an upload in its
    place (409), and would refuse it on every retry. A paused connection is left to the service.
    """
    if table is not None and table.fed_by_live_connection:
        source = table.connector_source or "a connected system"
        raise AirflowFailException(
            f"cannot replace {card_id} ({table.name}): it is fed by an active connection to "
            f"{source} (LockedFromDelete is true), and the service takes no upload in its place; nothing was sent. "
            "Pause the connection first, or import the file as a table of its own."
        )
