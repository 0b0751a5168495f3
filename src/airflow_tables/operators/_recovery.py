"""How a try avoids paying again: the job an earlier try sent, a clear, an unchanged file.

* :func:`job_sent_earlier`: the job of an earlier try whose file reached the service (its answer
  kept, or its lost answer adopted on evidence by :mod:`airflow_tables.hooks.send_once`).
* :func:`forget_cleared_job`: a task the user cleared starts a new job; a retry resumes (and so
  does a clear while the job's table is still being read from the same file).
* :func:`unchanged`: ``skip_if_unchanged``'s decision, from the table's last upload record
  (:mod:`airflow_tables.utils.events`) and one look at the table.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from airflow_tables.model import TableStatus
from airflow_tables.operators._job import NOTES, Job
from airflow_tables.version_compat import AirflowFailException

if TYPE_CHECKING:
    from airflow_tables.hooks.send_once import SendOnce
    from airflow_tables.hooks.tables import DataTablesHook
    from airflow_tables.sources import Source
    from airflow_tables.utils.events import UploadRecord


def job_sent_earlier(once: SendOnce, project: str, source: Source) -> Job | None:
    """The job of an earlier try that sent the file (answered, or adopted on evidence); ``None``: send it.

    :meth:`~airflow_tables.hooks.send_once.SendOnce.earlier` decides; evidence that is not
    conclusive fails the task without retry, naming the candidates, and nothing is sent.
    """
    from airflow_tables.exceptions import DataTablesImportUncertainError

    try:
        sent = once.earlier(project, source)
    except DataTablesImportUncertainError as err:
        raise AirflowFailException(f"{err.msg}; not retried") from None
    if sent is None or sent.answer is None:
        return None
    rows, columns = (sent.facts.rows, len(sent.facts.columns)) if sent.facts is not None else (None, None)
    return Job(project, sent.answer, sent.replaced_after, rows=rows, columns=columns, series=once.series)


def send_once(task: Any, context: Any) -> SendOnce:
    """The task instance's one import, sent once across its tries (its note in the task's durable store)."""
    from airflow_tables._durable import task_series
    from airflow_tables.hooks.send_once import SendOnce
    from airflow_tables.operators._job import PENDING_KEY

    return SendOnce(
        task.hook,
        task._store(context),
        PENDING_KEY,
        series=task_series(context),
        poll_interval=task.poll_interval,
        timeout=task.timeout,
    )


def unchanged_since_recorded(task: Any, project: str, fingerprint: str) -> Job | None:
    """``skip_if_unchanged``: a skipped job when the table's last recorded upload is this file and still its data."""
    from airflow_tables.assets import table_ref
    from airflow_tables.utils.events import last_upload

    assert task.card_id is not None  # skip_if_unchanged needs a card_id
    settings = task.hook.settings
    record = last_upload(table_ref(project, task.card_id, service=settings.base_url), settings.api_key)
    return unchanged(task.hook, task.log, record, project, task.card_id, fingerprint)


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

    if isinstance(file_path, (list, tuple)):  # combined parts: no one file to stamp (a pattern stats as none)
        return None
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
        source = open_source(
            task.file_path, encoding=task.encoding, allowed=task.allowed_sources, input_format=task.input_format
        )
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
