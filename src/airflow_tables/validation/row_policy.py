"""What a task asks of a file's rows: ``on_bad_rows`` with its thresholds, and ``column_types``.

Values checked when a DAG is parsed, so this module imports nothing heavy (the standard
library and :mod:`.types`); the rows are judged by :mod:`.bad_rows`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from airflow_tables.validation import types

ON_BAD_ROWS = ("fail", "quarantine")


@dataclass(frozen=True)
class BadRowPolicy:
    """``on_bad_rows`` with its thresholds: what a file's bad rows decide.

    With ``"quarantine"``, ``max_bad_rows`` (a count) and ``max_bad_fraction`` (of the data rows)
    refuse the file when either is exceeded; with neither, any number is set aside, but a file
    with no good row left is refused all the same (a table of nothing is never what was meant).
    """

    on_bad_rows: str = "fail"
    max_bad_rows: int | None = None
    max_bad_fraction: float | None = None

    def __post_init__(self) -> None:
        if self.on_bad_rows not in ON_BAD_ROWS:
            raise ValueError(f"on_bad_rows must be 'fail' or 'quarantine', not {self.on_bad_rows!r}")
        if self.max_bad_rows is not None and (
            isinstance(self.max_bad_rows, bool) or not isinstance(self.max_bad_rows, int) or self.max_bad_rows < 0
        ):
            raise ValueError(f"max_bad_rows must be a whole number >= 0 or None, not {self.max_bad_rows!r}")
        fraction = self.max_bad_fraction
        if fraction is not None and (
            isinstance(fraction, bool)
            or not isinstance(fraction, (int, float))
            or not math.isfinite(fraction)
            or not 0 <= fraction <= 1
        ):
            raise ValueError(f"max_bad_fraction must be a number from 0 to 1 or None, not {fraction!r}")
        if self.on_bad_rows == "fail" and (self.max_bad_rows is not None or fraction is not None):
            raise ValueError("max_bad_rows and max_bad_fraction need on_bad_rows='quarantine'")

    @property
    def quarantines(self) -> bool:
        return self.on_bad_rows == "quarantine"

    def exceeded(self, rows: int, bad: int) -> str | None:
        """The threshold ``bad`` of ``rows`` data rows exceeds, for a person (``max_bad_rows=10``); None if none."""
        over = []
        if self.max_bad_rows is not None and bad > self.max_bad_rows:
            over.append(f"max_bad_rows={self.max_bad_rows:,}")
        if self.max_bad_fraction is not None and rows and bad / rows > self.max_bad_fraction:
            over.append(f"max_bad_fraction={self.max_bad_fraction:g}")
        return " and ".join(over) or None

    def to_json(self) -> dict[str, object]:
        return {
            "on_bad_rows": self.on_bad_rows,
            "max_bad_rows": self.max_bad_rows,
            "max_bad_fraction": self.max_bad_fraction,
        }


def check_declared_types(declared: object) -> dict[str, str] | None:
    """``column_types`` as given to an operator: a dict of column name to ``"long"``/``"string"``; else ValueError."""
    if declared is None:
        return None
    if not isinstance(declared, dict) or not all(isinstance(k, str) for k in declared):
        raise ValueError(f"column_types must be a dict of column name to 'long' or 'string', not {declared!r}")
    wrong = {k: v for k, v in declared.items() if v not in (types.LONG, types.STRING)}
    if wrong:
        raise ValueError(f"column_types takes 'long' or 'string' for each column, not {wrong!r}")
    return dict(declared)
