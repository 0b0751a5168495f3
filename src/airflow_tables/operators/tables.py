"""Operators for the Data Tables Service: import a CSV as a table, replace a table's data, delete a table.

Importing this module (what every DAG file does) is cheap: the hook, the validator,
pandas and Great Expectations are imported inside ``execute``.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_tables.assets import table_asset
from airflow_tables.hooks.status import TableStatus
from airflow_tables.links import DataTablesTableLink, table_url
from airflow_tables.operators import _waiting
from airflow_tables.operators._common import DataTablesTaskMixin
from airflow_tables.operators._resumable import durable_store
from airflow_tables.version_compat import (
    AirflowException,
    AirflowFailException,
    AirflowSkipException,
    ResumableJobMixin,
    conf,
)

if TYPE_CHECKING:
    from airflow.sdk import Context

_DEFERRABLE = conf.getboolean("operators", "default_deferrable", fallback=False)


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
    Expectations suite (``expectations``: a suite, a suite dict or the path of a suite
    JSON file) is checked next, also before any request. The import itself costs one
    credit and is sent once: the CardID is kept in the task state store as soon as the
    service accepts the file, so a retried task re-attaches to that table instead of
    importing again. The CardID and the table's URL go to XCom before the wait, and the
    task returns the CardID.

    :param file_path: the CSV to upload (templated).
    :param project_id: the department (templated); defaults to the connection's ``project_id``.
    :param card_id: a table of the department whose data to replace (templated).
    :param wait_for_completion: wait until the service has read the file (``Processed``).
    :param deferrable: wait in the triggerer instead of on a worker.
    :param poll_interval: seconds between looks at the department while waiting.
    :param timeout: seconds to wait for the table to be read before the try fails (a retry
        waits on the same table).
    :param conflict_retries: how many times a replacement refused because the table is
        still being read is waited out and sent again.
    """

    template_fields: Sequence[str] = ("project_id", "file_path", "card_id")
    operator_extra_links = (DataTablesTableLink(),)
    ui_color = "#dbeafe"
    external_id_key = "datatables_table"

    def __init__(
        self,
        *,
        file_path: str,
        project_id: str | None = None,
        card_id: str | None = None,
        validate: bool = True,
        expectations: Any = None,
        wait_for_completion: bool = True,
        deferrable: bool = _DEFERRABLE,
        poll_interval: float = 30.0,
        timeout: float = 6 * 3600.0,
        conflict_retries: int = 3,
        datatables_conn_id: str = "datatables_default",
        **kwargs: Any,
    ) -> None:
        if card_id and project_id and "{{" not in card_id + project_id:
            kwargs["outlets"] = [*(kwargs.get("outlets") or []), table_asset(project_id, card_id)]
        super().__init__(project_id=project_id, datatables_conn_id=datatables_conn_id, **kwargs)
        self.file_path = file_path
        self.card_id = card_id
        self.validate = validate
        self.expectations = expectations
        self.wait_for_completion = wait_for_completion
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.timeout = timeout
        self.conflict_retries = conflict_retries

    # -- the steps ----------------------------------------------------------------------------

    def execute(self, context: Context) -> str:
        return self.execute_resumable(context)

    def submit_job(self, context: Context) -> dict:
        """Check the file, then import it once; return what a retry needs to find the table again.

        Before the file is sent, a note of what to look for goes to the task's durable store.
        If the import's answer is lost (``DataTablesImportUncertainError``), the next try reads
        that note and adopts the table the service did create instead of paying again.
        """
        self._check_file()
        project = self.department
        store = durable_store(context)
        job = self._adopt_lost_import(store.get(_PENDING_KEY), project)
        if job is None:
            card_id, replaced_after = self._import(project, store)
            job = {"project_id": project, "card_id": card_id, "replaced_after": replaced_after}
        self._publish(context, job)
        return job

    def get_job_status(self, external_id: dict, context: Context) -> str:
        status, _ = _waiting.look(
            self.hook, external_id["project_id"], external_id["card_id"], external_id["replaced_after"]
        )
        return status.value

    def is_job_active(self, status: str) -> bool:
        # A table read badly counts as "active" so that the retry reports the failure
        # (poll_until_complete) instead of paying for the same file again.
        return status in ("being_read", "failed")

    def is_job_succeeded(self, status: str) -> bool:
        return status == "ready"

    def poll_until_complete(self, external_id: dict, context: Context) -> str:
        """Wait for the table; return the CardID.

        The return value matters: when a retry reconnects to a table still being read,
        Airflow 3.3's ResumableJobMixin returns what this returns, not get_job_result's.
        """
        self._publish(context, external_id)
        if not self.wait_for_completion:
            return external_id["card_id"]
        project, card_id, after = (
            external_id["project_id"],
            external_id["card_id"],
            external_id["replaced_after"],
        )
        status, summary = _waiting.look(self.hook, project, card_id, after)  # a finished table never defers
        if status.is_terminal:
            self._log_ready(_waiting.finished(status, summary, card_id))
            return card_id
        if self.deferrable:
            self.log.info("Table %s is being read; deferring the wait to the triggerer", card_id)
            self.defer(
                trigger=_waiting.trigger(
                    conn_id=self.datatables_conn_id,
                    project_id=project,
                    card_id=card_id,
                    poll_interval=self.poll_interval,
                    timeout=self.timeout,
                    replaced_after=after,
                ),
                method_name="execute_complete",
            )
        from airflow_tables.exceptions import DataTablesError

        try:
            summary = self.hook.wait_for_processed(
                project, card_id, poll_interval=self.poll_interval, timeout=self.timeout, replaced_after=after
            )
        except DataTablesError as err:
            status = _status_of(err)
            if status is None:
                raise
            _waiting.finished(status, None, card_id)
        self._log_ready(summary)
        return card_id

    def get_job_result(self, external_id: dict, context: Context) -> str:
        self._publish(context, external_id)
        return external_id["card_id"]

    def execute_complete(self, context: Context, event: dict[str, Any]) -> str:
        """Resume after the trigger: the CardID when the table was read well, else fail closed."""
        summary = _waiting.resolve_event(event)
        self._log_ready(summary)
        return event["card_id"]

    # -- helpers ------------------------------------------------------------------------------

    def _check_file(self) -> None:
        """Validate (and check expectations) before any request; failures are final, not retried."""
        if not self.validate and self.expectations is None:
            return
        from airflow_tables.validation import validate_csv

        report = validate_csv(self.file_path)
        self.log.info("%s", report.summary())
        for warning in report.warnings:
            self.log.warning("%s: %s", self.file_path, warning)
        if self.validate and not report.ok:
            from airflow_tables.exceptions import CsvValidationError

            raise AirflowFailException(str(CsvValidationError(report.path, report.errors)))
        if self.expectations is not None:
            from airflow_tables.operators._expectations import ExpectationsFailed, check

            try:
                self.log.info("%s", check(report, self.expectations))
            except ExpectationsFailed as err:
                raise AirflowFailException(f"{self.file_path}: {err}") from None

    def _wait_until_replaceable(self, project: str) -> str | None:
        """Wait while the table is being read (it cannot be replaced then); return its completion time.

        Returns a second after the table was seen ready: completion times have whole seconds,
        and a replacement read that finished in the same second as the previous one could not
        be told from it (see ``TableStatus.from_summary(replaced_after=...)``).
        """
        status, summary = _waiting.look(self.hook, project, self.card_id)
        if status is TableStatus.GONE:
            raise AirflowFailException(f"cannot replace {self.card_id}: it is not in department {project}")
        if status is TableStatus.BEING_READ:
            self.log.info("Table %s is still being read; waiting before replacing its data", self.card_id)
            summary = self._wait_quietly(project, self.card_id)
        time.sleep(1.0)
        return (summary or {}).get("UploadCompletionTime")

    def _wait_quietly(self, project: str, card_id: str) -> dict | None:
        """Wait on the worker for a table to finish its current read, whatever the outcome."""
        from airflow_tables.exceptions import DataTablesUploadFailedError

        try:
            return self.hook.wait_for_processed(
                project, card_id, poll_interval=self.poll_interval, timeout=self.timeout
            )
        except DataTablesUploadFailedError:
            return _waiting.look(self.hook, project, card_id)[1]  # the old file failed; replacing is fine

    def _import(self, project: str, store: Any) -> tuple[str, str | None]:
        """Send the file once; return the CardID and, for a replacement, the previous completion time.

        A replacement refused because a read started meanwhile (409) is waited out and sent
        again, at most ``conflict_retries`` times.
        """
        from airflow_tables.exceptions import DataTablesConflictError

        if not self.card_id:
            name = os.path.basename(self.file_path)
            before = [c["CardID"] for c in self.hook.list_cards(project) if _named_after(c, name)]
            store.set(_PENDING_KEY, {"project_id": project, "file": name, "before": before})
            return self.hook.import_csv(project, self.file_path), None
        for attempt in range(self.conflict_retries + 1):
            replaced_after = self._wait_until_replaceable(project)
            store.set(_PENDING_KEY, {"project_id": project, "card_id": self.card_id, "replaced_after": replaced_after})
            try:
                return self.hook.import_csv(project, self.file_path, card_id=self.card_id), replaced_after
            except DataTablesConflictError as err:
                if attempt == self.conflict_retries:
                    raise AirflowException(f"{self.card_id} stayed busy: {err.msg}") from err
                self.log.info("Replacement refused (%s); waiting for the table, then sending again", err.msg)
        raise AssertionError("unreachable")

    def _adopt_lost_import(self, pending: dict | None, project: str) -> dict | None:
        """The job of an earlier try whose import answer was lost but which the service received."""
        if not pending or pending.get("project_id") != project:
            return None
        if pending.get("card_id"):  # a replacement: did the table start or finish a new read?
            after = pending.get("replaced_after")
            status, summary = _waiting.look(self.hook, project, pending["card_id"])
            changed = status is TableStatus.BEING_READ or (summary or {}).get("UploadCompletionTime") != after
            if status is TableStatus.GONE or not changed:
                return None
            self.log.info(
                "An earlier try's replacement of %s reached the service; not sending it again", pending["card_id"]
            )
            return {"project_id": project, "card_id": pending["card_id"], "replaced_after": after}
        new = [
            c["CardID"]
            for c in self.hook.list_cards(project)
            if _named_after(c, pending["file"]) and c["CardID"] not in pending["before"]
        ]
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
        return {"project_id": project, "card_id": new[0], "replaced_after": None}

    def _publish(self, context: Context, job: dict) -> None:
        """Push the CardID and the table's URL (the "Open table" button) before any wait."""
        ti = context["ti"]
        ti.xcom_push(key="card_id", value=job["card_id"])
        url = table_url(self.hook.settings.app_url, job["project_id"], job["card_id"])
        if url:
            ti.xcom_push(key=DataTablesTableLink().xcom_key, value=url)

    def _log_ready(self, summary: dict) -> None:
        self.log.info(
            "Table %s (%s) is ready: %s rows, read at %s",
            summary.get("CardID"),
            summary.get("CardName"),
            summary.get("Rows"),
            summary.get("UploadCompletionTime"),
        )

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The uploaded file as input and the table as output (called by the OpenLineage provider only).

        The table is named ``<ProjectID>/<CardID>`` in the namespace ``datatables://<service host>``.
        """
        from urllib.parse import urlsplit

        from airflow.providers.openlineage.extractors import OperatorLineage
        from openlineage.client.event_v2 import Dataset

        card_id = task_instance.xcom_pull(task_ids=task_instance.task_id, key="card_id")
        host = urlsplit(self.hook.settings.base_url).netloc
        outputs = [Dataset(namespace=f"datatables://{host}", name=f"{self.department}/{card_id}")] if card_id else []
        file = os.path.abspath(self.file_path)
        return OperatorLineage(inputs=[Dataset(namespace="file", name=file)], outputs=outputs)


class DataTablesReplaceOperator(DataTablesImportOperator):
    """Replace an existing table's data with a CSV file; the table keeps its CardID.

    If the table is still being read, the operator waits for it, then replaces (the
    service refuses a replacement during a read). Takes the same options as
    :class:`DataTablesImportOperator`; ``card_id`` is required.
    """

    def __init__(self, *, card_id: str, file_path: str, **kwargs: Any) -> None:
        if not card_id:
            raise ValueError("DataTablesReplaceOperator needs the card_id of the table to replace")
        super().__init__(card_id=card_id, file_path=file_path, **kwargs)


class DataTablesDeleteOperator(_DataTablesOperator):
    """Delete a table and its data, permanently.

    :param card_id: the table (templated).
    :param if_processing: ``"wait"`` until a table being read is ready, then delete; or ``"fail"``.
    :param if_locked: ``"fail"`` or ``"skip"`` (mark the task skipped, with the reason) when the
        table is locked from delete (fed by an active connection).
    :param missing_ok: succeed when the table does not exist.
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
        timeout: float = 3600.0,
        conflict_retries: int = 3,
        **kwargs: Any,
    ) -> None:
        if if_processing not in ("wait", "fail"):
            raise ValueError(f"if_processing must be 'wait' or 'fail', not {if_processing!r}")
        if if_locked not in ("fail", "skip"):
            raise ValueError(f"if_locked must be 'fail' or 'skip', not {if_locked!r}")
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
            DataTablesConflictError,
            DataTablesLockedError,
            DataTablesNotFoundError,
            DataTablesPermissionError,
        )

        project = self.department
        for attempt in range(self.conflict_retries + 1):
            status, summary = _waiting.look(self.hook, project, self.card_id)
            if status is TableStatus.GONE:
                return self._missing(project)
            if summary.get("LockedFromDelete") is True:
                return self._locked(summary)
            if status is TableStatus.BEING_READ:
                if self.if_processing == "fail":
                    raise AirflowFailException(f"{self.card_id} is still being read; if_processing='fail'")
                self.log.info("Table %s is still being read; waiting before deleting it", self.card_id)
                self._wait(project)
            try:
                self.hook.delete_card(project, self.card_id)
            except DataTablesLockedError as err:
                return self._locked(summary, err.msg)
            except DataTablesNotFoundError:
                return self._missing(project)
            except DataTablesPermissionError as err:
                raise AirflowFailException(
                    f"the API key of {self.datatables_conn_id!r} may not delete tables in department {project}: "
                    f"deleting needs permission to manage data there ({err.msg})"
                ) from None
            except DataTablesConflictError as err:  # a new read started between our look and the delete
                if attempt == self.conflict_retries:
                    raise AirflowException(f"{self.card_id} stayed busy: {err.msg}") from err
                self.log.info("Delete refused (%s); looking again", err.msg)
                continue
            self.log.info("Deleted table %s (%s) from department %s", self.card_id, summary.get("CardName"), project)
            return None
        return None

    def _wait(self, project: str) -> None:
        from airflow_tables.exceptions import DataTablesUploadFailedError

        with contextlib.suppress(DataTablesUploadFailedError):  # read badly, but finished: deletable
            self.hook.wait_for_processed(project, self.card_id, poll_interval=self.poll_interval, timeout=self.timeout)

    def _missing(self, project: str) -> None:
        if self.missing_ok:
            self.log.info("Table %s is not in department %s; nothing to delete (missing_ok)", self.card_id, project)
            return
        raise AirflowFailException(
            f"table {self.card_id} is not in department {project} (pass missing_ok=True to allow)"
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


_PENDING_KEY = "datatables_import_sent"


def _named_after(card: dict, file_name: str) -> bool:
    """Whether a table's CardName is the file's name (with or without ``.csv``), as the service names uploads."""
    name = (card.get("CardName") or "").casefold()
    return name in (file_name.casefold(), os.path.splitext(file_name)[0].casefold())


def _status_of(err: Exception) -> TableStatus | None:
    """The table status a hook error stands for, if any (for one way of failing, not two)."""
    from airflow_tables.exceptions import DataTablesNotFoundError, DataTablesUploadFailedError

    if isinstance(err, DataTablesUploadFailedError):
        return TableStatus.FAILED
    if isinstance(err, DataTablesNotFoundError):
        return TableStatus.GONE
    return None
