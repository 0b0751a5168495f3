"""Operators for the Data Tables Service: import a CSV as a table, replace a table's data, delete a table.

Importing this module (what every DAG file does) is cheap: the hook, the validator,
pandas and Great Expectations are imported inside ``execute``.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import AssetAlias, BaseOperator

from airflow_tables.assets import ALIAS_NAME, TableRef, asset_of, table_ref
from airflow_tables.links import DataTablesTableLink, table_url
from airflow_tables.model import REPLACEMENT_SPACING, TableStatus, TableWatch, check_wait
from airflow_tables.operators import _waiting
from airflow_tables.operators._common import DataTablesTaskMixin
from airflow_tables.operators._resumable import durable_store, forgotten_when_ended
from airflow_tables.version_compat import (
    AirflowException,
    AirflowFailException,
    AirflowSkipException,
    ResumableJobMixin,
    conf,
)

if TYPE_CHECKING:
    from airflow.sdk import Context, ObjectStoragePath, XComArg
    from pydantic import JsonValue

    from airflow_tables.model import Look
    from airflow_tables.sources import Source

_DEFERRABLE = conf.getboolean("operators", "default_deferrable", fallback=False)
TABLES_ALIAS = AssetAlias(name=ALIAS_NAME, group="datatables")
#: The durable note of an import sent but not yet answered (see ``_adopt_lost_import``).
_PENDING_KEY = "datatables_import_sent"
#: Every note the import keeps in ``durable_store`` beside its job (removed once the task has ended).
_NOTES = (_PENDING_KEY,)


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
        or a URI such as ``s3://aws_conn@bucket/key.csv`` (see docs/sources.md); the table is named
        after its base name.
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
    """

    template_fields: Sequence[str] = ("project_id", "file_path", "card_id")
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
        datatables_conn_id: str = "datatables_default",
        **kwargs: Any,
    ) -> None:
        check_wait(poll_interval, timeout)
        if allowed_sources is not None:  # a bad prefix fails when the DAG is parsed, not when it runs
            from airflow_tables.sources.allowed import ARGUMENT, parse_prefixes

            if not parse_prefixes(allowed_sources, ARGUMENT):
                raise ValueError("allowed_sources names no prefix: give at least one, or None for no limit of its own")
        if skip_if_unchanged and card_id is None:
            raise ValueError("skip_if_unchanged needs a card_id: a new table has no earlier upload to compare with")
        if encoding is not None:  # an unknown codec name fails when the DAG is parsed, not when it runs
            from airflow_tables.sources.transcode import declared

            declared(encoding)
        # The table's asset is known only at run time (a new table's CardID, a templated id, the
        # connection's service): its event goes through this alias (see _record_asset_event).
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
        self._ready_summary: dict | None = None
        self._job: dict | None = None  # the job this try works on (for the asset event)

    # -- the steps ----------------------------------------------------------------------------

    def execute(self, context: Context) -> str:
        with forgotten_when_ended(context, self, _NOTES):  # below 3.3 the notes are Variables
            # The "Open table" link reads this XCom when the task ends; until the service accepts the
            # file there is no table, and a link with no XCom at all logs an error.
            context["ti"].xcom_push(key=DataTablesTableLink().xcom_key, value="")
            self._check_arguments()
            self.execute_resumable(context)
            # Every path through execute_resumable published the job it ended with (_publish).
            job = self._job
            if job is None:
                raise AirflowException(f"{self.task_id}: the import ended without a table; this is a bug")
            self._record_asset_event(context, job)
            return job["card_id"]

    def submit_job(self, context: Context) -> JsonValue:
        """Check the file, then import it once; return what a retry needs to find the table again.

        Before the file is sent, a note of what to look for goes to the task's durable store.
        If the import's answer is lost (``DataTablesImportUncertainError``), the next try reads
        that note and adopts the table the service did create instead of paying again.
        """
        with self._source() as source:
            return self._submit(context, source)

    @contextlib.contextmanager
    def _source(self) -> Iterator[Source]:
        """The file to check and send, read from storage once.

        A file that is checked (``validate``, ``expectations``, ``skip_if_unchanged``'s
        fingerprint) and is not a local UTF-8 file is copied once to a bounded local file
        (converted to UTF-8 on the way), which is checked and then sent: storage is read
        once, and what was checked is what is sent. An unchecked one is streamed by the hook
        straight into the upload. A missing file, or one outside the allowed sources
        (``allowed_sources``, ``[datatables] allowed_sources``), fails the task (no retry);
        other storage errors may be retried.
        """
        from airflow_tables import csv_rules
        from airflow_tables.sources import (
            SourceError,
            SourceNotAllowedError,
            SourceNotFoundError,
            open_source,
            staged,
        )

        checked = self.validate or self.expectations is not None or self.skip_if_unchanged
        with contextlib.ExitStack() as stack:
            try:
                source = open_source(self.file_path, encoding=self.encoding, allowed=self.allowed_sources)
                if checked:
                    source = stack.enter_context(staged(source, max_bytes=csv_rules.MAX_BYTES))
            except (SourceNotFoundError, SourceNotAllowedError) as err:
                raise AirflowFailException(f"{err}; nothing was sent to the Data Tables Service") from None
            except SourceError as err:
                raise AirflowException(f"{err}; nothing was sent to the Data Tables Service") from err
            yield source

    def _submit(self, context: Context, source: Source) -> dict:
        fingerprint = self._check_file(context, source)
        project = self.department
        store = durable_store(context)
        job = self._adopt_lost_import(store.get(_PENDING_KEY), project)
        if job is None and fingerprint is not None:
            job = self._unchanged(project, fingerprint)
        if job is None:
            job = self._import_once(project, store, source)
        job["fingerprint"] = fingerprint
        self._publish(context, job)
        return job

    def get_job_status(self, external_id: JsonValue, context: Context) -> str:
        job = _as_job(external_id)
        return self.hook.look(job["project_id"], _watch(job)).status.value

    def is_job_active(self, status: str) -> bool:
        # A table read badly counts as "active" so that the retry reports the failure
        # (poll_until_complete) instead of paying for the same file again.
        return status in (TableStatus.BEING_READ.value, TableStatus.FAILED.value)

    def is_job_succeeded(self, status: str) -> bool:
        return status == TableStatus.READY.value

    def poll_until_complete(self, external_id: JsonValue, context: Context) -> None:
        """Wait for the table (the CardID it ends with is the published job's, see ``execute``)."""
        job = _as_job(external_id)
        self._publish(context, job)
        project, card_id = job["project_id"], job["card_id"]
        if not self.wait_for_completion or job.get("skipped"):
            return
        look = self.hook.look(project, _watch(job))  # a finished table never defers
        if not look.status.is_terminal and self.deferrable:
            self.log.info("Table %s is being read; deferring the wait to the triggerer", card_id)
            _waiting.defer(
                self,
                conn_id=self.datatables_conn_id,
                project_id=project,
                watch=look.watch,
                poll_interval=self.poll_interval,
                timeout=self.timeout,
            )
        if not look.status.is_terminal:
            look = self.hook.wait_for_table(project, look.watch, poll_interval=self.poll_interval, timeout=self.timeout)
        self._log_ready(_waiting.finished(look, project))

    def get_job_result(self, external_id: JsonValue, context: Context) -> str:
        job = _as_job(external_id)
        self._publish(context, job)
        return job["card_id"]

    def execute_complete(self, context: Context, event: dict[str, Any]) -> str:
        """Resume after the trigger: the CardID when the table was read well, else fail closed."""
        with forgotten_when_ended(context, self, _NOTES):
            summary = _waiting.resolve_event(event)
            self._log_ready(summary)
            job = durable_store(context).get(self.external_id_key)  # kept by the try that deferred
            if not isinstance(job, dict) or job.get("card_id") != event["card_id"]:
                job = _job(self.department, event["card_id"], None)
            self._record_asset_event(context, job)
            return event["card_id"]

    # -- checks before any request ------------------------------------------------------------

    def _check_arguments(self) -> None:
        """Fail the task, without retry and before any request, on arguments that rendered wrong."""
        from airflow_tables.hooks._http import card_id_problem

        problem = _file_path_problem(self.file_path)
        if problem is None and self.replaces:
            problem = card_id_problem(self.card_id)
        if problem is None:
            try:
                check_wait(self.poll_interval, self.timeout)
            except ValueError as err:
                problem = str(err)
        if problem is not None:
            raise AirflowFailException(f"{self.task_id}: {problem}; nothing was sent.")
        self.department  # noqa: B018 - an empty project_id fails here, before any request

    def _check_file(self, context: Context, source: Source) -> str | None:
        """Validate (and check expectations) before any request; failures are final, not retried.

        With ``skip_if_unchanged``, the fingerprint of the bytes to be sent (the staged copy)
        is computed alongside the validation scan and returned.
        """
        if not self.skip_if_unchanged:
            self._validate(context, source)
            return None
        from airflow_tables.fingerprint import while_validating

        assert source.local_path is not None  # staged by _source
        return while_validating(lambda: self._validate(context, source), source.local_path)[1]

    def _validate(self, context: Context, source: Source) -> None:
        """The validation, then the expectations, whose result (``describe_dict()``) goes to XCom ``gx_result``."""
        if not self.validate and self.expectations is None:
            return
        from airflow_tables.validation import validate_source

        report = validate_source(source)
        self.log.info("%s", report.summary())
        for warning in report.warnings:
            self.log.warning("%s: %s", self.file_path, warning)
        if self.validate and not report.ok:
            from airflow_tables.exceptions import CsvValidationError

            raise AirflowFailException(str(CsvValidationError(report.path, report.errors)))
        if self.expectations is not None:
            from airflow_tables.operators._expectations import ExpectationsError, check

            try:
                outcome = check(report, self.expectations, path=source.local_path)
            except ExpectationsError as err:
                raise AirflowFailException(f"{self.file_path}: {err}") from None
            context["ti"].xcom_push(key="gx_result", value=outcome.result)
            self.log.info("%s", outcome.summary)
            if not outcome.success:
                raise AirflowFailException(f"{self.file_path}: {outcome.failure_message()}")

    # -- sending the file once ----------------------------------------------------------------

    def _import_once(self, project: str, store: Any, source: Source) -> dict:
        """:meth:`_import`, failing without retry on a refusal that no later try could change."""
        from airflow_tables.exceptions import DataTablesError

        try:
            return self._import(project, store, source)
        except DataTablesError as err:
            why = self._final_refusal(err, project)
            if why is None:
                raise
            raise AirflowFailException(
                f"{why}; not retried (a retry would send the same file and be refused the same way), and no credit "
                "was spent"
            ) from None

    def _final_refusal(self, err: Exception, project: str) -> str | None:
        """What to say of a refusal that depends on the key, the organisation or the file, not on the moment."""
        from airflow_tables import exceptions as e

        conn = f"connection {self.datatables_conn_id!r}"
        if isinstance(err, e.DataTablesAuthenticationError):
            return f"the service does not accept the API key of {conn} ({err.msg}); correct it, then clear the task"
        if isinstance(err, e.DataTablesPermissionError):
            return (
                f"the API key of {conn} may not import into department {project}: importing needs permission to "
                f"manage data there ({err.msg}); use a key that has it, then clear the task"
            )
        if isinstance(err, e.DataTablesCreditsError):
            return (
                f"the organisation of the API key of {conn} has no import credit left ({err.msg}); each import "
                "uses one: add credit, then clear the task"
            )
        if isinstance(err, (e.DataTablesRejectedFileError, e.DataTablesBadRequestError)):
            check = "" if self.validate else " (validate=True finds what the service refuses before any request)"
            return f"the service refused {self.file_path} ({err.msg}); correct the file{check}, then clear the task"
        return None

    def _import(self, project: str, store: Any, source: Source) -> dict:
        """Send the file once; return the job: the CardID and, for a replacement, the previous completion time."""
        if not self.replaces:
            name = source.name
            before = self.hook.tables_named_after(project, name)
            store.set(_PENDING_KEY, {"project_id": project, "file": name, "before": before})
            return _job(project, self.hook.import_csv(project, source), None)
        return self._replace(project, store, source)

    def _replace(self, project: str, store: Any, source: Source) -> dict:
        """Replace the table's data once it is not being read (the service refuses it meanwhile)."""
        from airflow_tables.exceptions import DataTablesBusyError, DataTablesConflictError

        card_id = self.card_id
        assert card_id is not None  # _check_arguments made sure

        def send(look: Look) -> dict:
            if look.status is TableStatus.GONE:
                raise AirflowFailException(f"cannot replace {card_id}: it is not in department {project}")
            _refuse_if_connected(look)
            replaced_after = (look.summary or {}).get("UploadCompletionTime")
            # The replacement rule of airflow_tables.model: a second after the look that saw the last read end.
            time.sleep(max(0.0, look.seen_at + REPLACEMENT_SPACING - time.monotonic()))
            store.set(_PENDING_KEY, {"project_id": project, "card_id": card_id, "replaced_after": replaced_after})
            return _job(project, self.hook.import_csv(project, source, card_id=card_id), replaced_after)

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

    def _unchanged(self, project: str, fingerprint: str) -> dict | None:
        """A skipped job when the file is what was last uploaded to the table and nobody refreshed it since."""
        from airflow_tables.metrics import incr

        card_id = self.card_id
        assert card_id is not None  # skip_if_unchanged needs a card_id
        record = last_upload(table_ref(project, card_id, service=self.hook.settings.base_url))
        if record is None or record.get("fingerprint") != fingerprint:
            why = "no earlier upload recorded" if record is None else "the file differs from the last upload"
            self.log.info("Replacing %s: %s", card_id, why)
            return None
        look = self.hook.look(project, card_id)
        completed = (look.summary or {}).get("UploadCompletionTime")
        if look.status is not TableStatus.READY:
            self.log.info("Replacing %s although the file is unchanged: %s", card_id, look.message)
            return None
        # Completion times have whole seconds: a refresh ending in the same second as our upload's read
        # would keep the time, so the row count (recorded with it) is compared too.
        rows = (look.summary or {}).get("Rows")
        if completed != record.get("completion_time") or rows != record.get("rows"):
            self.log.info(
                "Replacing %s although the file is unchanged: the table was refreshed since (read at %s with %s "
                "rows; our last upload's read ended at %s with %s rows)",
                card_id,
                completed,
                rows,
                record.get("completion_time"),
                record.get("rows"),
            )
            return None
        self.log.info(
            "Skipped: %s holds this file's data already (same bytes as the upload by %s/%s/%s, read at %s, and "
            "not refreshed since); nothing was sent, no credit spent",
            card_id,
            record.get("dag_id"),
            record.get("task_id"),
            record.get("run_id"),
            completed,
        )
        incr("imports_skipped", project_id=project)
        return {**_job(project, card_id, None), "skipped": True}

    def _adopt_lost_import(self, pending: dict | None, project: str) -> dict | None:
        """The job of an earlier try whose import answer was lost but which the service received."""
        if not pending or pending.get("project_id") != project:
            return None
        if pending.get("card_id"):  # a replacement: did the table start or finish a new read?
            after = pending.get("replaced_after")
            look = self.hook.look(project, pending["card_id"])
            changed = look.status is TableStatus.BEING_READ or (look.summary or {}).get("UploadCompletionTime") != after
            if look.status is TableStatus.GONE or not changed:
                return None
            self.log.info(
                "An earlier try's replacement of %s reached the service; not sending it again", pending["card_id"]
            )
            return _job(project, pending["card_id"], after)
        new = self.hook.find_lost_import(project, pending["file"], pending["before"])
        if len(new) > 1:
            raise AirflowFailException(
                f"an earlier try's import of {pending['file']} lost its answer, and {len(new)} new tables named after "
                f"it are in department {project} ({', '.join(new)}); delete the extra ones and clear the task."
            )
        if not new:
            return None
        self.log.info(
            "An earlier try's import of %s reached the service as %s; not importing again", pending["file"], new[0]
        )
        return _job(project, new[0], None)

    # -- what the task leaves behind ----------------------------------------------------------

    def _publish(self, context: Context, job: dict) -> None:
        """Push the CardID and the table's URL (the "Open table" button) before any wait."""
        self._job = job
        ti = context["ti"]
        ti.xcom_push(key="card_id", value=job["card_id"])
        # Pushed even when empty: a link with no XCom at all logs an error when the task ends.
        url = table_url(self.hook.settings.app_url, job["project_id"], job["card_id"])
        ti.xcom_push(key=DataTablesTableLink().xcom_key, value=url or "")

    def _record_asset_event(self, context: Context, job: dict) -> None:
        """Record an event on the table's asset (through the alias), with flat extras to filter on.

        Nothing is recorded for a skipped replacement: DAGs scheduled on the asset must not
        run for data that did not change. The extras are also the table's upload record that
        ``skip_if_unchanged`` reads (see :func:`last_upload`).
        """
        if job.get("skipped"):
            return
        card_id = job["card_id"]
        ref = table_ref(self.department, card_id, service=self.hook.settings.base_url)
        summary = self._ready_summary or {}
        extra = {
            "service": ref.service,
            "project_id": ref.project_id,
            "card_id": card_id,
            "card_name": summary.get("CardName"),
            "rows": summary.get("Rows"),
            "completion_time": summary.get("UploadCompletionTime"),
            "replaced": self.replaces,
            "credits": 1,
            "fingerprint": job.get("fingerprint"),
        }
        context["outlet_events"][TABLES_ALIAS].add(asset_of(ref), extra=extra)
        if self.wait_for_completion and isinstance(job.get("accepted_at"), (int, float)):
            from airflow_tables.metrics import timing

            timing("wait_seconds", max(0.0, time.time() - job["accepted_at"]), project_id=ref.project_id)

    def _log_ready(self, summary: dict) -> None:
        self._ready_summary = summary
        self.log.info(
            "Table %s (%s) is ready: %s rows, read at %s",
            summary.get("CardID"),
            summary.get("CardName"),
            summary.get("Rows"),
            summary.get("UploadCompletionTime"),
        )

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The uploaded file as input and the table as output (called by the OpenLineage provider only).

        Named as :mod:`airflow_tables.assets` names tables: ``<ProjectID>/<CardID>`` in the
        namespace ``datatables://<service>``.
        """
        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.event_v2 import Dataset

        card_id = task_instance.xcom_pull(task_ids=task_instance.task_id, key="card_id")
        outputs = []
        if card_id:
            ref = table_ref(self.department, card_id, service=self.hook.settings.base_url)
            outputs.append(Dataset(namespace=ref.namespace, name=ref.name))
        return OperatorLineage(inputs=[_lineage_input(self.file_path)], outputs=outputs)


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
        from airflow_tables.exceptions import (
            DataTablesBusyError,
            DataTablesConflictError,
            DataTablesLockedError,
            DataTablesNotFoundError,
            DataTablesPermissionError,
        )
        from airflow_tables.hooks._http import card_id_problem

        problem = card_id_problem(self.card_id)
        if problem is not None:
            raise AirflowFailException(f"{self.task_id}: {problem}; nothing was sent.")
        project = self.department
        seen: dict = {}

        def delete(look: Look) -> None:
            seen.update(look.summary or {})
            if look.status is TableStatus.GONE:
                return self._missing(project)
            if seen.get("LockedFromDelete") is True:  # read, and still locked: a live connection
                return self._locked(seen)
            self.hook.delete_card(project, self.card_id)
            self.log.info("Deleted table %s (%s) from department %s", self.card_id, seen.get("CardName"), project)
            return None

        try:
            self.hook.send_when_idle(
                project,
                self.card_id,
                delete,
                attempts=self.conflict_retries,
                poll_interval=self.poll_interval,
                timeout=self.timeout,
                wait=self.if_processing == "wait",
            )
        except DataTablesLockedError as err:
            self._locked(seen, err.msg)
        except DataTablesNotFoundError:
            self._missing(project)
        except DataTablesPermissionError as err:
            raise AirflowFailException(
                f"the API key of {self.datatables_conn_id!r} may not delete tables in department {project}: "
                f"deleting needs permission to manage data there ({err.msg})"
            ) from None
        except DataTablesBusyError as err:
            if self.if_processing == "fail":
                raise AirflowFailException(f"{self.card_id} is being read; if_processing='fail' ({err.msg})") from None
            raise AirflowException(f"{self.card_id} stayed busy: {err.msg}") from None
        except DataTablesConflictError as err:
            raise AirflowFailException(f"the service refused to delete {self.card_id}: {err.msg}") from None

    def _missing(self, project: str) -> None:
        # The department is all that was looked at: a table of that id elsewhere lives on, so say which.
        where = f"department {project} ({self.department_origin})"
        if self.missing_ok:
            self.log.info(
                "Table %s is not in %s; nothing to delete (missing_ok). No other department was looked at: a table "
                "of this id in other departments is left as it is",
                self.card_id,
                where,
            )
            return
        raise AirflowFailException(
            f"table {self.card_id} is not in {where}; no other department was looked at. Check the card_id and "
            "the project_id (or pass missing_ok=True to allow a missing table)"
        )

    def _locked(self, summary: dict, reason: str = "") -> None:
        source = summary.get("ConnectorSource") or "a connected system"
        message = (
            f"table {self.card_id} ({summary.get('CardName')}) is locked from delete: it is fed by an active "
            f"connection to {source}{f' ({reason})' if reason else ''}"
        )
        if self.if_locked == "skip":
            raise AirflowSkipException(message)
        raise AirflowFailException(f"{message}. Pause the connection first, or pass if_locked='skip'.")


def _file_path_problem(file_path: Any) -> str | None:
    """What is wrong with a ``file_path`` as it rendered, shown with ``repr`` so that a stray newline shows."""
    from airflow_tables.sources.storage import is_storage_path

    if file_path is None:
        return "file_path is None (a template or an upstream task gave no path); name the CSV to import"
    if is_storage_path(file_path):
        return None
    if not isinstance(file_path, (str, os.PathLike)):
        shown = repr(file_path)
        shown = shown if len(shown) <= 200 else shown[:199] + "…"
        return (
            f"file_path is a {type(file_path).__name__} ({shown}), not one path; to import each file of a list, "
            "map the operator: DataTablesImportOperator.partial(...).expand(file_path=...)"
        )
    text = os.fspath(file_path)
    if not isinstance(text, str) or not text.strip():
        return f"file_path is {text!r}; name the CSV to import"
    if text != text.strip():
        return (
            f"file_path {text!r} has surrounding whitespace (a line break from a template, a file or an XCom?); "
            "no file is named so: strip it where the path is made"
        )
    return None


def _refuse_if_connected(look: Look) -> None:
    """Fail, before anything is sent, a replace of a table the look shows fed by a live connection.

    Such a table's data comes from the connected system; the service refuses an upload in its
    place (409), and would refuse it on every retry. A paused connection is left to the service.
    """
    summary = look.summary or {}
    if summary.get("LockedFromDelete") is True or summary.get("ConnectorStatus") == "active":
        source = summary.get("ConnectorSource") or "a connected system"
        raise AirflowFailException(
            f"cannot replace {look.watch.card_id} ({summary.get('CardName')}): it is fed by an active connection to "
            f"{source} (LockedFromDelete is true), and the service takes no upload in its place; nothing was sent. "
            "Pause the connection first, or import the file as a table of its own."
        )


def _job(project_id: str, card_id: str, replaced_after: str | None) -> dict:
    """What a retry needs to find the table again (JSON, kept in the task's durable store)."""
    return {"project_id": project_id, "card_id": card_id, "replaced_after": replaced_after, "accepted_at": time.time()}


def _lineage_input(file_path: Any) -> Any:
    """The OpenLineage dataset of a local path (``file``) or an object (``s3://bucket`` and its key)."""
    from urllib.parse import urlsplit

    from openlineage.client.event_v2 import Dataset

    from airflow_tables.sources.storage import is_storage_path, is_uri, label_of

    if is_uri(file_path) or is_storage_path(file_path):
        parts = urlsplit(label_of(file_path))
        bucket = parts.netloc.rpartition("@")[2]  # no connection id in a dataset's name
        return Dataset(namespace=f"{parts.scheme}://{bucket}" if bucket else parts.scheme, name=parts.path)
    return Dataset(namespace="file", name=os.path.abspath(file_path))


def last_upload(ref: TableRef) -> dict | None:
    """The last upload this provider recorded for a table: its newest asset event with a fingerprint.

    Events on the asset that are not ours (an ``AssetWatcher``'s, a manual one) carry no
    fingerprint and are passed over. ``None`` when there is none (or the events cannot be
    read here, as in a plain ``execute()`` outside a task runner).
    """
    from airflow_tables.version_compat import newest_asset_events

    try:
        asset = asset_of(ref)  # name and URI both: by URI alone, Airflow finds only assets a DAG refers to
        for event in newest_asset_events(asset.name, asset.uri, _RECORDS_LOOKED_AT):
            extra = event.extra or {}
            if extra.get("fingerprint"):
                return {
                    **extra,
                    "dag_id": event.source_dag_id,
                    "task_id": event.source_task_id,
                    "run_id": event.source_run_id,
                }
    except Exception as err:  # no supervisor to ask: behave as if nothing was recorded (import)
        import logging

        logging.getLogger(__name__).warning("could not read the upload record of %s: %s", ref.uri, err)
    return None


#: How many of a table's newest asset events are searched for the last upload record.
_RECORDS_LOOKED_AT = 50


def _as_job(external_id: JsonValue) -> dict:
    """The job a try stored, checked: a task state store holding anything else fails closed."""
    if (
        not isinstance(external_id, dict)
        or not isinstance(external_id.get("project_id"), str)
        or not isinstance(external_id.get("card_id"), str)
    ):
        raise AirflowFailException(f"the stored import job {external_id!r} is not one this operator wrote")
    return external_id


def _watch(job: dict) -> TableWatch:
    return TableWatch(job["card_id"], job.get("replaced_after"))
