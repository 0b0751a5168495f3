"""The suite a task was given, in any of the forms GX users write, and what it needs from the file.

Forms of ``expectations=``: an ``ExpectationSuite``; one ``Expectation`` or a list of them; a
suite dict; the path of a suite JSON file; or a callable ``configure_expectations(context)``
that takes the GX context and returns any of these (the shape of the official GX provider's
``configure_*`` callables).

The plan sorts the suite's expectations by what they need, so that no more of the file is
held in memory than the suite asks for:

* **header**: the table's shape (its columns, their count, whether one exists), answered
  from the header alone;
* **rows**: the row count, answered from the scan's count;
* **data**: the rest, which need the values of the columns they name. When every one of them
  is a row-wise (column-map) expectation from :data:`ROW_WISE`, the file is validated in
  chunks; otherwise the columns they name are read whole.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

from airflow_tables.expectations._gx import ExpectationsError

if TYPE_CHECKING:
    from great_expectations import ExpectationSuite
    from great_expectations.data_context import AbstractDataContext
    from great_expectations.expectations import Expectation

#: Expectations that ask a yes/no question of each row on its own (GX's column-map, column-pair-map
#: and multicolumn-map expectations, minus those whose answer for a row depends on other rows:
#: unique, increasing, z-scores, outliers). Their results over chunks add up to the result over
#: the whole file. Anything not listed here (custom expectations too) is validated on a whole read.
ROW_WISE = frozenset(
    {
        "expect_column_values_to_not_be_null",
        "expect_column_values_to_be_null",
        "expect_column_values_to_be_between",
        "expect_column_values_to_be_in_set",
        "expect_column_values_to_not_be_in_set",
        "expect_column_values_to_match_regex",
        "expect_column_values_to_not_match_regex",
        "expect_column_values_to_match_regex_list",
        "expect_column_values_to_not_match_regex_list",
        "expect_column_values_to_match_strftime_format",
        "expect_column_values_to_be_dateutil_parseable",
        "expect_column_values_to_be_json_parseable",
        "expect_column_values_to_match_json_schema",
        "expect_column_value_lengths_to_be_between",
        "expect_column_value_lengths_to_equal",
        "expect_column_pair_values_to_be_equal",
        "expect_column_pair_values_a_to_be_greater_than_b",
        "expect_column_pair_values_to_be_in_set",
        "expect_multicolumn_sum_to_equal",
        "expect_multicolumn_values_to_be_equal",
        "expect_select_column_values_to_be_unique_within_record",
    }
)
#: Expectations about the table's columns, not their values: the header answers them.
HEADER = frozenset(
    {
        "expect_column_to_exist",
        "expect_table_columns_to_match_ordered_list",
        "expect_table_columns_to_match_set",
        "expect_table_column_count_to_equal",
        "expect_table_column_count_to_be_between",
    }
)
#: Expectations about the number of rows: the scan has counted them.
ROWS = frozenset({"expect_table_row_count_to_equal", "expect_table_row_count_to_be_between"})
_COLUMN_KWARGS = ("column", "column_A", "column_B")

FORMS = (
    "an ExpectationSuite, an Expectation or a list of them, a suite dict, the path of a suite JSON file, "
    "or a callable configure_expectations(context) returning one of these"
)


def load_suite(expectations: Any, gx: ModuleType, context: AbstractDataContext) -> ExpectationSuite:
    """The ``ExpectationSuite`` that ``expectations`` stands for (see the module's docstring for the forms)."""
    if callable(expectations) and not isinstance(expectations, (gx.ExpectationSuite, gx.expectations.Expectation)):
        name = getattr(expectations, "__name__", "configure_expectations")
        return _to_suite(expectations(context), gx, default_name=name, source=f"{name}(context)")
    return _to_suite(expectations, gx, default_name="expectations", source="expectations=")


def _to_suite(value: Any, gx: ModuleType, *, default_name: str, source: str) -> ExpectationSuite:
    if isinstance(value, gx.ExpectationSuite):
        return value
    if isinstance(value, gx.expectations.Expectation):
        value = [value]
    if isinstance(value, (list, tuple)) and value and all(isinstance(e, gx.expectations.Expectation) for e in value):
        return gx.ExpectationSuite(name=default_name, expectations=list(value))
    if isinstance(value, (str, os.PathLike)):
        value = _read_json(os.fspath(value))
    if isinstance(value, dict):
        return _from_dict(value, gx, source)
    raise ExpectationsError(f"{source} gave {type(value).__name__}; expectations must be {FORMS}")


def _from_dict(value: dict, gx: ModuleType, source: str) -> ExpectationSuite:
    """A suite from its dict, refusing any expectation GX cannot build (GX itself would log and drop it)."""
    from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

    built = []
    for number, item in enumerate(value.get("expectations") or [], start=1):
        try:
            built.append(ExpectationConfiguration(**item).to_domain_obj())
        except Exception as err:  # GX raises its own, pydantic's and TypeError for a bad expectation
            kind = item.get("type") if isinstance(item, dict) else None
            raise ExpectationsError(
                f"{source}: expectation {number} ({kind or 'no type'}) is not a valid Great Expectations "
                f"expectation: {err}"
            ) from None
    try:
        return gx.ExpectationSuite(**{**value, "expectations": built})
    except Exception as err:  # a missing name, an unknown key
        raise ExpectationsError(f"{source} is not a valid Great Expectations suite: {err}") from None


def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as err:
        raise ExpectationsError(f"cannot read the suite file {path}: {err.strerror or err}") from None
    except json.JSONDecodeError as err:
        raise ExpectationsError(f"the suite file {path} is not JSON: {err}") from None


@dataclass
class Plan:
    """The suite's expectations sorted by what they need from the file (see the module's docstring)."""

    suite: ExpectationSuite
    header: list[Expectation] = field(default_factory=list)
    rows: list[Expectation] = field(default_factory=list)
    data: list[Expectation] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)  # the columns ``data`` reads, in the file's order

    @property
    def row_wise(self) -> bool:
        """Whether the data expectations can be validated chunk by chunk."""
        return all(e.expectation_type in ROW_WISE for e in self.data)

    @property
    def aggregates(self) -> list[str]:
        """The data expectations that need whole columns, for the log."""
        return [e.expectation_type for e in self.data if e.expectation_type not in ROW_WISE]


def plan(suite: ExpectationSuite, file_columns: Sequence[str], file_name: str) -> Plan:
    """Sort ``suite``'s expectations and list the columns they read.

    Raises :class:`ExpectationsError` naming every column the suite reads that the file
    does not have (with the file's columns, as the service names them), since GX would
    only say "column not found" one expectation at a time.
    """
    result = Plan(suite)
    wanted: set[str] = set()
    missing: list[str] = []
    for expectation in suite.expectations:
        kwargs = expectation.configuration.kwargs
        kind = expectation.expectation_type
        if kwargs.get("row_condition") is None and kind in HEADER:
            result.header.append(expectation)
            continue
        if kwargs.get("row_condition") is None and kind in ROWS:
            result.rows.append(expectation)
            continue
        result.data.append(expectation)
        for column in _named_columns(kwargs):
            if column in file_columns:
                wanted.add(column)
            else:
                missing.append(f"{column!r} ({kind})")
        wanted.update(_condition_columns(kwargs.get("row_condition"), file_columns))
    if missing:
        raise ExpectationsError(
            f"the suite {suite.name!r} reads column{'s' if len(missing) > 1 else ''} {', '.join(missing)} that "
            f"{file_name} does not have; its columns, as the service names them: {', '.join(file_columns)}"
        )
    result.columns = [c for c in file_columns if c in wanted]
    return result


def _named_columns(kwargs: dict) -> list[str]:
    columns = [kwargs[k] for k in _COLUMN_KWARGS if isinstance(kwargs.get(k), str)]
    listed = kwargs.get("column_list")
    if isinstance(listed, (list, tuple)):
        columns.extend(c for c in listed if isinstance(c, str))
    return columns


def _condition_columns(condition: Any, file_columns: Sequence[str]) -> list[str]:
    """The file's columns a row condition may use: every one whose name appears in it.

    Conditions come as pandas query strings or GX condition objects; reading a column too
    many costs a little memory, missing one would make GX fail, so the match is generous.
    """
    if condition is None:
        return []
    text = json.dumps(condition, default=str)
    return [c for c in file_columns if c in text]
