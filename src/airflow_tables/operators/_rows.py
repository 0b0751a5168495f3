"""``on_bad_rows`` and ``column_types`` in the import operators: the good rows sent, the bad ones set aside.

The decision is :func:`airflow_tables.validation.quarantine.sorted_rows`'s (which rows are bad,
what is sent, whether a threshold refuses the file); here it becomes the task's: the XCom
``bad_rows``, the log lines, and a refusal that fails the task without retry, before any request
(no credit is spent, a replaced table is left as it was). A file whose one bad row is its last,
cut short, and which changed moments ago is retried instead (``CsvUnfinishedError``): a
writer that has not finished is not a bad row.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from airflow_tables.version_compat import AirflowFailException

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_tables.sources import Source
    from airflow_tables.validation import CsvReport
    from airflow_tables.validation.drop_rows import RowVerdict
    from airflow_tables.validation.quarantine import RowCheck, SetAside

#: The XCom a quarantining task pushes: ``{"count": N, "rejects": "<where>"}``.
BAD_ROWS_XCOM_KEY = "bad_rows"


def row_check(task: Any) -> RowCheck:
    """The task's ``on_bad_rows``, thresholds, ``column_types`` and ``rejects_path``, as one value."""
    from airflow_tables.validation.quarantine import RowCheck

    return RowCheck.of(task.on_bad_rows, task.max_bad_rows, task.max_bad_fraction, task.rejects_path, task.column_types)


@contextlib.contextmanager
def held_to_rows(
    file_path: Any,
    check: RowCheck,
    context: Context,
    source: Source,
    log: Any,
    *,
    column_types: bool,
    expectations: Any = None,
) -> Iterator[SetAside]:
    """Hold ``source`` (a local UTF-8 file) to ``check``; the good rows' file (``SetAside.source``) lives for the block.

    Fails the task (no retry) when the file is refused: a file-level problem, a bad row with
    ``"fail"``, a threshold exceeded, no good row left. With ``"quarantine"``, ``expectations``
    are checked on the rows the rules let through, and the rows a row-wise expectation finds
    unexpected are set aside too (:func:`_expected_rows`).
    """
    from airflow_tables.exceptions import CsvValidationError
    from airflow_tables.validation.quarantine import sorted_rows

    read_at = time.time()
    judge = None
    if expectations is not None and check.policy.quarantines:

        def judge(report: CsvReport, sent: Source) -> dict[int, RowVerdict]:
            return _expected_rows(file_path, expectations, report, sent, context, log)

    with sorted_rows(
        source, check, default_rejects=str(file_path), column_types=column_types, judge_rows=judge
    ) as aside:
        report = aside.report
        log.info("%s", report.summary())
        for warning in report.warnings:
            log.warning("%s: %s", file_path, warning)
        unfinished = _still_being_written(file_path, aside, read_at)
        if unfinished is not None:
            raise unfinished
        if check.policy.quarantines:
            context["ti"].xcom_push(key=BAD_ROWS_XCOM_KEY, value=aside.to_xcom())
            (log.warning if aside.bad_rows else log.info)("%s: %s", file_path, aside.summary())
        if not report.ok:
            raise AirflowFailException(str(CsvValidationError(report.path, report.errors)))
        yield aside


def _expected_rows(
    file_path: Any, expectations: Any, report: CsvReport, sent: Source, context: Context, log: Any
) -> dict[int, RowVerdict]:
    """The rows a suite's row-wise expectations find unexpected in ``sent``; a failed aggregate fails the task.

    The suite's result on the rows the rules let through goes to XCom ``gx_result``, as without
    quarantine; an expectation on the whole (unique, a mean, the row count, the columns) that
    fails cannot be met by setting rows aside, and refuses the file.
    """
    from airflow_tables.expectations import ExpectationsError
    from airflow_tables.expectations.rows import unexpected_rows

    try:
        found = unexpected_rows(report, expectations, path=sent.local_path)
    except ExpectationsError as err:
        raise AirflowFailException(f"{file_path}: {err}") from None
    context["ti"].xcom_push(key="gx_result", value=found.outcome.result)
    log.info("%s", found.outcome.summary)
    if found.refused:
        raise AirflowFailException(f"{file_path}: {found.outcome.failure_message()}")
    return found.rows


def _still_being_written(file_path: Any, aside: SetAside, read_at: float) -> Exception | None:
    """The retryable error for a local file changed moments ago whose one problem is its last record, cut short.

    Cut short: the one bad row is the last record with fewer fields than the header, or a quote
    opened in the last record runs to the end of the file (which no row can be set aside for).
    """
    from airflow_tables.validation.rules import UNTERMINATED_QUOTE

    errors = aside.report.errors
    if aside.cut_short is not None and aside.bad_rows == 1:
        problem = aside.cut_short.problem()
        if any(p.code != "bad-rows" for p in errors):  # "fail" refuses the one bad row: nothing else may be wrong
            return None
    elif len(errors) == 1 and errors[0].code == UNTERMINATED_QUOTE.code and not aside.bad_rows:
        problem = errors[0]
    else:
        return None
    return unfinished(file_path, aside.report.path, problem, read_at)


#: How long before its reading a file with a cut last record may have changed and still count as being written.
UNFINISHED_WITHIN = 60.0


def unfinished(file_path: Any, label: str, problem: Any, read_at: float) -> Exception | None:
    """:func:`still_being_written` for a file whose only problem is ``problem``, a last record cut short (or None)."""
    from airflow_tables.exceptions import CsvUnfinishedError
    from airflow_tables.sources.storage import local_file_path

    path = local_file_path(file_path)
    if problem is None or path is None:
        return None
    try:
        age = read_at - os.stat(path).st_mtime
    except OSError:
        return None
    if age > UNFINISHED_WITHIN:
        return None
    return CsvUnfinishedError(label, problem, max(age, 0.0))
