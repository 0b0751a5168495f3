"""One row-wise expectation's results over consecutive chunks, merged into its result over the whole file.

GX reports a column-map expectation (``SUMMARY`` format) as counts and the first unexpected
values; over consecutive chunks the counts add up and the first values of the file are the
first values of the first chunks, so the merged result is what GX reports on the whole file
(``tests/expectations/test_chunked.py`` holds it to that). The fields are computed
as GX computes them (``_format_map_output`` and ``_mostly_success`` in
``great_expectations.expectations.expectation``); success is recomputed from the totals,
honouring ``mostly``.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from great_expectations.core import ExpectationSuiteValidationResult, ExpectationValidationResult
    from great_expectations.expectations import Expectation
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

#: GX's SUMMARY format keeps this many unexpected values and row numbers (``partial_unexpected_count``).
PARTIAL = 20


def flat_exception(result: ExpectationValidationResult) -> ExpectationValidationResult:
    """``result``, with the error in GX's documented form when the expectation raised instead of failing.

    GX 1.x reports an expectation whose metric raised (a regex that does not compile, an argument
    the backend refuses) with an empty ``result`` and ``exception_info`` keyed by the metric's id
    (``{"MetricConfigurationID(...)": {"raised_exception": True, ...}}``); its own ``describe_dict``
    then leaves the error out, and merging chunks found no counts to add. The flat form
    (``raised_exception``, ``exception_message``, ``exception_traceback``) is the one GX describes
    and documents; the first metric that raised is the one reported, and the result is a failure.
    """
    info = result.exception_info or {}
    if "raised_exception" in info:  # already flat
        return result
    raised = next((v for v in info.values() if isinstance(v, dict) and v.get("raised_exception")), None)
    if raised is not None:
        result.exception_info = {
            "raised_exception": True,
            "exception_message": raised.get("exception_message"),
            "exception_traceback": raised.get("exception_traceback"),
        }
        result.success = False
    return result


def paired(
    expectations: list[Expectation], results: list[ExpectationValidationResult]
) -> list[tuple[Expectation, ExpectationValidationResult]]:
    """Each of ``expectations`` with its result among ``results``, one validation's, matched by configuration.

    GX does not return results in the suite's order: those whose metric raised come first, the
    rest grouped by domain. Chunk by chunk the order then changes where a metric raises on one
    chunk only, and results paired by position would be merged across different expectations.
    Identical expectations have identical results; they are paired in order.
    """
    waiting: dict[str, list[Expectation]] = {}
    for expectation in expectations:
        waiting.setdefault(_identity(expectation.configuration), []).append(expectation)
    pairs = []
    for result in results:
        same = waiting.get(_identity(result.expectation_config)) if result.expectation_config else None
        if not same:
            raise AssertionError(
                f"GX returned a result for an expectation it was not given: {result.expectation_config}"
            )
        pairs.append((same.pop(0), result))
    if len(pairs) != len(expectations):
        raise AssertionError(f"GX returned {len(pairs)} results for {len(expectations)} expectations")
    return pairs


def _identity(config: ExpectationConfiguration) -> str:
    """An expectation's type and arguments as text: what its result repeats of it.

    Not the batch GX names in a result's arguments, nor what a suite a context holds adds to
    its own expectations (an ``id``, ``meta``, ``notes``), which the results do not all carry.
    """
    described = config.to_json_dict()
    kwargs = described.get("kwargs")
    arguments = {k: v for k, v in kwargs.items() if k != "batch_id"} if isinstance(kwargs, dict) else kwargs
    return json.dumps({"type": described.get("type"), "kwargs": arguments}, sort_keys=True, default=str)


def merge(chunks: list[ExpectationValidationResult]) -> ExpectationValidationResult:
    """The result over the whole file of one expectation validated chunk by chunk, in file order."""
    from great_expectations.core import ExpectationValidationResult

    failed = next((r for r in map(flat_exception, chunks) if r.exception_info.get("raised_exception")), None)
    if failed is not None:  # the expectation could not run on these values: say why, as GX would
        return failed
    first = chunks[0]
    parts = [r.result for r in chunks]
    total = sum(p["element_count"] for p in parts)
    unexpected = sum(p["unexpected_count"] for p in parts)
    # Expectations about nulls themselves report no missing count: every row is considered.
    missing = sum(p["missing_count"] for p in parts) if all("missing_count" in p for p in parts) else None
    considered = total if missing is None else total - missing
    mostly = first.expectation_config.kwargs.get("mostly", 1) if first.expectation_config else 1
    success = considered == 0 or (float(considered) - float(unexpected)) / float(considered) >= mostly
    values = _first(parts, "partial_unexpected_list")
    result: dict[str, Any] = {
        "element_count": total,
        "unexpected_count": unexpected,
        "unexpected_percent": _percent(unexpected, considered if total else 0),
        "partial_unexpected_list": values,
    }
    if missing is not None:
        result.update(
            missing_count=missing,
            missing_percent=_percent(missing, total),
            unexpected_percent_total=_percent(unexpected, total),
            unexpected_percent_nonmissing=_percent(unexpected, considered if total else 0),
        )
    counts = _counts(values)
    if counts is not None:
        result["partial_unexpected_counts"] = counts
    result["partial_unexpected_index_list"] = _first(parts, "partial_unexpected_index_list")
    return ExpectationValidationResult(
        success=success,
        expectation_config=first.expectation_config,
        result=result,
        meta=first.meta,
        exception_info=first.exception_info,
    )


def suite_result(
    name: str, results: list[ExpectationValidationResult], meta: dict | None = None
) -> ExpectationSuiteValidationResult:
    """A suite's result from its expectations' results, with GX's statistics."""
    from great_expectations.core import ExpectationSuiteValidationResult

    successful = sum(1 for r in results if r.success)
    return ExpectationSuiteValidationResult(
        success=successful == len(results),
        results=results,
        suite_name=name,
        statistics={
            "evaluated_expectations": len(results),
            "successful_expectations": successful,
            "unsuccessful_expectations": len(results) - successful,
            "success_percent": successful / len(results) * 100 if results else None,
        },
        meta=meta,
    )


def _percent(part: int, whole: int) -> float | None:
    return part / whole * 100 if whole > 0 else None


def _first(parts: list[dict], key: str) -> list:
    """The first :data:`PARTIAL` entries of ``key`` over the chunks, in order."""
    kept: list = []
    for part in parts:
        if len(kept) >= PARTIAL:
            break
        kept.extend(part.get(key) or [])
    return kept[:PARTIAL]


def _counts(values: list) -> list[dict] | None:
    """How often each kept unexpected value occurs among them, most frequent first; None where GX lists none.

    Multicolumn expectations report a row as a dict, which GX counts as the tuple of its
    values; values GX cannot count (column pairs come as lists) get no counts at all.
    """
    hashable = [tuple(v.values()) if isinstance(v, dict) else v for v in values]
    try:
        common = Counter(hashable).most_common(PARTIAL)
        return [{"value": value, "count": count} for value, count in sorted(common, key=lambda kv: (-kv[1], kv[0]))]
    except TypeError:
        return None
