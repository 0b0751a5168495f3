"""Operators for the Data Tables Service: import a CSV as a table, replace a table's data, delete a table.

Importing this module (what every DAG file does) is cheap: the hook, the validator,
pandas and Great Expectations are imported inside ``execute``.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_tables._durable import first_try, forgotten_when_ended, task_series
from airflow_tables.assets import table_ref
from airflow_tables.links import DataTablesTableLink
from airflow_tables.model import TableStatus, check_wait
from airflow_tables.operators import _backfill, _budget, _schema
from airflow_tables.operators._budget import BudgetResume
from airflow_tables.operators._checks import (
    check_arguments,
    check_combine,
    check_file,
    check_options,
    combined_parts,
    opened_source,
    source_problem,
)
from airflow_tables.operators._dry_run import Plan, Planned, decided, dry_run_enabled, run_dry
from airflow_tables.operators._job import NOTES, ImportJobSteps, Job
from airflow_tables.operators._recovery import (
    file_stamp,
    forget_cleared_job,
    job_sent_earlier,
    send_once,
    still_read_from_the_same_file,
    unchanged_since_recorded,
)
from airflow_tables.operators._schema import ApprovalResume
from airflow_tables.operators._send import bytes_sent, decide_import, send_file
from airflow_tables.utils import openlineage
from airflow_tables.utils.events import TABLES_ALIAS, RecordsTableEvents, with_tables_alias
from airflow_tables.utils.tasks import DataTablesTaskMixin
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
    """A Data Tables operator: ``project_id``, ``datatables_conn_id`` and ``dry_run`` on top of BaseOperator.

    Each decides what it would do (``decide``, :mod:`~airflow_tables.operators._dry_run`): a dry run
    (``dry_run``, or ``[datatables] dry_run``) ends there, and ``airflow-tables plan`` asks it.
    """

    def __init__(
        self,
        *,
        project_id: str | None = None,
        datatables_conn_id: str = "datatables_default",
        dry_run: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.project_id = project_id
        self.datatables_conn_id = datatables_conn_id
        # Not ``self.dry_run``: BaseOperator has a method of that name (it renders the templates).
        self.dry_run_only = dry_run

    def lineage_writes(self) -> bool:
        """A dry run writes no table: its lineage events name the files it read, and no output."""
        from airflow_tables.operators._dry_run import dry_run_enabled

        return not dry_run_enabled(self)


#: The import operators' templated arguments.
_TEMPLATED = ("project_id", "file_path", "card_id", "table_name", "partition_key", "rejects_path")


class DataTablesImportOperator(
    RecordsTableEvents, ImportJobSteps, ApprovalResume, BudgetResume, ResumableJobMixin, _DataTablesOperator
):
    """Import a CSV file as a new table, or as an existing table's new data when ``card_id`` is given.

    The file is checked before any request (validation, then an optional Great Expectations
    suite), so a file the service would refuse or misread costs nothing. The import costs one
    credit and is sent once across the task's tries (:mod:`airflow_tables.hooks.send_once`); the
    CardID and the table's URL go to XCom before the wait, the task returns the CardID, and a
    successful import records an event on the table's asset (:func:`airflow_tables.assets.table_asset`).
    A retry resumes the job of an earlier try; a task the user cleared starts a new one.
    See docs/operators.md.

    :param file_path: the CSV to upload (templated): a local path, an ``airflow.sdk.ObjectStoragePath``
        or a URI such as ``s3://aws_conn@bucket/key.csv`` (docs/sources.md).
    :param project_id: the department (templated); default: the connection's ``project_id``. An
        explicit empty value fails the task.
    :param card_id: a table of the department whose data to replace (templated). Given but rendered
        empty (``""``, ``None``), the task fails before any request instead of making a new table.
    :param validate: check the file against the service's CSV rules first (docs/validation.md).
    :param expectations: a Great Expectations suite, expectation, list of them, suite dict, suite JSON
        path, or a callable ``configure_expectations(context)`` returning one; checked before any
        request on the columns as the service will type them; the result goes to XCom ``gx_result``
        and a failed suite fails the task without retry (docs/expectations.md).
    :param wait_for_completion: wait until the service has read the file (``Processed``).
    :param deferrable: wait in the triggerer instead of on a worker (a replacement's wait for an
        earlier read to end, before the file is sent, always runs on the worker).
    :param poll_interval: seconds between looks at the department while waiting (> 0).
    :param timeout: seconds to wait for the read before the try fails (a retry waits on the same
        table); ``None``: no deadline.
    :param conflict_retries: how many times a replacement refused because a read started is waited
        out and sent again.
    :param skip_if_unchanged: for a replacement: send nothing, spend no credit and record no asset
        event when the file's bytes are those this provider last uploaded to the table and nobody
        refreshed it since (the record is the table's last asset event, shared by every DAG).
    :param encoding: the file's encoding, a Python codec name such as ``cp1252``; checked in it and
        sent as UTF-8. Default: the file must be UTF-8.
    :param input_format: ``"csv"``, ``"parquet"`` or ``"jsonl"``; ``None``: told by the file's first
        bytes and its suffix. Parquet and JSON Lines are converted to CSV by exact rules
        (docs/sources.md, "Parquet and JSON Lines"; needs ``airflow-tables[parquet]``). A file
        compressed with gzip, bzip2, xz, zstandard or a zip of one CSV is decompressed whatever this says.
    :param combine: ``True`` or ``"by_name"``: ``file_path`` is a list, a glob (``*`` in its last segment)
        or a prefix (ending in ``/``), and every file it names is one part of one table (one upload,
        one credit): each part validated (errors name the part and its line), their headers the same
        columns (in the same order, or any order with ``"by_name"``), the header written once. Needs
        ``table_name`` for a new table (docs/sources.md, "Many files, one table").
    :param allowed_sources: prefixes ``file_path`` must be under (not templated), narrowing
        ``[datatables] allowed_sources``; a file outside fails before any request, without retry.
    :param table_name: the name people see (templated): the file part is sent as ``<table_name>.csv``
        and the service names the table after it. Default: the file's base name.
    :param on_read_mismatch: once read, the table's ``Rows`` and number of ``Columns`` must be what
        validation counted: ``"fail"`` (:class:`~airflow_tables.exceptions.DataTablesReadMismatchError`,
        no retry) or ``"warn"`` (logged; the upload is not recorded for ``skip_if_unchanged``).
    :param on_schema_change: for a replacement, the file's columns against the table's, before the
        send: ``"allow_new_columns"`` (fail on a column removed, renamed or retyped), ``"fail"`` (any
        difference), ``"allow"``, or ``"approve"`` (a person answers in the Airflow UI, deferred).
    :param approval_timeout: seconds an ``"approve"`` question waits (``None``: no limit); no answer
        fails the task, sending nothing.
    :param if_older: for a replacement from a run whose logical date is older than the run that last
        replaced the table through this provider: ``"skip"``, ``"fail"`` or ``"replace"`` anyway.
    :param partition_key: the partition the asset event is for (templated); default: a partitioned
        run's own key (Airflow 3.2+). Another key needs Airflow 3.3 (below, kept in the extras only).
    :param on_bad_rows: ``"fail"`` (a bad row refuses the file) or ``"quarantine"``: the good rows are sent,
        the bad written to ``rejects_path``; XCom ``bad_rows`` says how many (docs/operators/import.md).
    :param max_bad_rows: with ``"quarantine"``, more bad rows than this refuse the file (nothing sent).
    :param max_bad_fraction: with ``"quarantine"``, a larger share of bad data rows refuses the file.
    :param rejects_path: the rejects CSV (templated; a path or URI); default: beside the file, ``<name>.rejects.csv``.
    :param column_types: ``{"column": "long" | "string"}``: a value not a whole number in a ``long`` column
        makes its row bad; a declared column the header lacks refuses the file.
    :param on_budget_exhausted: the department's ``[datatables] credit_budget`` for the day (UTC) is spent:
        ``"fail"`` (no retry; nothing sent) or ``"wait"`` (deferred until the next UTC day, then run again).
    :param dry_run: run every check and free look, send nothing, and push the decision to XCom ``plan``
        (also ``[datatables] dry_run``; docs/plan.md).
    :param datatables_conn_id: the ``datatables`` connection (base URL and API key).
    """

    template_fields: Sequence[str] = (
        "project_id",
        "file_path",
        "card_id",
        "table_name",
        "partition_key",
        "rejects_path",
    )
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
        input_format: str | None = None,
        combine: bool | str = False,
        allowed_sources: str | Sequence[str] | None = None,
        table_name: str | None = None,
        on_read_mismatch: str = "fail",
        on_schema_change: str = "allow_new_columns",
        approval_timeout: float | None = 24 * 3600.0,
        if_older: str = "skip",
        partition_key: str | None = None,
        on_bad_rows: str = "fail",
        max_bad_rows: int | None = None,
        max_bad_fraction: float | None = None,
        rejects_path: str | None = None,
        column_types: dict[str, str] | None = None,
        on_budget_exhausted: str = "fail",
        datatables_conn_id: str = "datatables_default",
        **kwargs: Any,
    ) -> None:
        from airflow_tables.validation.row_policy import BadRowPolicy, check_declared_types

        BadRowPolicy(on_bad_rows, max_bad_rows, max_bad_fraction)  # one no run could use fails the DAG's parse
        _schema.check_policy(on_schema_change, approval_timeout)
        _backfill.check_choice(if_older)
        _budget.check_choice(on_budget_exhausted)
        check_options(poll_interval, timeout, card_id, skip_if_unchanged, encoding, allowed_sources, input_format)
        check_combine(combine, table_name, card_id, on_bad_rows, rejects_path)
        if on_read_mismatch not in ("fail", "warn"):
            raise ValueError(f"on_read_mismatch must be 'fail' or 'warn', not {on_read_mismatch!r}")
        # The table's asset is known only at run time (a new table's CardID, a templated id, the
        # connection's service): its event goes through this alias (utils/events.py).
        kwargs["outlets"] = with_tables_alias(kwargs.get("outlets"))
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
        self.input_format = input_format
        self.combine = combine
        self.allowed_sources = allowed_sources
        self.table_name = table_name
        self.on_read_mismatch = on_read_mismatch
        self.on_schema_change = on_schema_change
        self.approval_timeout = approval_timeout
        self.if_older = if_older
        self.partition_key = partition_key
        self.on_bad_rows = on_bad_rows
        self.max_bad_rows = max_bad_rows
        self.max_bad_fraction = max_bad_fraction
        self.rejects_path = rejects_path
        self.column_types = check_declared_types(column_types)
        self.on_budget_exhausted = on_budget_exhausted
        self._job: Job | None = None  # the job this try works on, once published (the XComs, the asset event)
        self._table: TableSummary | None = None  # the table as the wait's last look saw it read
        self._read_as_counted = True  # False once a read differed from validation's counts ("warn")

    # -- the flow (ResumableJobMixin's steps) --------------------------------------------------

    def execute(self, context: Context) -> str | None:
        if dry_run_enabled(self):  # a dry run's new table has no CardID yet
            return run_dry(self, context)
        with forgotten_when_ended(context, self, NOTES):  # below 3.3 the notes are Variables
            try:
                check_arguments(self)
                if not first_try(context):  # a first try has no earlier series to forget
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

    def decide(self, context: Context) -> Plan:
        """What this run would do, and cost: the checks and free looks of :meth:`submit_job`, nothing sent."""
        return decide_import(self, context)

    def submit_job(self, context: Context) -> JsonValue:
        """Check the file, then import it once; return what a retry needs to find the table again.

        Before the file is sent, a note of what to look for goes to the task's durable store.
        If the import's answer is lost (``DataTablesImportUncertainError``), the next try reads
        that note and adopts the table the service did create instead of paying again.
        """
        with opened_source(self) as source, check_file(self, context, source) as checked:
            sent = checked.sent or source  # the good rows alone, when bad ones were set aside
            self._learn_input(source, checked)
            project = self.department
            once = send_once(self, context)
            # Nothing sent yet in this try (a resume that comes back here, after approval, comes
            # before the send), so only a later try can find a send of an earlier one.
            job = None if first_try(context) else job_sent_earlier(once, project, sent)
            if job is None and checked.fingerprint is not None:
                job = unchanged_since_recorded(self, project, checked.fingerprint)
            if job is None:
                job = send_file(self, context, project, once, sent, checked)
            stamp = self.source_stamp(source)
        sent_bytes = bytes_sent(sent, checked)
        inputs = openlineage.facts_to_json(self.lineage.inputs)  # for the try that resumes after a deferral
        done = replace(
            job, series=once.series, stamp=stamp, sent_bytes=sent_bytes, inputs=inputs, **checked.recorded()
        ).to_json()
        return self._store(context).signed(self.external_id_key, done)  # stored by the mixin as it is

    # -- the source (a transfer makes a query's result instead: transfers/sql_to_datatables.py) -----

    def source_problem(self) -> str | None:
        """What is wrong with ``file_path`` as it rendered (``None``: nothing); checked before any request."""
        return source_problem(self.file_path, self.combine)

    def found_source(self) -> contextlib.AbstractContextManager[Source]:
        """The file to check and send, found (its metadata read): the one file, or the parts combined into one."""
        if self.combine:
            return combined_parts(self)
        from airflow_tables.sources import open_source

        found = open_source(
            self.file_path, encoding=self.encoding, allowed=self.allowed_sources, input_format=self.input_format
        )
        return contextlib.nullcontext(found)

    def source_stamp(self, source: Source) -> str | None:
        """What the file was when it was sent, cheaply (:func:`file_stamp`), for a clear to tell it unchanged."""
        return file_stamp(self.file_path, source)


class DataTablesReplaceOperator(DataTablesImportOperator):
    """Replace an existing table's data with a CSV file; the table keeps its CardID.

    If the table is still being read, the operator waits for it (on the worker, even when
    ``deferrable``: the file is sent from the worker right after), then replaces: the service
    refuses a replacement during a read. A refusal for any other reason (a table fed by a
    connection) fails the task without sending the file again. Takes the same options as
    :class:`DataTablesImportOperator`; ``card_id`` is required, and a ``card_id`` that renders
    empty fails the task before any request.

    :param card_id: the table whose data to replace (templated; required).
    :param file_path: the CSV to send (templated), as for :class:`DataTablesImportOperator`.
    :param kwargs: every other parameter of :class:`DataTablesImportOperator` (``project_id``,
        ``validate``, ``expectations``, ``wait_for_completion``, ``deferrable``, ``poll_interval``,
        ``timeout``, ``conflict_retries``, ``skip_if_unchanged``, ``encoding``, ``allowed_sources``,
        ``on_read_mismatch``, ``on_schema_change``, ``approval_timeout``, ``if_older``,
        ``partition_key``, ``datatables_conn_id``), with the same meaning; ``table_name`` is not
        used (the table keeps its name).
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
    :param project_id: the department (templated); default: the connection's ``project_id``.
    :param if_processing: ``"wait"`` until a table being read has been read, then delete;
        or ``"fail"``. A table being read counts as such whatever its ``LockedFromDelete`` says.
    :param if_locked: ``"fail"`` or ``"skip"`` (mark the task skipped, with the reason) when the
        table is read and still locked from delete (fed by an active connection).
    :param missing_ok: succeed when the table does not exist.
    :param poll_interval: seconds between looks while waiting (> 0).
    :param timeout: seconds to wait for a read to end (``None``: no deadline).
    :param conflict_retries: how many times a delete refused because a new read started is
        waited out and sent again.
    :param dry_run: look at the table and push the decision to XCom ``plan`` instead of deleting it
        (also ``[datatables] dry_run``; docs/plan.md).
    :param datatables_conn_id: the ``datatables`` connection (base URL and API key).
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

    def lineage_at_start(self) -> openlineage.TaskLineage:
        """The table to drop, once the connection is read (while the templates were rendered)."""
        ref = self.known_table(self.card_id)
        dropped = [] if ref is None else [openlineage.table_dataset(ref, change=openlineage.DROP)]
        return openlineage.TaskLineage([], dropped)

    def execute(self, context: Context) -> None:
        """Delete the table once it is not being read; a refusal ends the task as ``_refusals`` says."""
        if dry_run_enabled(self):
            run_dry(self, context)
            return
        self._delete(dry=False)

    def decide(self, context: Context) -> Plan:
        """What this run would do: the look and the refusals of :meth:`execute`, nothing deleted."""
        nothing = Plan("refuse", self.card_id, 0, "the delete ended without a decision")
        return decided(lambda: self._delete(dry=True), lambda: self.department, nothing)

    def _delete(self, *, dry: bool) -> Plan | None:
        """Delete the table (``dry``: raise the decision instead, on one look); a plan when nothing is to delete."""
        from airflow_tables.exceptions import (
            DataTablesBusyError,
            DataTablesError,
            DataTablesLockedError,
            DataTablesNotFoundError,
        )
        from airflow_tables.hooks._ids import card_id_problem
        from airflow_tables.operators._refusals import Refused, end, ending

        problem = card_id_problem(self.card_id)
        if problem is not None:
            raise AirflowFailException(f"{self.task_id}: {problem}; nothing was sent.")
        project = self.department
        seen: list[TableSummary] = []  # the last look that found the table

        def delete(look: Look) -> None:
            # What a look shows ends the task as the service's own refusal would (the same row of the table).
            if look.status is TableStatus.GONE:
                raise DataTablesNotFoundError(None, f"table {self.card_id} is not in department {project}", seen=True)
            table = look.table
            if table is not None:
                seen[:] = [table]
            if table is not None and table.locked_from_delete is True:  # read, and still locked: a live connection
                raise DataTablesLockedError(None, "", seen=True)
            if dry:
                raise Planned(_planned_delete(self.card_id, project, look))
            self.hook.delete_card(project, self.card_id)
            self.log.info("Deleted table %s (%s) from department %s", self.card_id, table and table.name, project)
            ref = table_ref(project, self.card_id, service=self.hook.settings.base_url)
            rows = {"rows": table.rows} if table is not None and table.rows is not None else {}
            self.lineage.outputs = [openlineage.table_dataset(ref, change=openlineage.DROP, **rows)]

        try:
            if dry:  # one look, no wait: the run would wait out a read, then do the same
                look = self.hook.look(project, self.card_id)
                if look.status is TableStatus.BEING_READ and self.if_processing == "fail":
                    raise DataTablesBusyError(None, look.message)
                delete(look)
            else:
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
            found = ending(err, refused)  # the task succeeds without deleting (missing_ok)
            return Plan("skip", self.card_id, 0, found.sentence if found else str(err), project)
        return None


def _planned_delete(card_id: str, project: str, look: Look) -> Plan:
    """A dry run's delete: the table the look found, and whether the run would first wait out its read."""
    named = f" ({look.table.name})" if look.table is not None and look.table.name else ""
    when = ", once the read under way ends" if look.status is TableStatus.BEING_READ else ""
    return Plan("delete", card_id, 0, f"delete {card_id}{named} from department {project}{when}", project)
