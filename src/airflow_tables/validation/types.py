"""The service's rule for a column's ``DataType``: ``long`` or ``string``, in one place.

The emulator's reader types the columns of a table with it (``emulator/profile.py``), and
the expectations step of the import operators reads a file's columns with it, so that a
suite checks the values the table will hold (``expect_column_values_to_be_between`` on a
``long`` column compares numbers, as the table will). Standard library only, like
:mod:`airflow_tables.validation.rules`: the emulator must not import the provider's code.

The interface document names the two types it has seen and not the rule; ours
(see ``docs/emulator.md``):

* the type is decided on a bounded sample: the first :data:`SAMPLE_ROWS` rows, or fewer
  for a wide table (at most :data:`SAMPLE_VALUES` values in all);
* a column is ``long`` when every non-blank value in the sample is an integer literal
  (optional sign, ASCII digits; surrounding whitespace ignored) that fits in 64 bits, and
  at least one value is not blank; otherwise it is ``string``;
* a blank is a value that is empty or only whitespace.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

LONG = "long"
STRING = "string"
SAMPLE_ROWS = 25_000
SAMPLE_VALUES = 250_000
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


def sample_rows(columns: int) -> int:
    """How many rows of a table with ``columns`` columns its types are decided on."""
    return min(SAMPLE_ROWS, max(1, SAMPLE_VALUES // max(columns, 1)))


def is_int_literal(value: str) -> bool:
    """Whether a stripped, non-blank value is an optional sign followed by ASCII digits."""
    digits = value[1:] if value[0] in "+-" else value
    return digits.isascii() and digits.isdigit()


def long_range(stripped: Sequence[str]) -> tuple[int, int] | None:
    """The smallest and largest of the non-blank stripped values if all of them are longs, else None.

    Also None when every value is blank (nothing says the column holds numbers). The
    common case, digits only, is checked on the joined values in one C-level call.
    """
    joined = "".join(stripped)
    if not joined:
        return None
    if not (joined.isascii() and joined.isdigit()) and not all(is_int_literal(v) for v in stripped if v):
        return None
    try:
        numbers = list(map(int, filter(None, stripped)))
    except ValueError:  # more digits than int() accepts: not a long anyway
        return None
    lo, hi = min(numbers), max(numbers)
    if lo < LONG_MIN or hi > LONG_MAX:
        return None
    return lo, hi


def parse_long(value: str) -> int | None:
    """The value as the table's ``long`` holds it; None for a blank or a value that is not a long."""
    stripped = value.strip()
    if not stripped or not is_int_literal(stripped):
        return None
    number = int(stripped)
    return number if LONG_MIN <= number <= LONG_MAX else None


def column_type(sample: Iterable[str]) -> str:
    """``long`` or ``string`` for a column, from its values in the sample (see :func:`sample_rows`)."""
    return LONG if long_range([v.strip() for v in sample]) is not None else STRING
