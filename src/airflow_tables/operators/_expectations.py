"""Run a Great Expectations suite on a CSV before it is uploaded.

Great Expectations takes about 3 s and 230 MiB to import, so it is imported here, only
when a task asks for a suite, never when a DAG file is parsed.
"""

from __future__ import annotations

import json
import logging
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_tables.validation import CsvReport

log = logging.getLogger(__name__)


class ExpectationsFailed(Exception):
    """The data broke the suite; the message lists each failed expectation."""


def load_suite(expectations: Any):
    """An ``ExpectationSuite`` from a suite object, a dict or the path of a suite JSON file."""
    import great_expectations as gx

    if isinstance(expectations, gx.ExpectationSuite):
        return expectations
    if isinstance(expectations, (str, os.PathLike)):
        with open(expectations, encoding="utf-8") as f:
            expectations = json.load(f)
    if isinstance(expectations, dict):
        return gx.ExpectationSuite(**expectations)
    raise TypeError(
        f"expectations must be an ExpectationSuite, a suite dict or a path to a suite JSON file, "
        f"not {type(expectations).__name__}"
    )


def check(report: CsvReport, expectations: Any, path: str | None = None) -> str:
    """Validate the file described by ``report`` against the suite; return a summary or raise.

    Columns carry the names the service will give them (``report.columns``), so a suite
    is written against the table as it will appear. ``path`` is the local UTF-8 file to
    read when ``report.path`` is not one (an object in storage, a converted file).
    """
    import great_expectations as gx
    import pandas as pd

    suite = load_suite(expectations)
    frame = pd.read_csv(path or report.path, sep=report.delimiter, header=0, names=report.columns, encoding="utf-8-sig")
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = {"globally": False}
    batch = (
        context.data_sources.add_pandas("airflow_tables")
        .add_dataframe_asset("upload")
        .add_batch_definition_whole_dataframe("whole_file")
        .get_batch(batch_parameters={"dataframe": frame})
    )
    result = batch.validate(suite)
    stats = result.statistics
    summary = (
        f"expectations {suite.name!r}: {stats['successful_expectations']} of "
        f"{stats['evaluated_expectations']} met on {len(frame):,} rows"
    )
    failed = [r for r in result.results if not r.success]
    for r in result.results:
        kwargs = {k: v for k, v in r.expectation_config.kwargs.items() if k != "batch_id"}
        detail = r.result.get("unexpected_count")
        log.info(
            "%s %s%s%s",
            "PASS" if r.success else "FAIL",
            r.expectation_config.type,
            kwargs,
            f" ({detail} unexpected)" if detail else "",
        )
    if failed:
        lines = "; ".join(
            f"{r.expectation_config.type}"
            f"({', '.join(f'{k}={v!r}' for k, v in r.expectation_config.kwargs.items() if k != 'batch_id')})"
            + (f": {r.result.get('unexpected_count')} unexpected" if r.result.get("unexpected_count") else "")
            for r in failed
        )
        raise ExpectationsFailed(f"{summary}; failed: {lines}. Nothing was uploaded.")
    return summary
