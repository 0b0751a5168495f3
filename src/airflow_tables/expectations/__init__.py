"""Check a CSV against a Great Expectations suite before it is uploaded, in memory that does not grow with it.

The import and replace operators call :func:`check` after the file is validated and before
any request, so data that breaks the suite costs no credit. How the file is read:

* only the columns the suite's expectations name, typed as the service will type them
  (:mod:`.frames`: ``long`` columns as integers, the rest as text), under the names the
  service gives them;
* when every expectation that reads values is row-wise (:data:`.suite.ROW_WISE`), chunk by
  chunk, with each expectation's results merged over the chunks (:mod:`.merge`), so memory
  stays bounded whatever the file's size; otherwise (unique, mean, ... anything else) the
  named columns are read whole;
* questions about the table's shape (its columns, its row count) are answered from the
  header and the scan, without reading values.

GX itself is imported here, when a task has a suite, never when a DAG file is parsed.
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_tables.expectations._gx import (
    ExpectationsError,
    dataframe_batches,
    ephemeral_context,
    import_gx,
)
from airflow_tables.expectations.frames import ColumnReader, system_allocator
from airflow_tables.expectations.merge import flat_exception, merge, paired, suite_result
from airflow_tables.expectations.suite import Plan, load_suite, plan

if TYPE_CHECKING:
    import pandas as pd
    from great_expectations.core import ExpectationValidationResult
    from great_expectations.core.batch_definition import BatchDefinition
    from great_expectations.core.result_format import ResultFormatUnion
    from great_expectations.expectations import Expectation

    from airflow_tables.validation import CsvReport

__all__ = ["ExpectationsError", "Outcome", "check"]

log = logging.getLogger(__name__)

#: How many unexpected values a failure message shows per expectation.
SHOWN = 5


@dataclass
class Outcome:
    """What the suite said about the file."""

    success: bool
    #: ``ExpectationSuiteValidationResult.describe_dict()``: JSON-able, for XCom
    result: dict
    #: one line for the task log
    summary: str
    #: every failed expectation with its unexpected count and a few of the values (empty on success)
    failures: list[str]

    def failure_message(self) -> str:
        return f"{self.summary}; nothing was uploaded. Failed:\n" + "\n".join(f"- {f}" for f in self.failures)


def check(report: CsvReport, expectations: Any, path: str | None = None) -> Outcome:
    """Validate the file ``report`` describes against ``expectations``, in any form :func:`.suite.load_suite` takes.

    ``path`` is the local UTF-8 file to read when ``report.path`` is not one (an object in
    storage, a file in a declared encoding: the operators' staged copy). Raises
    :class:`ExpectationsError` when the suite cannot be checked at all (GX not installed,
    a malformed suite, a column the file does not have).
    """
    gx = import_gx()
    with system_allocator():
        return _check(gx, report, expectations, path)


def _check(
    gx: Any, report: CsvReport, expectations: Any, path: str | None, validate_data: Callable[..., str] | None = None
) -> Outcome:
    """:func:`check`, once GX is imported: the suite's plan, the reads it needs, the result.

    ``validate_data`` stands in for :func:`_validate_data` (same arguments, same duty: each data
    expectation's result over the file into ``found``, and the summary's words on how it was read):
    :func:`.rows.unexpected_rows` finds the unexpected rows on the way.
    """
    context = ephemeral_context(gx)
    suite = load_suite(expectations, gx, context)
    name = os.path.basename(report.path)
    steps = plan(suite, report.columns, name)
    reader = ColumnReader(report, steps.columns, path)
    batches = dataframe_batches(context, name)
    found: dict[int, ExpectationValidationResult] = {}
    if steps.columns:
        types = reader.sniff_types()
        log.info(
            "Columns the suite reads, typed as the service will: %s", ", ".join(f"{c} ({t})" for c, t in types.items())
        )
    if steps.header:
        found.update(_validate(gx, batches, reader.header(), steps.header, suite.name))
    if steps.rows:
        found.update(_validate(gx, batches, ColumnReader(report, [], path).whole(), steps.rows, suite.name))
    how = ""
    if steps.data:
        how = (validate_data or _validate_data)(gx, batches, reader, steps, found)
    for column, (count, samples) in reader.not_long.items():
        log.warning(
            "%s: column %s is a long column (as the service types it, from its first rows), but %s later value%s "
            "not whole numbers; the table will not hold them as numbers, so the suite sees them as missing: %s",
            name,
            column,
            f"{count:,}",
            " is" if count == 1 else "s are",
            ", ".join(repr(s) for s in samples),
        )
    result = suite_result(suite.name, [found[id(e)] for e in suite.expectations])
    stats = result.statistics
    summary = (
        f"expectations {suite.name!r}: {stats['successful_expectations']} of {stats['evaluated_expectations']} "
        f"met on {report.rows:,} rows of {name}{how}"
    )
    for r in result.results:
        log.info("%s %s", "PASS" if r.success else "FAIL", describe(r))
    return Outcome(
        success=bool(result.success),
        result=result.describe_dict(),
        summary=summary,
        failures=[describe(r) for r in result.results if not r.success],
    )


def _validate_data(
    gx: Any, batches: BatchDefinition, reader: ColumnReader, steps: Plan, found: dict[int, ExpectationValidationResult]
) -> str:
    """Validate the expectations that read values, in chunks or on a whole read; say which for the summary."""
    columns = f"{len(steps.columns)} of {len(reader.report.columns)} columns"
    if steps.row_wise:
        per: dict[int, list[ExpectationValidationResult]] = {id(e): [] for e in steps.data}
        part = _Part(gx, steps.data, steps.suite.name)
        chunks = 0
        for frame in reader.chunks():
            chunks += 1
            for key, chunk_result in part.validate(batches, frame).items():
                per[key].append(chunk_result)
            del frame  # before the next chunk is read
        found.update({key: merge(results) for key, results in per.items()})
        return f" ({columns} read, in {chunks} chunk{'s' if chunks != 1 else ''})"
    log.info(
        "The suite has expectations that need whole columns (%s): reading %s whole",
        ", ".join(sorted(set(steps.aggregates))),
        ", ".join(steps.columns) or "no column",
    )
    found.update(_validate(gx, batches, reader.whole(), steps.data, steps.suite.name))
    return f" ({columns} read whole)"


def _validate(
    gx: Any, batches: BatchDefinition, frame: pd.DataFrame, expectations: list[Expectation], name: str
) -> dict[int, ExpectationValidationResult]:
    """Each expectation's result on ``frame``, keyed by the expectation's ``id()``."""
    return _Part(gx, expectations, name).validate(batches, frame)


class _Part:
    """Some of a suite's expectations, validated together on one frame after another."""

    def __init__(self, gx: Any, expectations: list[Expectation], name: str) -> None:
        self.expectations = expectations
        # Copies: an expectation belongs to one suite only (the user's may be registered in the context).
        self.suite = gx.ExpectationSuite(name=name, expectations=[copy.copy(e) for e in expectations])

    def validate(
        self, batches: BatchDefinition, frame: pd.DataFrame, result_format: ResultFormatUnion = "SUMMARY"
    ) -> dict[int, ExpectationValidationResult]:
        result = batches.get_batch(batch_parameters={"dataframe": frame}).validate(
            self.suite, result_format=result_format
        )
        return {id(e): flat_exception(r) for e, r in paired(self.expectations, result.results)}


def describe(result: ExpectationValidationResult) -> str:
    """``expect_x(column='a', ...): 3 of 10 unexpected (30.0%), e.g. -1, -2``: one expectation's outcome."""
    config = result.expectation_config
    kwargs = ", ".join(f"{k}={v!r}" for k, v in (config.kwargs if config else {}).items() if k != "batch_id")
    head = f"{config.type if config else 'expectation'}({kwargs})"
    info = result.exception_info or {}
    if info.get("raised_exception"):
        return f"{head}: could not be evaluated: {info.get('exception_message')}"
    details = result.result or {}
    if details.get("unexpected_count") is not None:
        count = details["unexpected_count"]
        considered = details["element_count"] - details.get("missing_count", 0)
        if not count:
            return f"{head}: no unexpected value in {considered:,}"
        percent = details.get("unexpected_percent")
        share = f" ({percent:.1f}%)" if percent is not None else ""
        shown = _distinct(details.get("partial_unexpected_list") or [])
        examples = f", e.g. {', '.join(_short(v) for v in shown)}" if shown else ""
        return f"{head}: {count:,} of {considered:,} unexpected{share}{examples}"
    if "observed_value" in details:
        return f"{head}: observed {_short(details['observed_value'])}"
    return head


def _distinct(values: list) -> list:
    shown: list = []
    for value in values:
        if not _missing(value) and value not in shown:
            shown.append(value)
            if len(shown) == SHOWN:
                break
    return shown


def _missing(value: Any) -> bool:
    """Whether a value is None, NaN or pandas' NA (what "not null" expectations list as unexpected)."""
    if value is None:
        return True
    try:
        return bool(value != value)
    except TypeError:  # pandas' NA answers NA, which has no truth value
        return True


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
