"""The job an import works on, and its life after the send: waited on, published, recorded.

* :class:`Job`: the table a try works on, as a typed value. It is the ``external_id`` of
  ``ResumableJobMixin`` (kept in the task's durable store between tries, so it must be JSON);
  anything else found there fails the task instead of being guessed at.
* :class:`ImportJobSteps`: ``ResumableJobMixin``'s steps for it (its status, the wait for the
  read, in the triggerer when ``deferrable``), the CardID and the table's URL pushed before the
  wait, and the asset event once the read is checked. The import operator decides what to send
  (:mod:`airflow_tables.operators.tables`); what happens to the table after is here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from airflow_tables._durable import SignedStore, durable_store, forgotten_when_ended
from airflow_tables.assets import table_ref
from airflow_tables.exceptions import DataTablesReadMismatchError, DataTablesUploadFailedError
from airflow_tables.links import CARD_ID_XCOM_KEY, DataTablesTableLink, table_url
from airflow_tables.model import TableStatus, TableWatch
from airflow_tables.operators._checks import ReadCheck
from airflow_tables.operators._refusals import Refused, end
from airflow_tables.operators._schema import APPROVAL_KEY
from airflow_tables.utils import openlineage, waiting
from airflow_tables.utils.events import UploadRecord, record_upload
from airflow_tables.version_compat import AirflowFailException

if TYPE_CHECKING:
    from datetime import timedelta

    from airflow.sdk import Context
    from pydantic import JsonValue

    from airflow_tables.hooks.tables import DataTablesHook
    from airflow_tables.model import TableDetail, TableSummary
    from airflow_tables.operators._checks import Checked
    from airflow_tables.sources import Source
    from airflow_tables.utils.openlineage import TaskLineage

#: The durable note of the import a task sends (:class:`~airflow_tables.hooks.send_once.SendOnce`).
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
    "bad_rows": (int, type(None)),
    "rejects": (str, type(None)),
    "sent_bytes": (int, type(None)),
    "inputs": (list, type(None)),
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
    :param bad_rows: the rows ``on_bad_rows="quarantine"`` set aside (``None``: no quarantine), and
        ``rejects`` where they were written: recorded on the asset event.
    :param sent_bytes: the bytes sent (``None`` when not known without reading the file again), for lineage;
        ``inputs``: what the checks found in the file, as lineage's datasets (``utils/openlineage.py``), so
        that the try that resumes after a deferral reports them too.
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
    bad_rows: int | None = None
    rejects: str | None = None
    sent_bytes: int | None = None
    inputs: list[dict[str, Any]] | None = None

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


class ImportJobSteps:
    """``ResumableJobMixin``'s steps for an import's :class:`Job`, and what the task leaves behind.

    Mixed into :class:`~airflow_tables.operators.tables.DataTablesImportOperator`, whose
    arguments it reads; ``_job`` is the job this try published, ``_table`` the table as the
    wait's last look saw it read, ``_read_as_counted`` False once a read differed from
    validation's counts (``on_read_mismatch="warn"``).
    """

    # What it reads of the operator (its arguments and the base classes').
    hook: DataTablesHook
    log: Any
    task_id: str
    department: str
    datatables_conn_id: str
    external_id_key: str
    file_path: Any
    replaces: bool
    wait_for_completion: bool
    deferrable: bool
    poll_interval: float
    timeout: float | None
    partition_key: str | None
    card_id: str | None
    validate: bool
    on_read_mismatch: str
    execution_timeout: timedelta | None
    defer: Callable[..., Any]
    lineage: TaskLineage
    known_table: Callable[[object], Any]
    _job: Job | None
    _table: TableSummary | None
    _read_as_counted: bool

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
        if not look.status.is_terminal:
            self._show_link(context, job)
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
            self._failed_read(job.project_id, job.card_id)
        self._table = waiting.finished(look, job.project_id)
        waiting.log_ready(self.log, job.card_id, self._table)
        self._read_as_counted = self._check_read(job, self._table)

    def get_job_result(self, external_id: JsonValue, context: Context) -> str:
        return self._publish(context, self._job_of(external_id, context)).card_id

    def execute_complete(self, context: Context, event: dict[str, Any]) -> str:
        """Resume after the trigger: the CardID when the table was read well, else fail closed."""
        with forgotten_when_ended(context, self, NOTES):
            if isinstance(event, dict) and event.get("status") == TableStatus.FAILED.value and event.get("card_id"):
                self._failed_read(self.department, str(event["card_id"]))
            self._table = waiting.resolve_event(event)
            card_id = event["card_id"]
            waiting.log_ready(self.log, card_id, self._table)
            # The job kept by the try that deferred (its fingerprint, when it was accepted, validation's counts).
            job = resumed_job(self._store(context).get(self.external_id_key), self.department, card_id)
            self.lineage.inputs = openlineage.facts_from_json(job.inputs) or self.named_inputs()
            self._read_as_counted = self._check_read(job, self._table)
            self._record(context, job)
            return card_id

    def _check_read(self, job: Job, table: TableSummary | None) -> bool:
        """Whether the read table has the rows and columns validation counted (``job.rows``, ``job.columns``).

        One free fetch of the table (its ``Columns``). A difference fails the task without retry
        (``on_read_mismatch="fail"``: :class:`~airflow_tables.exceptions.DataTablesReadMismatchError`)
        or is logged (``"warn"``, and ``False`` is returned). Nothing is compared when the file was
        not validated.
        """
        check = ReadCheck(job.rows, job.columns, self.on_read_mismatch)
        self._learn_output(job, table)
        if not check.counted or table is None:
            return True
        detail = self.hook.table(job.project_id, job.card_id)
        self._learn_output(job, table, detail)
        message = check.mismatch(detail, job.project_id, self.file_path)
        if message is None:
            return True
        if check.policy == "warn":
            self.log.warning("%s; on_read_mismatch='warn', so the task goes on", message)
            return False
        end(DataTablesReadMismatchError(None, message, seen=True), self._refused(job.project_id, job.card_id))
        return False  # not reached: the table makes a read mismatch final

    def _failed_read(self, project: str, card_id: str) -> None:
        """Fail the task without retry for a table the service read badly, quoting its ``Description``."""
        message = self.hook.failed_read_reason(project, card_id)
        self.log.error("%s", message)
        end(DataTablesUploadFailedError(None, message, seen=True), self._refused(project, card_id))

    def _refused(self, project: str, card_id: str | None = None) -> Refused:
        """The import or replacement a refusal ends, as :mod:`~airflow_tables.operators._refusals` names it."""
        action = "replace" if self.replaces else "import"
        return Refused(action, self.datatables_conn_id, project, card_id or self.card_id, self.file_path, self.validate)

    def _store(self, context: Context) -> SignedStore:
        """The task instance's durable store, its values signed with the connection's key (see ``_durable``)."""
        return durable_store(context, self.hook.settings.api_key, self.log)

    def is_job_authentic(self, external_id: JsonValue, context: Context) -> bool:
        """Whether the job the store holds was signed for this task instance (see ``_durable.SignedStore``)."""
        return self._store(context).opened(self.external_id_key, external_id) is not None

    def _job_of(self, external_id: JsonValue, context: Context) -> Job:
        """The job ``ResumableJobMixin`` kept: verified (``execute`` dropped one that was not), then typed."""
        return stored_job(self._store(context).opened(self.external_id_key, external_id))

    # -- what the task leaves behind ----------------------------------------------------------

    def _publish(self, context: Context, job: Job) -> Job:
        """Push the CardID once per try, as soon as the job is known (the Data Tables page finds the table by it)."""
        if self._job is None or self._job.card_id != job.card_id:
            context["ti"].xcom_push(key=CARD_ID_XCOM_KEY, value=job.card_id)
        self._job = job
        self._learn_output(job)
        return job

    def _show_link(self, context: Context, job: Job) -> None:
        """Push the table's URL (the "Open table" button) before a wait, so that it shows while the task waits.

        A task that does not wait leaves it to Airflow, which stores the link's answer when the
        task ends (:meth:`published_url`): one request to the API server fewer per task. Pushed
        even when empty: a link with no XCom at all logs an error when the task ends.
        """
        context["ti"].xcom_push(key=DataTablesTableLink().xcom_key, value=self.published_url(job))

    def published_url(self, job: Job | None = None) -> str | None:
        """The "Open table" URL of the job this try published ("" without ``app_url``); ``None`` before it did.

        What :class:`~airflow_tables.links.DataTablesTableLink` answers when the task ends, in the
        process that ran it, without reading back the XCom just pushed.
        """
        job = job or self._job
        if job is None:
            return None
        return table_url(self.hook.settings.app_url, job.project_id, job.card_id) or ""

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
        record = replace(record, bad_rows=job.bad_rows, rejects=job.rejects)
        record_upload(context, ref, record, partition_key=self.partition_key, secret=self.hook.settings.api_key)
        if self.wait_for_completion and job.accepted_at is not None:
            from airflow_tables.metrics import timing

            timing("wait_seconds", max(0.0, time.time() - job.accepted_at), project_id=ref.project_id)

    # -- lineage: learned as the try goes, read by the OpenLineage provider (utils/openlineage.py) --

    def lineage_at_start(self) -> TaskLineage:
        """The file (as named), and for a replacement its table (once the connection is read): known before sending."""
        ref = self.known_table(self.card_id) if self.replaces else None
        outputs = [] if ref is None else [openlineage.table_dataset(ref, change=openlineage.OVERWRITE)]
        return openlineage.TaskLineage(self.named_inputs(), outputs)

    def named_inputs(self, **facts: Any) -> list[openlineage.DatasetFacts]:
        """The datasets the table is made from, with ``facts`` (what the checks found): the file(s)."""
        return openlineage.file_datasets(self.file_path, **facts)

    def _learn_input(self, source: Source, checked: Checked) -> None:
        """What the checks found in the file: its schema, rows, size and data quality."""
        facts = openlineage.validated(checked.report, bad_rows=checked.bad_rows, gx_result=checked.gx_result)
        if isinstance(self.file_path, (list, tuple)):  # each part an input; the counts are the whole's
            facts.pop("rows", None)
        else:
            facts["size"] = source.stored_size
        self.lineage.inputs = self.named_inputs(**facts)

    def _learn_output(self, job: Job, table: TableSummary | None = None, detail: TableDetail | None = None) -> None:
        """The table: what the try did to it, the bytes sent, and what its read showed (else validation's columns)."""
        ref = table_ref(job.project_id, job.card_id, service=self.hook.settings.base_url)
        change = None if job.skipped else openlineage.OVERWRITE if self.replaces else openlineage.CREATE
        counted = {} if job.skipped else {"rows": job.rows, "size": job.sent_bytes}
        known = [d for d in self.lineage.outputs if (d.namespace, d.name) == (ref.namespace, ref.name)]
        dataset = known[0] if known else openlineage.table_dataset(ref)
        facts = {"change": change, **counted, **openlineage.read_table(table, detail)}
        if "columns" not in facts and not dataset.columns and self.lineage.inputs:
            facts["columns"] = self.lineage.inputs[0].columns or None  # as validation typed them, until the read says
        self.lineage.outputs = [openlineage.with_facts(dataset, **facts)]
