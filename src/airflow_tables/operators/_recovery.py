"""What an import keeps for its next try, and the two ways a try avoids paying again.

* :class:`Job`: the table a try works on, as a typed value. It is the ``external_id`` of
  ``ResumableJobMixin`` (kept in the task's durable store between tries, so it must be JSON);
  anything else found there fails the task instead of being guessed at.
* :class:`SentImport`: the note written just before the file is sent. When the import's answer
  is lost (``DataTablesImportUncertainError``), the next try reads it and :func:`adopt_lost_import`
  adopts the table the service did create (or the replacement it did start) instead of paying
  again, only on evidence (name as stored, time, validation's counts); else it fails naming them.
* :func:`forget_cleared_job`: a task the user cleared starts a new job; a retry resumes (and so
  does a clear while the job's table is still being read from the same file).
* :func:`unchanged`: ``skip_if_unchanged``'s decision, from the table's last upload record
  (:mod:`airflow_tables.utils.events`) and one look at the table.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_tables.evidence import FileFacts
from airflow_tables.model import TableStatus, TableWatch
from airflow_tables.operators._schema import APPROVAL_KEY
from airflow_tables.version_compat import AirflowFailException

if TYPE_CHECKING:
    from pydantic import JsonValue

    from airflow_tables.hooks.tables import DataTablesHook
    from airflow_tables.utils.events import UploadRecord

#: The durable note of an import sent but not yet answered (see :func:`adopt_lost_import`).
PENDING_KEY = "datatables_import_sent"
#: Every note the import keeps in ``durable_store`` beside its job (removed once the task has ended, or
#: when a clear starts a new job): the pending import, and a schema change shown for approval.
NOTES = (PENDING_KEY, APPROVAL_KEY)


def _is(value: object, *kinds: type) -> bool:
    """``isinstance``, except that a JSON boolean is no number."""
    return bool in kinds if isinstance(value, bool) else isinstance(value, kinds)


#: The JSON types of each field of a stored :class:`Job`.
_JOB_TYPES: dict[str, tuple[type, ...]] = {
    "project_id": (str,),
    "card_id": (str,),
    "replaced_after": (str, type(None)),
    "accepted_at": (int, float, type(None)),
    "fingerprint": (str, type(None)),
    "skipped": (bool,),
    "rows": (int, type(None)),
    "columns": (int, type(None)),
    "series": (int, type(None)),
    "stamp": (str, type(None)),
}


@dataclass(frozen=True)
class Job:
    """The table a try works on: what a retry needs to find it again.

    :param replaced_after: for a replacement, the previous read's ``UploadCompletionTime`` (the
        watch's replacement rule, :mod:`airflow_tables.model`).
    :param accepted_at: when the service accepted the file (``time.time()``), for the wait metric.
    :param fingerprint: the bytes sent (``skip_if_unchanged`` only), recorded on the asset event.
    :param skipped: nothing was sent: the file is what the table holds already.
    :param rows: the data rows validation counted in the file (``None`` when not validated): the
        table's ``Rows`` once read must be this (``on_read_mismatch``). Kept here, so it survives a
        deferral.
    :param columns: the columns validation counted, likewise.
    :param series: the task instance's series of tries that started the job (:func:`task_series`):
        a later series is a clear, which starts a new job.
    :param stamp: what the file was when it was sent (:func:`file_stamp`): a clear while the table
        is still being read from the same file reconnects instead (:func:`forget_cleared_job`).
    """

    project_id: str
    card_id: str
    replaced_after: str | None = None
    accepted_at: float | None = field(default_factory=time.time)
    fingerprint: str | None = None
    skipped: bool = False
    rows: int | None = None
    columns: int | None = None
    series: int | None = None
    stamp: str | None = None

    @property
    def watch(self) -> TableWatch:
        return TableWatch(self.card_id, self.replaced_after)

    def to_json(self) -> dict[str, JsonValue]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: object) -> Job:
        """The job a try stored; ``ValueError`` for anything this operator did not write."""
        fields = value if isinstance(value, dict) else None
        if (
            fields is None
            or not {"project_id", "card_id"} <= fields.keys() <= _JOB_TYPES.keys()
            or not all(_is(v, *_JOB_TYPES[k]) for k, v in fields.items())
        ):
            raise ValueError(f"the stored import job {value!r} is not one this operator wrote")
        return cls(**fields)


def stored_job(external_id: object) -> Job:
    """The job kept in the task's durable store; a store holding anything else fails the task (closed)."""
    try:
        return Job.from_json(external_id)
    except ValueError as err:
        raise AirflowFailException(str(err)) from None


def resumed_job(stored: object, project: str, card_id: str) -> Job:
    """The job of the try that deferred when the store holds it for this table, else a new record of it."""
    try:
        job = Job.from_json(stored)
    except ValueError:
        return Job(project, card_id)
    return job if job.card_id == card_id else Job(project, card_id)


@dataclass(frozen=True)
class SentImport:
    """The note of an import sent but not answered yet: a new table (``file``, ``before``) or a replacement.

    :param file: the file part's name (``<table_name>.csv`` or the file's); the service names the table after it.
    :param before: the CardIDs of the department's tables named after it before sending.
    :param card_id: the replaced table.
    :param replaced_after: its previous read's ``UploadCompletionTime``.
    :param sent_at: when the note was written, just before the file was sent, as the service writes times.
    :param rows: the rows validation counted (``None``: not validated; counted when the note is read).
    :param columns: the columns validation counted, likewise.
    :param series: the task instance's series of tries (a note of a cleared series is not resumed).
    :param facts: what validation found that the table must show (rows, column names and types:
        :mod:`airflow_tables.evidence`); ``None``: counted when the note is read.
    """

    project_id: str
    file: str | None = None
    before: tuple[str, ...] = ()
    card_id: str | None = None
    replaced_after: str | None = None
    sent_at: str | None = None
    rows: int | None = None
    columns: int | None = None
    series: int | None = None
    facts: FileFacts | None = None

    def to_json(self) -> dict[str, JsonValue]:
        evidence: dict[str, JsonValue] = {
            "sent_at": self.sent_at,
            "rows": self.rows,
            "columns": self.columns,
            "series": self.series,
            "facts": None if self.facts is None else self.facts.to_json(),
        }
        if self.card_id is not None:
            replaced = {"card_id": self.card_id, "replaced_after": self.replaced_after}
            return {"project_id": self.project_id, **replaced, **evidence}
        return {"project_id": self.project_id, "file": self.file, "before": list(self.before), **evidence}

    @classmethod
    def from_json(cls, value: object) -> SentImport | None:
        """The note, ``None`` when there is none; a note this operator did not write fails the task (closed)."""
        if value is None:
            return None
        if isinstance(value, dict) and isinstance(value.get("project_id"), str) and _evidence_ok(value):
            evidence: dict[str, Any] = {k: value.get(k) for k in _EVIDENCE}
            evidence["facts"] = FileFacts.from_json(evidence["facts"])
            card_id, after = value.get("card_id"), value.get("replaced_after")
            if isinstance(card_id, str) and card_id and _is(after, str, type(None)) and "file" not in value:
                return cls(value["project_id"], card_id=card_id, replaced_after=after, **evidence)
            before = value.get("before")
            if (
                isinstance(value.get("file"), str)
                and isinstance(before, list)
                and all(isinstance(b, str) for b in before)
                and "card_id" not in value
            ):
                return cls(value["project_id"], file=value["file"], before=tuple(before), **evidence)
        raise AirflowFailException(f"the stored note of a sent import {value!r} is not one this operator wrote")


#: The JSON types of a note's evidence (absent in a note of the previous release: read as ``None``).
_EVIDENCE: dict[str, tuple[type, ...]] = {
    "sent_at": (str, type(None)),
    "rows": (int, type(None)),
    "columns": (int, type(None)),
    "series": (int, type(None)),
    "facts": (dict, type(None)),
}


def _evidence_ok(value: dict) -> bool:
    return all(_is(value.get(k), *kinds) for k, kinds in _EVIDENCE.items())


def same_series(stored_series: int | None, series: int) -> bool:
    """Whether a note or job of ``stored_series`` belongs to the current series of tries (a retry, not a clear).

    A note of the previous release has none: it is taken as this series (resumed), never paying twice.
    """
    return stored_series is None or stored_series == series


def adopt_lost_import(
    hook: DataTablesHook,
    log: Any,
    pending: SentImport | None,
    project: str,
    *,
    series: int,
    shape: Callable[[], FileFacts | None],
    poll_interval: float,
    timeout: float | None,
) -> Job | None:
    """The job of an earlier try whose import answer was lost but which the service received, on evidence.

    The hook decides (:meth:`~airflow_tables.hooks.tables.DataTablesHook._claim_lost_table`,
    ``_claim_lost_replacement``): ``None`` when the service shows the file never arrived (send it),
    the job when a table or read is proven this import's, and a failure without retry naming the
    candidates when the evidence is not conclusive. ``shape`` finds the file's facts (rows, column
    names and types) when the note has none (validation did not run, or a note of an older
    release). A note of a series the user cleared is ignored.
    """
    from airflow_tables.exceptions import DataTablesImportUncertainError

    if pending is None or pending.project_id != project or not same_series(pending.series, series):
        return None
    facts = pending.facts or shape()
    rows, columns = (facts.rows, len(facts.columns)) if facts is not None else (None, None)
    # A note of the previous release has no time: the read only has to end after the epoch.
    sent_at = pending.sent_at or "1970-01-01T00:00:00"
    wait: dict[str, Any] = {"poll_interval": poll_interval, "timeout": timeout}
    try:
        if pending.card_id is not None:  # a replacement: did the table start or finish a new read?
            after = pending.replaced_after
            landed = hook._claim_lost_replacement(
                project, pending.card_id, replaced_after=after, sent_at=sent_at, facts=facts, **wait
            )
            if not landed:
                return None
            log.info("An earlier try's replacement of %s reached the service; not sending it again", pending.card_id)
            return Job(project, pending.card_id, after, rows=rows, columns=columns, series=series)
        assert pending.file is not None  # SentImport.from_json made sure
        found = hook._claim_lost_table(
            project, pending.file, before=pending.before, sent_at=sent_at, facts=facts, **wait
        )
    except DataTablesImportUncertainError as err:
        raise AirflowFailException(f"{err.msg}; not retried") from None
    if found is None:
        return None
    log.info("An earlier try's import of %s reached the service as %s; not importing again", pending.file, found)
    return Job(project, found, rows=rows, columns=columns, series=series)


def unchanged(
    hook: DataTablesHook, log: Any, record: UploadRecord | None, project: str, card_id: str, fingerprint: str
) -> Job | None:
    """A skipped job when the file is what was last uploaded to the table and nobody refreshed it since."""
    if record is None or record.fingerprint != fingerprint:
        why = "no earlier upload recorded" if record is None else "the file differs from the last upload"
        log.info("Replacing %s: %s", card_id, why)
        return None
    look = hook.look(project, card_id)
    table = look.table
    if look.status is not TableStatus.READY or table is None:
        log.info("Replacing %s although the file is unchanged: %s", card_id, look.message)
        return None
    # Completion times have whole seconds: a refresh ending in the same second as our upload's read
    # would keep the time, so the row count (recorded with it) is compared too.
    if table.completion_time != record.completion_time or table.rows != record.rows:
        log.info(
            "Replacing %s although the file is unchanged: the table was refreshed since (read at %s with %s "
            "rows; our last upload's read ended at %s with %s rows)",
            card_id,
            table.completion_time,
            table.rows,
            record.completion_time,
            record.rows,
        )
        return None
    log.info(
        "Skipped: %s holds this file's data already (same bytes as the upload by %s/%s/%s, read at %s, and "
        "not refreshed since); nothing was sent, no credit spent",
        card_id,
        record.dag_id,
        record.task_id,
        record.run_id,
        table.completion_time,
    )
    from airflow_tables.metrics import incr

    incr("imports_skipped", project_id=project)
    return Job(project, card_id, skipped=True)


def file_stamp(file_path: Any, source: Any) -> str | None:
    """What the file is, cheaply: a local file's size and modification time, an object's size and version.

    Not a fingerprint (no byte is read): enough to tell that a file was not rewritten between a
    send and a clear; ``None`` when the storage gives no version (then a clear always sends again).
    """
    from airflow_tables.sources.storage import local_file_path

    local_path = local_file_path(file_path)
    if local_path is not None:
        try:
            info = os.stat(local_path)
        except OSError:
            return None
        return f"file:{info.st_size}:{info.st_mtime_ns}"
    version = getattr(source, "version", None)
    return f"object:{source.stored_size}:{version}" if version else None


def still_read_from_the_same_file(task: Any, job: Job) -> bool:
    """Whether an earlier series' ``job`` is still being read from ``task``'s file as it is now (a clear to unstick).

    One look at the table, then, only while it is being read, one look at the file (a stat,
    or the object's metadata): its stamp must be the one kept with the job.
    """
    from airflow_tables.sources import SourceError, open_source

    if job.stamp is None or task.hook.look(job.project_id, job.watch).status is not TableStatus.BEING_READ:
        return False
    try:
        source = open_source(task.file_path, encoding=task.encoding, allowed=task.allowed_sources)
    except (SourceError, PermissionError, ValueError):
        return False
    return file_stamp(task.file_path, source) == job.stamp


def forget_cleared_job(
    store: Any, key: str, series: int, log: Any, only_slow: Callable[[Job], bool] | None = None
) -> None:
    """Before a try: drop the job and notes an earlier series of tries kept, once the task was cleared.

    A retry keeps its series and resumes the job (never paying twice); a task the user cleared
    starts a new series (``_durable.task_series``), so what an earlier series kept is forgotten
    and the try starts a new job: checks, then sends again (``skip_if_unchanged`` still applies).
    One exception: a clear that only unsticks a slow wait (a deferred import marked failed, then
    cleared, while its table is still being read from the same file: ``only_slow``) keeps the
    job for the new series, which reconnects to the table instead of making a second one.
    """
    stored = store.get(key)
    if not isinstance(stored, dict):
        return
    kept = stored.get("series")
    if not isinstance(kept, int) or isinstance(kept, bool) or kept == series:
        return
    try:
        job = Job.from_json(stored)
    except ValueError:
        job = None
    if job is not None and only_slow is not None and only_slow(job):
        log.warning(
            "The task was cleared while table %s, which its earlier tries imported, is still being read from the "
            "same file: reconnecting to it rather than importing the file again (a second table, a second "
            "credit). To import anew, clear it again once the table is read, or change the file.",
            job.card_id,
        )
        store.set(key, {**stored, "series": series})
        return
    log.info(
        "The task was cleared since its job on %s (tries from %s; now from %s): starting a new job",
        stored.get("card_id"),
        kept,
        series,
    )
    for name in (key, *NOTES):
        store.delete(name)
