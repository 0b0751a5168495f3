"""``if_older``: a backfill never puts older data over a table a later run replaced.

The service replaces a table's data whole and cannot undo it. So, per table, the provider keeps
which run last replaced it, whichever DAG that run belongs to: its logical date, DAG, run and
task. A replacement from a run with an OLDER logical date is held back: ``"skip"`` (the default)
marks the task skipped, ``"fail"`` fails it (no retry), ``"replace"`` sends it anyway; in each case
the log names the run that holds the table. Nothing is sent when held back, so it costs nothing.
A run of the same logical date (a retry, a clear, a second DAG on the same schedule) is not older.
A run without a logical date (Airflow 3's manual runs may have none) is never held back, and
leaves the record as it is (it has no date to compare a later run with).

The record is written once the service has accepted the file (the table's data is then the run's,
even if its reading fails), in an Airflow Variable keyed by the table's asset name
(``airflow_tables.replaced.<ProjectID>/<CardID>``), on every Airflow version.
Not in the task state store (Airflow 3.3): it belongs to one task instance, and this record is the
table's, shared by every DAG. Not in Airflow 3.3's asset state store either: its execution API
takes only assets a DAG declares (active assets), and the tables written here are recorded
through an asset alias and mostly declared by no DAG, so the record would be kept for some tables
and silently not for others. One Variable per table keeps one record on 3.1, 3.2 and 3.3 (and
across an upgrade), like the task notes of :mod:`airflow_tables._durable` below 3.3. Any DAG
author can write a Variable, so the record is signed with the connection's key
(:func:`~airflow_tables._durable.shared_records`), and one that does not verify, or whose date
has no zone or lies in the future, is ignored with a warning: it would hold every replace back.

Clearing the run that holds a table runs it again with its own date: it is not older, so it
replaces the table. Deleting that run leaves the record: older runs stay held back until the
Variable is deleted (Admin > Variables) or a run of a later date replaces the table. Two runs that
replace the same table at the same moment both pass the check (it is not a lock); the one the
service accepts last holds the table, and the record says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_tables.version_compat import AirflowFailException, AirflowSkipException

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_tables.operators.tables import DataTablesImportOperator

CHOICES = ("skip", "fail", "replace")
PREFIX = "airflow_tables.replaced."


def check_choice(if_older: object) -> None:
    """Refuse, when the DAG is parsed (``ValueError``), a choice no run could follow."""
    if if_older not in CHOICES:
        raise ValueError(f"if_older must be one of {', '.join(map(repr, CHOICES))}, not {if_older!r}")


def _key(base_url: str, project: str, card_id: str) -> str:
    """The record's name below :data:`PREFIX`: the table's asset name."""
    from airflow_tables.assets import table_ref

    return table_ref(project, card_id, service=base_url).name


def _records(api_key: str, log: Any) -> Any:
    """The records, signed with the connection's key (``_durable.SignedStore``): a Variable writer cannot forge one."""
    from airflow_tables._durable import shared_records

    description = "airflow-tables: the run that last replaced this table"
    return shared_records(PREFIX, api_key, description, log)


def logical_date(context: Context) -> datetime | None:
    """This run's logical date; ``None`` for a run without one (never held back)."""
    dag_run = context.get("dag_run")
    value = getattr(dag_run, "logical_date", None) if dag_run is not None else context.get("logical_date")
    return value if isinstance(value, datetime) else None


def holder(record: Any, now: datetime) -> dict[str, Any] | None:
    """The run a verified record names as holding the table, when it is sane; else ``None``.

    A record signed by this provider with this connection's key is still checked: its logical date
    must carry a zone (one without cannot be compared with a run's) and lie no later than ``now``
    (a run of a later date has not replaced anything yet); anything else would hold every replace
    of the table back for good.
    """
    when = _date(record.get("logical_date")) if isinstance(record, dict) else None
    return record if when is not None and when <= now else None


def _date(value: object) -> datetime | None:
    try:
        when = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return when if when is not None and when.tzinfo is not None else None


def _describe(record: dict[str, Any]) -> str:
    return (
        f"run {record.get('run_id')} of DAG {record.get('dag_id')} (task {record.get('task_id')}, "
        f"logical date {record['logical_date']})"
    )


@dataclass(frozen=True)
class BackfillGuard:
    """``if_older``, deciding on this run's logical date and the record of the run that holds the table (no I/O)."""

    if_older: str

    @property
    def checks(self) -> bool:
        """Whether the record is read at all: not under ``"replace"``."""
        return self.if_older != "replace"

    @staticmethod
    def newer(mine: datetime | None, held: dict[str, Any] | None) -> bool:
        """Whether ``held`` (a sane record, see :func:`holder`) is of a later run than this one (``mine``)."""
        return mine is not None and held is not None and datetime.fromisoformat(held["logical_date"]) > mine

    def held_back(self, mine: datetime | None, held: dict[str, Any] | None, project: str, card_id: str) -> str | None:
        """Why this run does not replace the table (``None``: it does), said for a person."""
        if not self.checks or not self.newer(mine, held):
            return None
        assert mine is not None and held is not None  # newer() made sure
        return (
            f"table {card_id} in department {project} holds newer data: {_describe(held)} replaced it, and this "
            f"run's logical date is {mine.isoformat()}; nothing was sent and no credit was spent"
        )


def check_not_older(task: DataTablesImportOperator, context: Context, project: str, card_id: str) -> None:
    """Before a replacement is sent: hold back a run older than the one that last replaced the table."""
    guard = BackfillGuard(task.if_older)
    if not guard.checks:
        return
    mine = logical_date(context)
    if mine is None:
        task.log.info("This run has no logical date: if_older does not hold it back")
        return
    settings = task.hook.settings
    key = _key(settings.base_url, project, card_id)
    message = guard.held_back(mine, _holder(settings.api_key, key, task.log), project, card_id)
    if message is None:
        return
    if guard.if_older == "skip":
        held = f"if_older='skip'; the record is the Variable {PREFIX + key!r}"
        task.log.warning("%s (%s)", message, held)
        raise AirflowSkipException(f"{message} ({held})")
    raise AirflowFailException(
        f"{message}. Not retried. To send it anyway pass if_older='replace', or delete the Variable "
        f"{PREFIX + key!r} (Admin > Variables)."
    )


def record_replaced(task: DataTablesImportOperator, context: Context, project: str, card_id: str) -> None:
    """Once the service accepted a replacement: this run now holds the table (a failure here is only logged)."""
    mine = logical_date(context)
    if mine is None:
        return
    settings = task.hook.settings
    key = _key(settings.base_url, project, card_id)
    ti = context["ti"]
    record = {"logical_date": mine.isoformat(), "dag_id": ti.dag_id, "run_id": ti.run_id, "task_id": ti.task_id}
    try:
        if BackfillGuard.newer(mine, _holder(settings.api_key, key, task.log)):
            return  # if_older='replace' sent older data: the later run's date still guards the table
        _records(settings.api_key, task.log).set(key, record)
    except Exception as err:  # the file is sent; the record only guards later backfills
        task.log.warning("Could not record that this run replaced %s (%s): %s", card_id, PREFIX + key, err)


def _holder(api_key: str, key: str, log: Any) -> dict[str, Any] | None:
    """The sane record of the run that holds the table (:func:`holder`); one that is not is ignored with a warning."""
    record = _records(api_key, log).get(key)
    if record is None:
        return None
    held = holder(record, datetime.now(UTC))
    if held is None:
        log.warning(
            "The if_older record %r names no run that could hold the table (%r): it is ignored", PREFIX + key, record
        )
    return held


__all__ = ["CHOICES", "BackfillGuard", "check_choice", "check_not_older", "holder", "logical_date", "record_replaced"]
