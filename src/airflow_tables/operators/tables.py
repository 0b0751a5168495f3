"""Operators for the Data Tables Service: import a CSV as a table, replace a table's data, delete a table.

Importing this module (what every DAG file does) is cheap: the hook, the validator,
pandas and Great Expectations are imported inside ``execute``.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_tables._durable import SignedStore, durable_store, forgotten_when_ended, task_series
from airflow_tables.assets import table_ref
from airflow_tables.evidence import FileFacts
from airflow_tables.links import DataTablesTableLink, table_url
from airflow_tables.model import TableStatus, check_wait
from airflow_tables.operators import _backfill, _schema
from airflow_tables.operators._checks import (
    Checked,
    check_arguments,
    check_file,
    check_options,
    check_read,
    failed_read,
    opened_source,
    refusals_are_final,
    refuse_if_mapped_alike,
    warn_if_mapped_twice,
)
from airflow_tables.operators._recovery import (
    NOTES,
    PENDING_KEY,
    Job,
    SentImport,
    adopt_lost_import,
    file_stamp,
    forget_cleared_job,
    resumed_job,
    still_read_from_the_same_file,
    stored_job,
    unchanged,
)
from airflow_tables.utils import waiting
from airflow_tables.utils.events import TABLES_ALIAS, UploadRecord, last_upload, record_upload
from airflow_tables.utils.tasks import DataTablesTaskMixin
from airflow_tables.utils.waiting import table_of
from airflow_tables.version_compat import (
    AirflowException,
    AirflowFailException,
    ResumableJobMixin,
    conf,
)

if TYPE_CHECKING:
    from airflow.sdk import Context, ObjectStoragePath, XComArg
    from pydantic import JsonValue

    from airflow_tables.model import Look, TableSummary
    from airflow_tables.sources import Source

_DEFERRABLE = conf.getboolean("operators", "default_deferrable", fallback=False)
__all__ = ["TABLES_ALIAS", "DataTablesDeleteOperator", "DataTablesImportOperator", "DataTablesReplaceOperator"]


class _DataTablesOperator(DataTablesTaskMixin, BaseOperator):
    """A Data Tables operator: ``project_id`` and ``datatables_conn_id`` on top of BaseOperator."""

    def __init__(
        self,
        *,
        project_id: str | None = None,
        datatables_conn_id: str = "datatables_default",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.project_id = project_id
        self.datatables_conn_id = datatables_conn_id


class DataTablesImportOperator(ResumableJobMixin, _DataTablesOperator):
    """Import a CSV file as a new table, or as an existing table's new data when ``card_id`` is given.

    The file is validated first (``validate=True``): a file the service would refuse or
    misread fails the task before any request, so it costs nothing. An optional Great
    Expectations suite (``expectations``: a suite, an expectation or a list of them, a suite
    dict, the path of a suite JSON file, or a callable ``configure_expectations(context)``
    returning one of these) is checked next, also before any request, on the columns it
    names as the service will type them; its result goes to XCom ``gx_result``, and a failed
    suite fails the task without retry (see docs/expectations.md). The import itself costs one
    credit and is sent once: the CardID is kept in the task state store as soon as the
    service accepts the file, so a retried task re-attaches to that table instead of
    importing again. The CardID and the table's URL go to XCom before the wait, and the
    task returns the CardID. Each successful import records an event on the table's asset
    (:func:`airflow_tables.assets.table_asset`).

    :param file_path: the CSV to upload (templated): a local path, an ``airflow.sdk.ObjectStoragePath``
        or a URI such as ``s3://aws_conn@bucket/key.csv`` (see docs/sources.md).
    :param table_name: the name people see (templated): the file part is sent as
        ``<table_name>.csv`` and the service names the table after it. Default: the file's base name.
    :param encoding: the file's encoding, a Python codec name such as ``cp1252`` or ``utf-16``; the
        file is checked in it and sent as UTF-8. Default: the file must be UTF-8.
    :param allowed_sources: where ``file_path`` may point (not templated, so no trigger can change
        it): prefixes such as ``/data/incoming`` or ``s3://aws_default@landing/incoming/``. The
        file must also be inside ``[datatables] allowed_sources`` when that is set: this narrows
        it, never widens it. A file outside fails the task before any request, without retry
        (docs/sources.md, "Security").
    :param project_id: the department (templated); when left out, the connection's
        ``project_id``. An explicit empty value fails the task.
    :param card_id: a table of the department whose data to replace (templated). When it
        is given but renders empty (``""``, ``None``), the task fails before any request
        instead of creating a new table.
    :param wait_for_completion: wait until the service has read the file (``Processed``).
    :param deferrable: wait in the triggerer instead of on a worker. (A replacement's wait
        for an earlier read to end, before the file is sent, always runs on the worker.)
    :param poll_interval: seconds between looks at the department while waiting (> 0).
    :param timeout: seconds to wait for the table to be read before the try fails (a retry
        waits on the same table); ``None`` waits without a deadline.
    :param conflict_retries: how many times a replacement refused because the table is
        being read again is waited out and sent again.
    :param skip_if_unchanged: for a replacement (a ``card_id``): send nothing, spend no
        credit, record no asset event, when the file's bytes are those this provider last
        uploaded to the table and the table has not been refreshed since (its
        ``UploadCompletionTime`` is the one seen after that upload). The record is the
        table's last asset event, so it is shared by every DAG that feeds the table.
    :param on_read_mismatch: once the service has read a validated file, the table's ``Rows`` and
        number of ``Columns`` must be what validation counted. ``"fail"``: otherwise the task fails
        with :class:`~airflow_tables.exceptions.DataTablesReadMismatchError`, without retry (the
        table exists and the credit is spent); ``"warn"``: it logs the difference and succeeds (the
        upload is then not recorded as the table's data for ``skip_if_unchanged``).

    A retry resumes the job of an earlier try (never paying twice); a task the user cleared
    starts a new job: the file is checked and sent again (subject to ``skip_if_unchanged``).
    :param on_schema_change: for a replacement: before the file is sent, its columns (named and
        typed as the service will read them) are compared with the table's (a fetch, no credit).
        ``"allow_new_columns"`` lets new columns through and fails the task, without retry and
        before any paid request, on a column removed, renamed or retyped, listing each;
        ``"fail"`` refuses any difference (reordered columns too); ``"allow"`` checks nothing;
        ``"approve"`` asks a person in the Airflow UI (human-in-the-loop) and waits, deferred:
        approved, the file is sent; rejected or unanswered, nothing is (docs/operators.md, "Safe writes").
    :param approval_timeout: seconds an ``"approve"`` question waits for its answer (``None``: no
        limit); no answer fails the task, sending nothing.
    :param if_older: for a replacement from a run whose logical date is older than that of the
        run that last replaced the table through this provider (any DAG): ``"skip"`` the task,
        ``"fail"`` it, or ``"replace"`` anyway. Nothing is sent when held back.
    :param partition_key: the partition the table's asset event is for (templated), so that
        partitioned consumers run once per partition; by default a partitioned run's own key
        (Airflow 3.2+). A key other than the run's needs Airflow 3.3; where it cannot be given to
        the event (3.1, 3.2) the task warns and the key is only kept in the event's extras.
    """

    template_fields: Sequence[str] = ("project_id", "file_path", "card_id", "table_name", "partition_key")
    operator_extra_links = (DataTablesTableLink(),)
    ui_color = "#dbeafe"
    external_id_key = "datatables_table"

    def __init__(
        self,
        *,
        file_path: str | os.PathLike[str] | ObjectStoragePath | XComArg,
        project_id: str | None = None,
        card_id: str | None = None,
        validate: bool = True,
        expectations: Any = None,
        wait_for_completion: bool = True,
        deferrable: bool = _DEFERRABLE,
        poll_interval: float = 30.0,
        timeout: float | None = 6 * 3600.0,
        conflict_retries: int = 3,
        skip_if_unchanged: bool = False,
        encoding: str | None = None,
        allowed_sources: str | Sequence[str] | None = None,
        table_name: str | None = None,
        on_read_mismatch: str = "fail",
        on_schema_change: str = "allow_new_columns",
        approval_timeout: float | None = 24 * 3600.0,
        if_older: str = "skip",
        partition_key: str | None = None,
        datatables_conn_id: str = "datatables_default",
        **kwargs: Any,
    ) -> None:
        _schema.check_policy(on_schema_change, approval_timeout)
        _backfill.check_choice(if_older)
        check_options(poll_interval, timeout, card_id, skip_if_unchanged, encoding, allowed_sources)
        if on_read_mismatch not in ("fail", "warn"):
            raise ValueError(f"on_read_mismatch must be 'fail' or 'warn', not {on_read_mismatch!r}")
        # The table's asset is known only at run time (a new table's CardID, a templated id, the
        # connection's service): its event goes through this alias (utils/events.py).
        kwargs["outlets"] = [*(kwargs.get("outlets") or []), TABLES_ALIAS]
        super().__init__(project_id=project_id, datatables_conn_id=datatables_conn_id, **kwargs)
        self.file_path = file_path
        self.card_id = card_id
        self.replaces = card_id is not None  # given, so it must render to a CardID
        self.validate = validate
        self.expectations = expectations
        self.wait_for_completion = wait_for_completion
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.timeout = timeout
        self.conflict_retries = conflict_retries
        self.skip_if_unchanged = skip_if_unchanged
        self.encoding = encoding
        self.allowed_sources = allowed_sources
        self.table_name = table_name
        self.on_read_mismatch = on_read_mismatch
        self.on_schema_change = on_schema_change
        self.approval_timeout = approval_timeout
        self.if_older = if_older
        self.partition_key = partition_key
        self._job: Job | None = None  # the job this try works on, once published (the XComs, the asset event)
        self._table: TableSummary | None = None  # the table as the wait's last look saw it read
        self._read_as_counted = True  # False once a read differed from validation's counts ("warn")

    # -- the flow (ResumableJobMixin's steps) --------------------------------------------------

    def execute(self, context: Context) -> str:
        with forgotten_when_ended(context, self, NOTES):  # below 3.3 the notes are Variables
            try:
                check_arguments(self)
                only_slow = functools.partial(still_read_from_the_same_file, self)
                forget_cleared_job(
                    self._store(context), self.external_id_key, task_series(context), self.log, only_slow
                )
                self.execute_resumable(context)
            except BaseException:
                if self._job is None:  # the "Open table" link reads its XCom when the task ends, table or not
                    context["ti"].xcom_push(key=DataTablesTableLink().xcom_key, value="")
                raise
            # Every path through execute_resumable published the job it ended with (_publish).
            if self._job is None:
                raise AirflowException(f"{self.task_id}: the import ended without a table; this is a bug")
            self._record(context, self._job)
            return self._job.card_id

    def submit_job(self, context: Context) -> JsonValue:
        """Check the file, then import it once; return what a retry needs to find the table again.

        Before the file is sent, a note of what to look for goes to the task's durable store.
        If the import's answer is lost (``DataTablesImportUncertainError``), the next try reads
        that note and adopts the table the service did create instead of paying again.
        """
        with opened_source(self) as source:
            checked = check_file(self, context, source)
            project = self.department
            store = self._store(context)
            series = task_series(context)
            job = adopt_lost_import(
                self.hook,
                self.log,
                SentImport.from_json(store.get(PENDING_KEY)),
                project,
                series=series,
                shape=lambda: _shape_of(source),
                poll_interval=self.poll_interval,
                timeout=self.timeout,
            )
            if job is None and checked.fingerprint is not None:
                job = self._unchanged(project, checked.fingerprint)
            if job is None:
                job = self._import_once(context, project, store, source, checked)
            stamp = file_stamp(self.file_path, source)
        done = replace(job, fingerprint=checked.fingerprint, series=series, stamp=stamp).to_json()
        return self._store(context).signed(self.external_id_key, done)  # stored by the mixin as it is

    def get_job_status(self, external_id: JsonValue, context: Context) -> str:
        job = self._job_of(external_id, context)
        return self.hook.look(job.project_id, job.watch).status.value

    def is_job_active(self, status: str) -> bool:
        # A table read badly counts as "active" so that the retry reports the failure
        # (poll_until_complete) instead of paying for the same file again.
        return status in (TableStatus.BEING_READ.value, TableStatus.FAILED.value)

    def is_job_succeeded(self, status: str) -> bool:
        return status == TableStatus.READY.value

    def poll_until_complete(self, external_id: JsonValue, context: Context) -> None:
        """Wait for the table (the CardID it ends with is the published job's, see ``execute``)."""
        job = self._publish(context, self._job_of(external_id, context))
        if not self.wait_for_completion or job.skipped:
            return
        look = self.hook.look(job.project_id, job.watch)  # a finished table never defers
        if not look.status.is_terminal and self.deferrable:
            self.log.info("Table %s is being read; deferring the wait to the triggerer", job.card_id)
            waiting.defer(
                self,
                conn_id=self.datatables_conn_id,
                project_id=job.project_id,
                watch=look.watch,
                poll_interval=self.poll_interval,
                timeout=self.timeout,
            )
        if not look.status.is_terminal:
            look = self.hook.wait_for_table(
                job.project_id, look.watch, poll_interval=self.poll_interval, timeout=self.timeout
            )
        if look.status is TableStatus.FAILED:
            failed_read(self, job.project_id, job.card_id)
        self._table = table_of(waiting.finished(look, job.project_id))
        waiting.log_ready(self.log, job.card_id, self._table)
        self._read_as_counted = check_read(self, job, self._table)

    def get_job_result(self, external_id: JsonValue, context: Context) -> str:
        return self._publish(context, self._job_of(external_id, context)).card_id

    def execute_complete(self, context: Context, event: dict[str, Any]) -> str:
        """Resume after the trigger: the CardID when the table was read well, else fail closed."""
        with forgotten_when_ended(context, self, NOTES):
            if isinstance(event, dict) and event.get("status") == TableStatus.FAILED.value and event.get("card_id"):
                failed_read(self, self.department, str(event["card_id"]))
            self._table = table_of(waiting.resolve_event(event))
            card_id = event["card_id"]
            waiting.log_ready(self.log, card_id, self._table)
            # The job kept by the try that deferred (its fingerprint, when it was accepted, validation's counts).
            job = resumed_job(self._store(context).get(self.external_id_key), self.department, card_id)
            self._read_as_counted = check_read(self, job, self._table)
            self._record(context, job)
            return card_id

    def execute_schema_approval(self, context: Context, event: dict[str, Any]) -> str:
        """Resume after a person answered the ``on_schema_change="approve"`` form: send on approval, else fail.

        The approval is kept (the task's store) and the task runs again: its checks hold the file
        and the table to what the person saw (``_schema.check_schema``).
        """
        with forgotten_when_ended(context, self, (_schema.APPROVAL_KEY,)):
            store = self._store(context)
            asked = _schema.Approval.from_json(store.get(_schema.APPROVAL_KEY))
            approval = _schema.resume(asked, event, self.task_id, self.approval_timeout)
            self.log.info(
                "%s approved %s; validating the file again before sending it", approval.approved_by, approval.describe()
            )
            store.set(_schema.APPROVAL_KEY, approval.to_json())
            return self.execute(context)

    # -- what a try keeps for the next -----------------------------------------------------------

    def _store(self, context: Context) -> SignedStore:
        """The task instance's durable store, its values signed with the connection's key (see ``_durable``)."""
        return durable_store(context, self.hook.settings.api_key, self.log)

    def is_job_authentic(self, external_id: JsonValue, context: Context) -> bool:
        """Whether the job the store holds was signed for this task instance (see ``_durable.SignedStore``)."""
        return self._store(context).opened(self.external_id_key, external_id) is not None

    def _job_of(self, external_id: JsonValue, context: Context) -> Job:
        """The job ``ResumableJobMixin`` kept: verified (``execute`` dropped one that was not), then typed."""
        return stored_job(self._store(context).opened(self.external_id_key, external_id))

    # -- sending the file once ----------------------------------------------------------------

    def _import_once(self, context: Context, project: str, store: Any, source: Source, checked: Checked) -> Job:
        """Send the file once, failing without retry on a refusal that no later try could change.

        The note written before sending holds the evidence a retry needs to adopt what this send
        made (:func:`~airflow_tables.operators._recovery.adopt_lost_import`): the time, the name
        the file part is sent under, the counts of validation, the series of tries.
        """
        from airflow_tables.hooks.tables import now_in_service_time, upload_name

        series = task_series(context)
        with refusals_are_final(self, project):
            if self.replaces:
                return self._replace(context, project, store, source, checked, series)
            name = upload_name(source.name, self.table_name)
            refuse_if_mapped_alike(self, context, project, name)
            before = tuple(self.hook.tables_named_after(project, name))
            note = SentImport(
                project,
                name,
                before,
                sent_at=now_in_service_time(),
                rows=checked.rows,
                columns=checked.columns,
                series=series,
                facts=FileFacts.of(checked.report),
            )
            store.set(PENDING_KEY, note.to_json())
            sent = self.hook._send_csv(project, source, table_name=self.table_name)
            return Job(project, sent, rows=checked.rows, columns=checked.columns, series=series)

    def _replace(
        self, context: Context, project: str, store: Any, source: Source, checked: Checked, series: int
    ) -> Job:
        """Replace the table's data once it is not being read (the service refuses it meanwhile).

        ``send_when_idle`` keeps the replacement rule of :mod:`airflow_tables.model` (a second after
        the look that saw the last read end).
        """
        from airflow_tables.exceptions import DataTablesBusyError, DataTablesConflictError
        from airflow_tables.hooks.tables import now_in_service_time

        card_id = self.card_id
        assert card_id is not None  # check_arguments made sure
        warn_if_mapped_twice(self, context, card_id)

        def send(look: Look) -> Job:
            if look.status is TableStatus.GONE:
                raise AirflowFailException(f"cannot replace {card_id}: it is not in department {project}")
            table = table_of(look.summary)
            _refuse_if_connected(card_id, table)
            _backfill.check_not_older(self, project, card_id)
            _schema.check_schema(self, project, card_id, source, table, checked.report)
            replaced_after = table.completion_time if table else None
            note = SentImport(
                project,
                card_id=card_id,
                replaced_after=replaced_after,
                sent_at=now_in_service_time(),
                rows=checked.rows,
                columns=checked.columns,
                series=series,
                facts=FileFacts.of(checked.report),
            )
            store.set(PENDING_KEY, note.to_json())
            sent = self.hook._send_csv(project, source, card_id=card_id, table_name=self.table_name)
            job = Job(project, sent, replaced_after, rows=checked.rows, columns=checked.columns, series=series)
            _backfill.record_replaced(self, project, card_id)
            return job

        try:
            return self.hook.send_when_idle(
                project,
                card_id,
                send,
                attempts=self.conflict_retries,
                poll_interval=self.poll_interval,
                timeout=self.timeout,
            )
        except DataTablesBusyError as err:
            raise AirflowException(f"{card_id} stayed busy: {err.msg}") from None
        except DataTablesConflictError as err:
            raise AirflowFailException(f"the service refused to replace {card_id}: {err.msg}") from None

    def _unchanged(self, project: str, fingerprint: str) -> Job | None:
        """``skip_if_unchanged``: a skipped job when the table holds this file's data already."""
        assert self.card_id is not None  # skip_if_unchanged needs a card_id
        settings = self.hook.settings
        record = last_upload(table_ref(project, self.card_id, service=settings.base_url), settings.api_key)
        return unchanged(self.hook, self.log, record, project, self.card_id, fingerprint)

    # -- what the task leaves behind ----------------------------------------------------------

    def _publish(self, context: Context, job: Job) -> Job:
        """Push the CardID and the table's URL (the "Open table" button) once per try, before any wait."""
        if self._job is None or self._job.card_id != job.card_id:
            ti = context["ti"]
            ti.xcom_push(key="card_id", value=job.card_id)
            # Pushed even when empty: a link with no XCom at all logs an error when the task ends.
            url = table_url(self.hook.settings.app_url, job.project_id, job.card_id)
            ti.xcom_push(key=DataTablesTableLink().xcom_key, value=url or "")
        self._job = job
        return job

    def _record(self, context: Context, job: Job) -> None:
        """Record the upload on the table's asset (utils/events.py) and how long its read took.

        Nothing is recorded for a skipped replacement: DAGs scheduled on the asset must not
        run for data that did not change.
        """
        if job.skipped:
            return
        ref = table_ref(self.department, job.card_id, service=self.hook.settings.base_url)
        # A read that differs from the file's counts (on_read_mismatch="warn") may be another client's:
        # without a fingerprint the event is no record of this file, so skip_if_unchanged never skips on it.
        fingerprint = job.fingerprint if self._read_as_counted else None
        record = UploadRecord.of(ref, self._table, replaced=self.replaces, fingerprint=fingerprint)
        record_upload(context, ref, record, partition_key=self.partition_key, secret=self.hook.settings.api_key)
        if self.wait_for_completion and job.accepted_at is not None:
            from airflow_tables.metrics import timing

            timing("wait_seconds", max(0.0, time.time() - job.accepted_at), project_id=ref.project_id)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The uploaded file as input and the table as output (called by the OpenLineage provider only)."""
        from airflow_tables.utils.openlineage import import_lineage

        card_id = task_instance.xcom_pull(task_ids=task_instance.task_id, key="card_id")
        ref = table_ref(self.department, card_id, service=self.hook.settings.base_url) if card_id else None
        return import_lineage(self.file_path, ref)


def _shape_of(source: Source) -> FileFacts | None:
    """What a file validation did not look at holds (only after a lost answer: one scan)."""
    from airflow_tables.hooks.tables import file_facts

    return file_facts(source)


class DataTablesReplaceOperator(DataTablesImportOperator):
    """Replace an existing table's data with a CSV file; the table keeps its CardID.

    If the table is still being read, the operator waits for it (on the worker, even when
    ``deferrable``: the file is sent from the worker right after), then replaces: the service
    refuses a replacement during a read. A refusal for any other reason (a table fed by a
    connection) fails the task without sending the file again. Takes the same options as
    :class:`DataTablesImportOperator`; ``card_id`` is required, and a ``card_id`` that renders
    empty fails the task before any request.
    """

    def __init__(
        self, *, card_id: str, file_path: str | os.PathLike[str] | ObjectStoragePath | XComArg, **kwargs: Any
    ) -> None:
        if card_id is None or card_id == "":
            raise ValueError("DataTablesReplaceOperator needs the card_id of the table to replace")
        super().__init__(card_id=card_id, file_path=file_path, **kwargs)


class DataTablesDeleteOperator(_DataTablesOperator):
    """Delete a table and its data, permanently.

    :param card_id: the table (templated).
    :param if_processing: ``"wait"`` until a table being read has been read, then delete;
        or ``"fail"``. A table being read counts as such whatever its ``LockedFromDelete`` says.
    :param if_locked: ``"fail"`` or ``"skip"`` (mark the task skipped, with the reason) when the
        table is read and still locked from delete (fed by an active connection).
    :param missing_ok: succeed when the table does not exist.
    :param poll_interval: seconds between looks while waiting (> 0).
    :param timeout: seconds to wait for a read to end (``None``: no deadline).
    :param conflict_retries: how many times a delete refused because a new read started is
        waited out and sent again.
    """

    template_fields: Sequence[str] = ("project_id", "card_id")
    ui_color = "#fee2e2"

    def __init__(
        self,
        *,
        card_id: str,
        project_id: str | None = None,
        if_processing: str = "wait",
        if_locked: str = "fail",
        missing_ok: bool = False,
        poll_interval: float = 10.0,
        timeout: float | None = 3600.0,
        conflict_retries: int = 3,
        **kwargs: Any,
    ) -> None:
        if if_processing not in ("wait", "fail"):
            raise ValueError(f"if_processing must be 'wait' or 'fail', not {if_processing!r}")
        if if_locked not in ("fail", "skip"):
            raise ValueError(f"if_locked must be 'fail' or 'skip', not {if_locked!r}")
        check_wait(poll_interval, timeout)
        super().__init__(project_id=project_id, **kwargs)
        self.card_id = card_id
        self.if_processing = if_processing
        self.if_locked = if_locked
        self.missing_ok = missing_ok
        self.poll_interval = poll_interval
        self.timeout = timeout
        self.conflict_retries = conflict_retries

    def execute(self, context: Context) -> None:
        """Delete the table once it is not being read; a refusal ends the task as ``_refusals`` says."""
        from airflow_tables.exceptions import DataTablesError, DataTablesLockedError, DataTablesNotFoundError
        from airflow_tables.hooks._http import card_id_problem
        from airflow_tables.operators._refusals import Refused, end

        problem = card_id_problem(self.card_id)
        if problem is not None:
            raise AirflowFailException(f"{self.task_id}: {problem}; nothing was sent.")
        project = self.department
        seen: list[TableSummary] = []  # the last look that found the table

        def delete(look: Look) -> None:
            # What a look shows ends the task as the service's own refusal would (the same row of the table).
            if look.status is TableStatus.GONE:
                raise DataTablesNotFoundError(None, f"table {self.card_id} is not in department {project}", seen=True)
            table = table_of(look.summary)
            if table is not None:
                seen[:] = [table]
            if table is not None and table.locked_from_delete is True:  # read, and still locked: a live connection
                raise DataTablesLockedError(None, "", seen=True)
            self.hook.delete_card(project, self.card_id)
            self.log.info("Deleted table %s (%s) from department %s", self.card_id, table and table.name, project)

        try:
            self.hook.send_when_idle(
                project,
                self.card_id,
                delete,
                attempts=self.conflict_retries,
                poll_interval=self.poll_interval,
                timeout=self.timeout,
                wait=self.if_processing == "wait",
                spacing=0.0,  # a delete starts no read: no replacement rule to keep
            )
        except DataTablesError as err:
            refused = Refused(
                "delete",
                self.datatables_conn_id,
                project,
                self.card_id,
                if_processing=self.if_processing,
                if_locked=self.if_locked,
                missing_ok=self.missing_ok,
                # The department is all that was looked at: a table of that id elsewhere lives on, so say which.
                where=f"department {project} ({self.department_origin})",
                table=seen[0] if seen else None,
            )
            end(err, refused, self.log)


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
