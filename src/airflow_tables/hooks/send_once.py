"""A paid import is sent exactly once: the one protocol of the hook's ``import_csv`` in a task and of both operators.

Before the file is sent, a note (:class:`~airflow_tables.evidence.SentImport`) goes to the
task's durable store: what to look for if the answer is lost. A later try of the same series
reads it (:meth:`SendOnce.earlier`): an answer recorded there is returned as it is; a lost
answer is judged on the department's tables (:func:`~airflow_tables.evidence.judge`): the table
proven to be this import's is adopted, none at all means the file never arrived (send it), and
anything else raises :class:`~airflow_tables.exceptions.DataTablesImportUncertainError` naming
each candidate, sending nothing. The judge decides; this module only looks (free reads) and
sends (the one paid request, :meth:`~airflow_tables.hooks.tables.DataTablesHook.send_import`).

A task the user cleared starts a new series of tries (``_durable.task_series``): its notes are
not resumed.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from airflow_tables.evidence import (
    FileFacts,
    SentImport,
    Verdict,
    candidates,
    first_doubt,
    judge,
    now_in_service_time,
    stored_names,
    upload_name,
)
from airflow_tables.exceptions import (
    DataTablesBudgetExceededError,
    DataTablesBudgetUnavailableError,
    DataTablesImportUncertainError,
)
from airflow_tables.model import TableDetail, TableStatus, TableSummary
from airflow_tables.sources import Source, SourceError, open_source

if TYPE_CHECKING:
    from airflow_tables.hooks.tables import DataTablesHook

#: The durable note of an import sent from a task (``import_csv`` in a ``@task``), keyed per upload.
HOOK_NOTE_PREFIX = "datatables_hook_import."


class SendOnce:
    """Send one import (a new table or a replacement) at most once across the tries of a task instance.

    :param hook: the client that looks and sends.
    :param store: the task instance's durable store (``get``/``set`` of JSON values, signed:
        :func:`~airflow_tables._durable.durable_store`).
    :param key: the note's key in ``store``: one key per import a task may send.
    :param series: the task instance's series of tries (:func:`~airflow_tables._durable.task_series`).
    :param poll_interval: seconds between looks at a candidate still being read.
    :param timeout: seconds to wait for such a candidate before it counts as unproven.
    """

    def __init__(
        self,
        hook: DataTablesHook,
        store: Any,
        key: str,
        *,
        series: int,
        poll_interval: float = 5.0,
        timeout: float | None = 3600.0,
    ) -> None:
        self.hook = hook
        self.store = store
        self.key = key
        self.series = series
        self.poll_interval = poll_interval
        self.timeout = timeout

    def note(self) -> SentImport | None:
        """The note an earlier try of this series left; a note this provider did not write fails closed."""
        try:
            note = SentImport.from_json(self.store.get(self.key))
        except ValueError as err:
            raise DataTablesImportUncertainError(None, f"{err}; nothing was sent", seen=True) from None
        return note if note is not None and note.of_series(self.series) else None

    def earlier(self, project: str, source: Source) -> SentImport | None:
        """What an earlier try sent into ``project``, with its ``answer``: recorded, or adopted on evidence.

        ``None`` when no earlier try sent anything, or the service shows the file never
        arrived: then it may be sent. ``source`` (the file about to be sent) is counted when the
        note has no counts (validation did not run). Raises :class:`DataTablesImportUncertainError` when the
        evidence is not conclusive.
        """
        note = self.note()
        if note is None or note.project_id != project:
            return None
        if note.answer:
            self.hook.log.info("%s was answered with %s in an earlier try; not sent again", note.what, note.answer)
            return note
        if note.facts is None:
            note = replace(note, facts=file_facts(source))
        verdict = self._verdict(note)
        if verdict.proven is None:
            if verdict.nothing_arrived:
                return None
            raise DataTablesImportUncertainError(None, verdict.uncertainty(), seen=True)
        table, facts_ = verdict.proven, note.facts
        assert facts_ is not None  # nothing is proven without them
        self.hook.log.info(
            "%s, sent by an earlier try whose answer was lost, reached the service as %s: named %r, read at %s "
            "(after it was sent at %s) with the %s rows and the columns (%s) the file has; not sending it again",
            note.what[:1].upper() + note.what[1:], table.card_id, table.name, table.completion_time, note.sent_at,
            facts_.rows, ", ".join(facts_.columns),
        )  # fmt: skip
        answered = replace(note, answer=table.card_id)
        self.store.set(self.key, answered.to_json())
        return answered

    def send_new(self, project: str, source: Source, *, table_name: str | None, facts: FileFacts | None) -> str:
        """Import ``source`` as a new table: note the department's tables named after it, send, keep the answer."""
        name = upload_name(source.name, table_name)
        before = tuple(self.hook.tables_named_after(project, name))
        note = SentImport(project, name, before, sent_at=now_in_service_time(), series=self.series, facts=facts)
        return self._send(note, source, table_name)

    def send_replacement(
        self,
        project: str,
        source: Source,
        card_id: str,
        *,
        replaced_after: str | None,
        table_name: str | None = None,
        facts: FileFacts | None,
    ) -> str:
        """Replace ``card_id``'s data with ``source``; ``replaced_after`` is its last read's time, as just seen."""
        note = SentImport(
            project,
            card_id=card_id,
            replaced_after=replaced_after,
            sent_at=now_in_service_time(),
            series=self.series,
            facts=facts,
        )
        return self._send(note, source, table_name)

    def _send(self, note: SentImport, source: Source, table_name: str | None) -> str:
        self.store.set(self.key, note.to_json())
        try:
            answer = self.hook.send_import(note.project_id, source, note.card_id, table_name=table_name)
        except (DataTablesBudgetExceededError, DataTablesBudgetUnavailableError):
            self.store.delete(self.key)  # the budget held it back: nothing was sent, nothing for a later try to find
            raise
        self.store.set(self.key, replace(note, answer=answer).to_json())
        return answer

    def _verdict(self, note: SentImport) -> Verdict:
        """The judge's verdict on the tables the lost answer may have made, each as last seen (waited for if read)."""
        project = note.project_id
        if note.card_id is not None:
            found = self.hook.find_table(project, note.card_id)
            tables = [found] if found else []
        else:
            tables = self.hook.tables(project)
        read: list[tuple[TableSummary, TableDetail | None]] = []
        for table in candidates(note, tables):
            if table.status is TableStatus.BEING_READ and (note.file is None or table.name in stored_names(note.file)):
                table = self._read(project, table)
            doubt = first_doubt(note, table)
            detail = self.hook.table(project, table.card_id) if doubt is None else None
            read.append((table, detail))
        return judge(note, read)

    def _read(self, project: str, table: TableSummary) -> TableSummary:
        """``table`` once it is not being read (waiting for it), as the last look saw it."""
        look = self.hook.wait_for_table(project, table.card_id, poll_interval=self.poll_interval, timeout=self.timeout)
        return look.table or table


def import_in_task(
    hook: DataTablesHook,
    context: Any,
    project_id: str | None,
    file_path: str | os.PathLike | Any,
    card_id: str | None,
    encoding: str | None,
    table_name: str | None,
    *,
    sent: Source | None = None,
    facts: FileFacts | None = None,
) -> str:
    """:meth:`~airflow_tables.hooks.tables.DataTablesHook.import_csv` inside a task: sent once per task instance.

    The note is keyed by the department, the source's identity (its location and content:
    :func:`~airflow_tables.sources.identity`), the upload's name and ``card_id``: two files
    called ``orders.csv`` in one task are two imports, and the same file imported again by a
    later try is one. It is kept until the task instance ends, and signed
    (:func:`~airflow_tables._durable.durable_store`): a note that does not verify is ignored
    with a warning. ``sent`` is the file to send when it is not ``file_path`` itself (the good rows
    of ``on_bad_rows="quarantine"``), ``facts`` what they hold: the note is still keyed by the file.
    """
    from airflow_tables._durable import durable_store, kept_until_the_end, task_series
    from airflow_tables.sources import identity

    try:
        source = open_source(file_path, encoding=encoding)
        name = upload_name(source.name, table_name)
        where = identity(source)
    except (SourceError, OSError) as err:
        label, reason = (err.label, err.reason) if isinstance(err, SourceError) else (str(file_path), str(err))
        raise SourceError(label, f"{reason}; nothing was sent to the Data Tables Service.") from None
    settings = hook.settings
    project = settings.department(project_id)
    key = HOOK_NOTE_PREFIX + hashlib.sha256(f"{project}\0{where}\0{name}\0{card_id}".encode()).hexdigest()[:24]
    kept_until_the_end(context, key)  # below 3.3 a Variable: deleted when the task instance ends
    store = _ReleaseTwoNotes(durable_store(context, settings.api_key, hook.log), project, name, card_id)
    once = SendOnce(hook, store, key, series=task_series(context))
    source = sent or source
    earlier = once.earlier(project, source)
    if earlier is not None and earlier.answer is not None:
        return earlier.answer
    if card_id is None:
        return once.send_new(project, source, table_name=table_name, facts=facts)
    table = hook.find_table(project, card_id)
    replaced_after = table.completion_time if table else None
    return once.send_replacement(
        project, source, card_id, replaced_after=replaced_after, table_name=table_name, facts=facts
    )


class _ReleaseTwoNotes:
    """The task's store, reading a note the hook of release 0.2 wrote (a task retried across the upgrade).

    Its notes had no department, file or ``card_id`` (the key held them) and kept the answer under
    ``card_id`` (a new table) or ``replaced`` (a replacement); they are read as today's note.
    """

    def __init__(self, store: Any, project: str, name: str, card_id: str | None) -> None:
        self._store, self._project, self._name, self._card_id = store, project, name, card_id

    def get(self, key: str) -> Any:
        value = self._store.get(key)
        if not isinstance(value, dict) or "project_id" in value:
            return value
        answer = value.get("card_id" if self._card_id is None else "replaced")
        evidence = {"sent_at": value.get("sent_at"), "series": value.get("series"), "answer": answer}
        if self._card_id is None:
            return {"project_id": self._project, "file": self._name, "before": value.get("before") or [], **evidence}
        return {
            "project_id": self._project,
            "card_id": self._card_id,
            "replaced_after": value.get("replaced_after"),
            **evidence,
        }

    def set(self, key: str, value: Any) -> None:
        self._store.set(key, value)


def file_facts(file_path: str | os.PathLike | Any, encoding: str | None = None) -> FileFacts | None:
    """What validation finds in a file to compare with a table (rows, column names, types); ``None`` if it cannot."""
    from airflow_tables.validation import validate_source

    try:
        report = validate_source(open_source(file_path, encoding=encoding), column_types=True)
    except Exception:  # a file that cannot be read now gives no evidence
        return None
    return FileFacts.of(report)
