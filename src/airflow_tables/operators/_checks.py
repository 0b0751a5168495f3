"""The import operators' checks (when the DAG is parsed, and before any request), and final refusals.

Everything here fails the task without retry (``AirflowFailException``) and costs nothing: a
``file_path`` that rendered wrong, a file that cannot be read or may not be read, a file the
service would refuse or misread (``validate``), data that breaks the suite (``expectations``).
One exception: a local file that looks still being written (its one problem a last record cut
short, modified moments before it was read) is left to the task's retries (``CsvUnfinishedError``).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_tables.model import check_wait
from airflow_tables.version_compat import AirflowException, AirflowFailException

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from airflow.sdk import Context

    from airflow_tables.model import TableDetail
    from airflow_tables.operators.tables import DataTablesImportOperator
    from airflow_tables.sources import Source
    from airflow_tables.validation.quarantine import RowCheck


def check_options(
    poll_interval: object,
    timeout: object,
    card_id: str | None,
    skip_if_unchanged: bool,
    encoding: str | None,
    allowed_sources: str | Sequence[str] | None,
    input_format: str | None = None,
) -> None:
    """Refuse, when the DAG is parsed (``ValueError``), options that no run could use."""
    check_wait(poll_interval, timeout)
    if allowed_sources is not None:
        from airflow_tables.sources.allowed import ARGUMENT, parse_prefixes

        if not parse_prefixes(allowed_sources, ARGUMENT):
            raise ValueError("allowed_sources names no prefix: give at least one, or None for no limit of its own")
    if skip_if_unchanged and card_id is None:
        raise ValueError("skip_if_unchanged needs a card_id: a new table has no earlier upload to compare with")
    if encoding is not None:  # an unknown codec name
        from airflow_tables.sources.transcode import declared

        declared(encoding)
    if input_format is not None:
        from airflow_tables.sources.tabular import check_encoding, input_format_of

        check_encoding(input_format_of("input_format", "", b"", input_format), encoding, "the operator's arguments")


def check_combine(
    combine: object, table_name: str | None, card_id: str | None, on_bad_rows: str, rejects_path: str | None
) -> None:
    """Refuse, when the DAG is parsed, a ``combine=`` no run could use."""
    if combine not in (False, True, "by_name"):
        raise ValueError(f"combine must be False, True or 'by_name', not {combine!r}")
    if not combine:
        return
    if table_name is None and card_id is None:
        raise ValueError("combine needs a table_name: the parts have no one name to give the table")
    if on_bad_rows == "quarantine" and rejects_path is None:
        raise ValueError("combine with on_bad_rows='quarantine' needs a rejects_path: the parts have no one place")


def arguments_problem(
    file_path: Any,
    card_id: Any,
    replaces: bool,
    table_name: str | None,
    poll_interval: object,
    timeout: object,
    combine: bool | str = False,
) -> str | None:
    """What is wrong with the arguments as they rendered (the first thing found), or ``None``."""
    return source_problem(file_path, combine) or target_problem(card_id, replaces, table_name, poll_interval, timeout)


def source_problem(file_path: Any, combine: bool | str = False) -> str | None:
    """What is wrong with ``file_path`` as it rendered (one file, or the parts of ``combine=``), or ``None``."""
    return parts_problem(file_path) if combine else file_path_problem(file_path)


def target_problem(
    card_id: Any, replaces: bool, table_name: str | None, poll_interval: object, timeout: object
) -> str | None:
    """What is wrong with the table the task writes and its wait, as they rendered, or ``None``."""
    from airflow_tables.hooks._ids import card_id_problem

    problem = None
    if replaces:
        problem = card_id_problem(card_id)
    if problem is None and table_name is not None:
        from airflow_tables.hooks.tables import upload_name

        try:
            upload_name("x.csv", table_name)
        except ValueError as err:
            problem = str(err)
    if problem is None:
        try:
            check_wait(poll_interval, timeout)
        except ValueError as err:
            problem = str(err)
    return problem


def check_arguments(task: DataTablesImportOperator) -> None:
    """Fail the task, without retry and before any request, on arguments that rendered wrong."""
    problem = task.source_problem() or target_problem(
        task.card_id, task.replaces, task.table_name, task.poll_interval, task.timeout
    )
    if problem is not None:
        raise AirflowFailException(f"{task.task_id}: {problem}; nothing was sent.")
    task.department  # noqa: B018 - an empty project_id fails here, before any request
    if task.replaces and task.table_name is not None:
        task.log.warning(
            "%s: table_name=%r is not used by a replacement: the table keeps its name (the service's interface "
            "does not rename a table whose data is replaced). Leave table_name out of replacements.",
            task.task_id,
            task.table_name,
        )


def file_path_problem(file_path: Any) -> str | None:
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
    from airflow_tables.sources.parts import names_many

    if not names_many(text):
        return None
    not_one = _not_one_file(text)  # orders[1].csv that exists is one file
    if not_one is None:
        return None
    from airflow_tables.sources.storage import label_of

    return (
        f"file_path {label_of(text)!r} is a pattern or a prefix, not one file{not_one}: pass combine=True to import "
        "every file it names into one table, or map the operator over the files"
    )


def _not_one_file(text: str) -> str | None:
    """None when a path or URI that reads as a pattern names one existing file as it is (a key may hold ``*``).

    Otherwise what the look found, for the message: nothing (no file or object is named so), or why
    the storage could not say. Object storage allows any character in a key; a local file system all
    but ``/``. Asked only when the name reads as a pattern: one look (``stat``, or the storage's
    ``HEAD``) at run time.
    """
    from airflow_tables.sources.errors import SourceError, SourceNotFoundError
    from airflow_tables.sources.storage import is_uri, stat_object

    if not is_uri(text):
        return None if os.path.isfile(text) else ""
    try:
        stat_object(text)
    except SourceNotFoundError:  # none, or a prefix
        return ""
    except SourceError as err:
        return f" (whether an object is named exactly so could not be asked: {err.reason})"
    return None


def parts_problem(file_path: Any) -> str | None:
    """:func:`file_path_problem` for ``combine=``: a list whose every item names one file, or one pattern or prefix."""
    from airflow_tables.sources.parts import names_many

    if isinstance(file_path, (list, tuple)):
        if not file_path:
            return "file_path is an empty list; combine needs at least one part"
        return next((problem for item in file_path if (problem := file_path_problem(item))), None)
    if isinstance(file_path, (str, os.PathLike)) and names_many(file_path):
        return None
    return file_path_problem(file_path)


@contextlib.contextmanager
def opened_source(task: DataTablesImportOperator) -> Iterator[Source]:
    """The file to check and send (``task.found_source()``: the file, its parts, a query's result), read once.

    A file that is checked (``validate``, ``expectations``, ``skip_if_unchanged``'s
    fingerprint) is staged (:func:`~airflow_tables.sources.staged`: a local UTF-8 file is used
    where it lies, anything else copied once to a bounded local file, converted to UTF-8 on the
    way), then checked and sent: storage is read once, and what was checked is what is sent.
    With ``validate``, an object in UTF-8 is validated as it is copied
    (:func:`~airflow_tables.validation.report.scanned_copy`, asked what :func:`_validate` will
    ask), so the copy is read again only when only an exact read can describe it. An unchecked
    file is streamed by the hook straight into the upload. A missing file, or one outside the
    allowed sources (``allowed_sources``, ``[datatables] allowed_sources``), fails the task (no
    retry); other storage errors may be retried.
    """
    from airflow_tables.exceptions import CsvValidationError
    from airflow_tables.operators._rows import row_check
    from airflow_tables.operators._schema import needs_column_types
    from airflow_tables.sources import SourceError, SourceNotAllowedError, SourceNotFoundError, staged
    from airflow_tables.validation.report import scanned_copy
    from airflow_tables.validation.rules import MAX_BYTES

    sorts = row_check(task).sorts  # rows judged one by one read a local file, not a copy's scan
    checked = (
        task.validate or task.expectations is not None or task.skip_if_unchanged or needs_column_types(task) or sorts
    )
    with contextlib.ExitStack() as stack:
        try:
            source = stack.enter_context(task.found_source())
            if checked:
                copy = (
                    scanned_copy(source, column_types=needs_column_types(task))
                    if task.validate and not sorts
                    else staged(source, max_bytes=MAX_BYTES)
                )
                source = stack.enter_context(copy)
        except (SourceNotFoundError, SourceNotAllowedError, CsvValidationError) as err:
            raise AirflowFailException(f"{err}; nothing was sent to the Data Tables Service") from None
        except SourceError as err:
            raise AirflowException(f"{err}; nothing was sent to the Data Tables Service") from err
        yield source


def combined_parts(task: DataTablesImportOperator) -> contextlib.AbstractContextManager[Source]:
    """``combine=``: the parts ``file_path`` names, validated and written as one CSV named ``<table_name>.csv``."""
    from airflow_tables.sources.parts import open_parts
    from airflow_tables.sources.storage import label_of
    from airflow_tables.validation.combine import combined

    parts = open_parts(task.file_path, task.encoding, allowed=task.allowed_sources, input_format=task.input_format)
    many = task.file_path
    label = f"{len(parts)} parts ({label_of(many) if not isinstance(many, (list, tuple)) else 'a list'})"
    task.log.info("Combining %s into one table: %s", label, ", ".join(part.label for part in parts[:20]))
    name = f"{task.table_name or task.card_id}.csv"  # a replacement keeps its table's name whatever this is
    return combined(parts, name, label, by_name=task.combine == "by_name")


@dataclass(frozen=True)
class Checked:
    """What the checks before sending found: the fingerprint (``skip_if_unchanged``) and validation's counts.

    ``rows`` and ``columns`` are ``None`` when the file was not validated; ``report`` is the
    validation report (``None`` likewise), for checks that need more of it. ``sent`` is the file
    to send when it is not the one checked (the good rows of ``on_bad_rows="quarantine"``).
    """

    fingerprint: str | None = None
    rows: int | None = None
    columns: int | None = None
    report: Any = None
    sent: Source | None = None
    #: ``on_bad_rows="quarantine"``: the rows set aside and where the rejects were written.
    bad_rows: int | None = None
    rejects: str | None = None
    #: The expectations' result (``describe_dict()``, also XCom ``gx_result``), for lineage's data-quality facet.
    gx_result: dict | None = None

    def recorded(self) -> dict[str, Any]:
        """What the job keeps of the checks (``operators._job.Job``'s fields): for the asset event, across tries."""
        return {"fingerprint": self.fingerprint, "bad_rows": self.bad_rows, "rejects": self.rejects}


@dataclass(frozen=True)
class FileCheck:
    """What to check in a file before it is sent, as the task's arguments say.

    ``validate``: the service's CSV rules; ``expectations``: a Great Expectations suite;
    ``column_types``: type the columns in the same scan (a replacement that compares them);
    ``fingerprint``: hash the bytes to be sent (``skip_if_unchanged``).
    """

    file_path: Any
    validate: bool
    expectations: Any = None
    column_types: bool = False
    fingerprint: bool = False
    #: ``on_bad_rows``, its thresholds and ``column_types`` (:mod:`._rows`); None: the file is judged whole.
    rows: RowCheck | None = None

    @property
    def scans(self) -> bool:
        """Whether the file is scanned at all (validation or expectations)."""
        return self.validate or self.expectations is not None


@contextlib.contextmanager
def check_file(task: DataTablesImportOperator, context: Context, source: Source) -> Iterator[Checked]:
    """Validate (and check expectations) before any request; failures are final, not retried.

    With ``skip_if_unchanged``, the fingerprint of the bytes to be sent (the staged copy)
    is computed alongside the validation scan. The rows and columns validation counted are
    returned with it: the table must have them once read (``on_read_mismatch``). The good rows of
    a quarantine (``Checked.sent``) can be read for the time of the block.
    """
    from airflow_tables.operators._rows import row_check
    from airflow_tables.operators._schema import needs_column_types

    check = FileCheck(
        task.file_path,
        task.validate,
        task.expectations,
        needs_column_types(task),
        task.skip_if_unchanged,
        row_check(task),
    )
    from airflow_tables.tracing import span

    if check.rows is not None and check.rows.sorts:
        with contextlib.ExitStack() as held:
            with span("validate", file=source.label):  # the checks, not the send the caller makes in the block
                checked = held.enter_context(_rows_checked(check, context, source, task.log))
            yield checked
        return
    with span("validate", file=source.label):
        checked = checked_file(check, context, source, task.log)
    yield checked


@contextlib.contextmanager
def _rows_checked(check: FileCheck, context: Context, source: Source, log: Any) -> Iterator[Checked]:
    """``check`` with its rows judged one by one (:mod:`._rows`): expectations and the fingerprint on what is sent."""
    from airflow_tables.operators._rows import held_to_rows

    assert check.rows is not None
    quarantined = check.rows.policy.quarantines
    with held_to_rows(
        check.file_path,
        check.rows,
        context,
        source,
        log,
        column_types=check.column_types,
        expectations=check.expectations,
    ) as aside:
        report, sent = aside.report, aside.source
        gx_result = None
        if not quarantined:  # a quarantine checked the suite on the rows the rules let through
            gx_result = _expect(check, context, report, aside.as_local(), log)
        fingerprint = None
        if check.fingerprint:
            from airflow_tables.sources.fingerprint import fingerprint_file

            local = aside.as_local()  # the file in place, its copy, or a copy of its good rows
            assert local.local_path is not None
            fingerprint = fingerprint_file(local.local_path)
        bad_rows = aside.bad_rows if quarantined else None
        yield Checked(fingerprint, report.rows, report.column_count, report, sent, bad_rows, aside.rejects, gx_result)


def checked_file(check: FileCheck, context: Context, source: Source, log: Any) -> Checked:
    """Run ``check`` on ``source`` (one scan; the fingerprint alongside it): what was found, or a final failure."""
    if not check.fingerprint:
        report, gx_result = _validate(check, context, source, log)
        fingerprint = None
    else:
        from airflow_tables.sources.fingerprint import while_validating

        assert source.local_path is not None  # staged by opened_source
        (report, gx_result), fingerprint = while_validating(
            lambda: _validate(check, context, source, log), source.local_path
        )
    if report is None:
        return Checked(fingerprint, gx_result=gx_result)
    return Checked(fingerprint, report.rows, report.column_count, report, gx_result=gx_result)


def _validate(check: FileCheck, context: Context, source: Source, log: Any) -> tuple[Any, dict | None]:
    """The validation, then the expectations, whose result (``describe_dict()``) goes to XCom ``gx_result``.

    Returns the validation report (``None`` when the file was not validated) and that result.
    """
    if not check.scans:
        return None, None
    from airflow_tables.validation import validate_source

    # The schema check's column types come from this same scan (one read of the file).
    read_at = time.time()
    report = validate_source(source, column_types=check.column_types)
    log.info("%s", report.summary())
    for warning in report.warnings:
        log.warning("%s: %s", check.file_path, warning)
    if check.validate and not report.ok:
        from airflow_tables.exceptions import CsvValidationError

        unfinished = still_being_written(check.file_path, report, read_at)
        if unfinished is not None:
            raise unfinished
        raise AirflowFailException(str(CsvValidationError(report.path, report.errors)))
    gx_result = _expect(check, context, report, source, log)
    return (report if check.validate else None), gx_result


def _expect(check: FileCheck, context: Context, report: Any, source: Source, log: Any) -> dict | None:
    """The expectations on ``source``, the file as sent; their result (``describe_dict()``) goes to XCom gx_result."""
    if check.expectations is not None:
        from airflow_tables.expectations import ExpectationsError
        from airflow_tables.expectations import check as check_expectations

        try:
            outcome = check_expectations(report, check.expectations, path=source.local_path)
        except ExpectationsError as err:
            raise AirflowFailException(f"{check.file_path}: {err}") from None
        context["ti"].xcom_push(key="gx_result", value=outcome.result)
        log.info("%s", outcome.summary)
        if not outcome.success:
            raise AirflowFailException(f"{check.file_path}: {outcome.failure_message()}")
        return outcome.result
    return None


def still_being_written(file_path: Any, report: Any, read_at: float) -> Exception | None:
    """The retryable error for a local file that looks unfinished; ``None`` for one that is simply malformed.

    A writer that has not finished leaves a last record cut short (``CsvReport.cut_short``) in a
    file modified moments ago: less than ``_rows.UNFINISHED_WITHIN`` seconds before the reading
    started, or during it. Such a file is retried, not failed for good: the next try may find
    it whole. An object in storage is written whole (a PUT), so only local files are looked at.
    """
    from airflow_tables.operators._rows import unfinished

    return unfinished(file_path, report.path, report.cut_short(), read_at)


@dataclass(frozen=True)
class ReadCheck:
    """``on_read_mismatch``: a read table must have the rows and columns validation counted.

    ``rows`` and ``columns`` are ``None`` when the file was not validated (nothing to compare);
    ``policy`` is ``"fail"`` or ``"warn"``.
    """

    rows: int | None
    columns: int | None
    policy: str = "fail"

    @property
    def counted(self) -> bool:
        """Whether there is anything to compare (and so a fetch of the table to make)."""
        return self.rows is not None and self.columns is not None

    def mismatch(self, detail: TableDetail, project: str, file_path: Any) -> str | None:
        """What differs between the read table ``detail`` and the counts, said for a person; ``None``: nothing."""
        rows, columns = detail.rows, len(detail.columns)
        if not self.counted or (rows == self.rows and columns == self.columns):
            return None
        return (
            f"table {detail.card_id} ({detail.name}) in department {project} was read with {rows} rows and "
            f"{columns} columns, but validation counted {self.rows} rows and {self.columns} columns in "
            f"{file_path}: the service misread the file, or another client replaced the table since (it was "
            f"read at {detail.completion_time}). The table exists and the credit is spent"
        )


def mapped_values(context: Context, key: str) -> list[Any] | None:
    """What every instance of this mapped task pushed under ``key`` in this run; ``None`` when it is not mapped.

    One request for all map indexes (the SDK's ``XCom.get_all``), where naming the map
    indexes costs one request each: a thousand mapped instances reading each other's XComs
    one at a time made a million reads. A list of task ids makes the SDK answer a list
    even when one value is there.
    """
    ti = context["ti"]
    if ti.map_index is None or ti.map_index < 0:
        return None
    return list(ti.xcom_pull(task_ids=[ti.task_id], key=key) or [])


def replaced_already(card_id: str, replaced: list[Any]) -> int:
    """How many other instances of a mapped task replaced ``card_id`` (``replaced``: their ``card_id`` XComs)."""
    return replaced.count(card_id)


def twice_replaced_warning(task_id: str, map_index: int | None, card_id: str, others: int) -> str:
    """The warning for a table that ``others`` instances of the same mapped task replaced already."""
    return (
        f"{task_id}[{map_index}] replaces {card_id}, which {others} other map index(es) of this run replaced already: "
        "each replacement costs a credit and the table keeps the last one's data. Map over distinct card_ids (or "
        "merge the files)."
    )


def warn_if_mapped_twice(task: DataTablesImportOperator, context: Context, card_id: str) -> None:
    """Warn when another task instance of this mapped task already replaced ``card_id`` in this run.

    Both pay a credit and the table keeps the last one's data. The other instances' ``card_id``
    XComs (pushed once a replacement is sent; this try's own is not pushed yet) are what is
    compared, so an instance that has not sent yet is not seen.
    """
    from airflow_tables.links import CARD_ID_XCOM_KEY

    others = replaced_already(card_id, mapped_values(context, CARD_ID_XCOM_KEY) or [])
    if others:
        ti = context["ti"]
        task.log.warning("%s", twice_replaced_warning(ti.task_id, ti.map_index, card_id, others))


#: The XCom each instance of a mapped import pushes before it sends: the department and the upload's name.
UPLOAD_KEY = "upload"


@dataclass(frozen=True)
class MappedUpload:
    """What one instance of a mapped import is about to send: a new table named ``name`` in ``project_id``.

    Two tables of one name from one run cannot be told apart, by people or by a retry whose
    answer was lost: a ``table_name`` given in ``partial()`` names every table alike, and so do
    files of one base name in several folders.
    """

    project_id: str
    name: str

    def to_json(self) -> dict[str, str]:
        return {"project_id": self.project_id, "name": self.name}

    def alike(self, recorded: list[Any]) -> bool:
        """Whether another instance's record (``recorded``: every instance's, this one's included) is this one."""
        return recorded.count(self.to_json()) > 1

    def refusal(self, task_id: str, map_index: int | None) -> str:
        return (
            f"{task_id}[{map_index}]: another map index of this run also imports a new table named after "
            f"{self.name!r} into department {self.project_id}; tables of one name cannot be told apart. Give each "
            "its own table_name (map it with the files, not in partial()), or name the files apart; nothing was sent."
        )


def refuse_if_mapped_alike(task: DataTablesImportOperator, context: Context, project: str, name: str) -> None:
    """Fail, before sending, when another instance of this mapped import sends a new table of the same name there.

    Each instance records what it is about to send (XCom ``upload``), then reads every
    instance's record in one request: of two that send alike, the later one sees the earlier,
    whichever order they run in (:class:`MappedUpload`).
    """
    ti = context["ti"]
    if ti.map_index is None or ti.map_index < 0:
        return
    mine = MappedUpload(project, name)
    ti.xcom_push(key=UPLOAD_KEY, value=mine.to_json())
    if mine.alike(mapped_values(context, UPLOAD_KEY) or []):
        raise AirflowFailException(mine.refusal(ti.task_id, ti.map_index))
