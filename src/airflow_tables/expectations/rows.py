"""The rows a suite's row-wise expectations find unexpected: what ``on_bad_rows="quarantine"`` sets aside.

With a quarantine, a row that a row-wise expectation (:data:`.suite.ROW_WISE`) finds unexpected
is a bad row like a ragged one: set aside with the expectation's type as its code, while the
other rows are sent. What no single row answers for still refuses the file: an aggregate
(unique, a mean), the table's columns or row count, an expectation that could not be evaluated.

The suite is checked as :func:`.check` checks it: the same plan, reads and merged results, and
the same :class:`.Outcome` over every row of the file as given (for XCom ``gx_result`` and the
log). One thing differs: each chunk's row-wise results come in GX's ``COMPLETE`` format, whose
``unexpected_index_list`` names the unexpected rows by the chunk's index, which is the row's
position among the file's data rows (from 0; :meth:`.frames.ColumnReader.chunks`). So the rows
are GX's own verdicts, found on the one read the suite needs, and each chunk's lists are let go
once read: memory grows with the unexpected rows, not with the file.

A ``mostly`` lets an expectation pass with some unexpected rows; they are set aside all the same
(a row that breaks the expectation is a bad row, and ``max_bad_rows``/``max_bad_fraction`` say
how many of those a file may have).
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from numbers import Integral
from typing import TYPE_CHECKING, Any

from airflow_tables.expectations import Outcome, _check, _missing, _Part, _short
from airflow_tables.expectations._gx import import_gx
from airflow_tables.expectations.frames import system_allocator
from airflow_tables.expectations.merge import merge
from airflow_tables.expectations.suite import ROW_WISE, _named_columns
from airflow_tables.validation.drop_rows import RowVerdict

if TYPE_CHECKING:
    import pandas as pd
    from great_expectations.core import ExpectationValidationResult
    from great_expectations.core.batch_definition import BatchDefinition
    from great_expectations.expectations import Expectation

    from airflow_tables.expectations.frames import ColumnReader
    from airflow_tables.expectations.suite import Plan
    from airflow_tables.validation import CsvReport

__all__ = ["RowVerdict", "RowsOutcome", "unexpected_rows"]

log = logging.getLogger(__name__)

#: Every unexpected row of a chunk, by index; not the index query (a string naming them all again).
COMPLETE = {"result_format": "COMPLETE", "return_unexpected_index_query": False}
#: What ``COMPLETE`` adds to ``SUMMARY``: read once per chunk, then dropped.
_COMPLETE_ONLY = ("unexpected_list", "unexpected_index_list", "unexpected_index_query")


@dataclass
class RowsOutcome:
    """What the suite said about the file, and which of its rows a quarantine sets aside."""

    #: As :func:`.check` returns it, over every row of the file given.
    outcome: Outcome
    #: 0-based position among the file's data rows -> why that row is unexpected.
    rows: dict[int, RowVerdict] = field(default_factory=dict)
    #: An expectation failed that setting rows aside does not answer: the file is refused.
    refused: bool = False


def unexpected_rows(report: CsvReport, expectations: Any, path: str | None = None) -> RowsOutcome:
    """Check the file ``report`` describes against ``expectations``, finding the rows row-wise ones do not expect.

    Arguments as for :func:`.check` (``path``: the local UTF-8 file to read, when ``report.path``
    is not one), and the same :class:`.ExpectationsError` when the suite cannot be checked.
    """
    gx = import_gx()
    finder = _RowFinder()
    with system_allocator():
        outcome = _check(gx, report, expectations, path, validate_data=finder.validate_data)
    failed = outcome.result["statistics"]["unsuccessful_expectations"]
    if rows := len(finder.rows):
        codes = ", ".join(f"{code}: {n:,}" for code, n in Counter(v.code for v in finder.rows.values()).items())
        shown = f"{rows:,} row{'s' * (rows != 1)} of {report.path} {'is' if rows == 1 else 'are'}"
        log.info("%s unexpected by a row-wise expectation (%s)", shown, codes)
    return RowsOutcome(outcome, finder.rows, refused=failed > finder.answered)


class _RowFinder:
    """The data step of :func:`.check` that also notes each row-wise expectation's unexpected rows."""

    def __init__(self) -> None:
        self.rows: dict[int, RowVerdict] = {}
        #: How many failed expectations the rows set aside answer for (every unexpected row of theirs was found).
        self.answered = 0
        self.located: dict[int, int] = {}  # expectation id -> how many of its unexpected rows were found
        self.unlocated: set[int] = set()  # expectation ids with unexpected rows GX did not name
        self.heads: dict[int, str] = {}

    def validate_data(
        self,
        gx: Any,
        batches: BatchDefinition,
        reader: ColumnReader,
        steps: Plan,
        found: dict[int, ExpectationValidationResult],
    ) -> str:
        """Validate the data expectations over the file, into ``found``; return how the file was read."""
        row_wise = [e for e in steps.data if e.expectation_type in ROW_WISE]
        others = _Part(gx, [e for e in steps.data if e.expectation_type not in ROW_WISE], steps.suite.name)
        part = _Part(gx, row_wise, steps.suite.name)
        per: dict[int, list[ExpectationValidationResult]] = {id(e): [] for e in row_wise}
        columns = f"{len(steps.columns)} of {len(reader.report.columns)} columns"
        if not steps.row_wise:
            log.info(
                "Aggregates (%s): reading %s whole", ", ".join(sorted(set(steps.aggregates))), ", ".join(steps.columns)
            )
        chunks = 0
        for frame in reader.chunks() if steps.row_wise else iter([reader.whole()]):
            chunks += 1
            if others.expectations:
                found.update(others.validate(batches, frame))
            if row_wise:
                results = part.validate(batches, frame, COMPLETE)
                for expectation in row_wise:  # the suite's order: the first to find a row names it
                    per[id(expectation)].append(self._note(expectation, results[id(expectation)], frame))
            del frame  # before the next chunk is read
        for expectation in row_wise:
            merged = found[id(expectation)] = merge(per.pop(id(expectation)))
            self.answered += not merged.success and self._answers_for(expectation, merged)
        return (
            f" ({columns} read, in {chunks} chunk{'s' * (chunks != 1)})"
            if steps.row_wise
            else f" ({columns} read whole)"
        )

    def _note(
        self, expectation: Expectation, result: ExpectationValidationResult, frame: pd.DataFrame
    ) -> ExpectationValidationResult:
        """Note the rows of ``frame`` that ``result`` names unexpected; return it as ``SUMMARY`` would have it."""
        details = result.result or {}
        indexes = details.get("unexpected_index_list")
        for extra in _COMPLETE_ONLY:
            details.pop(extra, None)
        if not details.get("unexpected_count"):
            return result
        if not isinstance(indexes, list) or not all(isinstance(i, Integral) for i in indexes):
            self.unlocated.add(id(expectation))  # GX named them otherwise, or not at all: nothing to set aside
            return result
        key = id(expectation)
        self.located[key] = self.located.get(key, 0) + len(indexes)
        new = [i for i in indexes if i not in self.rows]
        if new:
            self._verdicts(expectation, frame, new)
        return result

    def _verdicts(self, expectation: Expectation, frame: pd.DataFrame, indexes: list[int]) -> None:
        """A verdict for each of ``indexes`` (rows of ``frame``), naming the values ``expectation`` read."""
        config = expectation.configuration
        named = [c for c in _named_columns(config.kwargs) if c in frame.columns]
        head = self.heads.get(id(expectation))
        if head is None:
            named_keys = {"column", "column_A", "column_B", "column_list", "batch_id"}
            args = ", ".join(f"{k}={v!r}" for k, v in config.kwargs.items() if k not in named_keys)
            head = self.heads[id(expectation)] = f"{config.type}({args})"
        values = [frame.loc[indexes, column].tolist() for column in named]
        for position, index in enumerate(indexes):
            shown = [_shown(column[position]) for column in values]
            if len(named) == 1:
                message = f"{shown[0]} in column {named[0]!r} breaks {head}"
            else:
                pairs = ", ".join(f"{c!r} = {v}" for c, v in zip(named, shown, strict=True))
                message = f"columns {pairs} break {head}"
            column = named[0] if len(named) == 1 else None
            self.rows[int(index)] = RowVerdict(config.type, message, column)

    def _answers_for(self, expectation: Expectation, merged: ExpectationValidationResult) -> bool:
        """Whether setting rows aside answers the failure of ``expectation``: it ran, and GX named every row."""
        if (merged.exception_info or {}).get("raised_exception") or id(expectation) in self.unlocated:
            return False
        return self.located.get(id(expectation), 0) == (merged.result or {}).get("unexpected_count")


def _shown(value: Any) -> str:
    return "a missing value" if _missing(value) else _short(value)
