"""The service's rule for a column's ``DataType``: ``long`` or ``string``, in one place.

The validator's scan types every column with it when asked (``validate_csv(...,
column_types=True)``: in the same single pass as validation, by the C kernel
``_speedups.c`` or :mod:`.kernels`/:mod:`.ranges` in Python), the emulator's reader types
a table's columns from that very scan (``emulator/profile.py``), and the expectations
step of the import operators reads a file's values with :func:`parse_long`. Standard
library only, like :mod:`airflow_tables.validation.rules`: the emulator must not import
the provider's code.

The interface document names the two types it has seen (``long`` and ``string``) and
not the rule, so ours is the narrowest reading, decided on the **whole file** (not a
sample: a table typed ``long`` from its first rows and holding text further down would
make a schema check pass that the service fails):

* a *value* is a field as the service reads it (quotes removed, ``""`` read as ``"``);
* it is *blank* when it is empty or only ASCII whitespace (:data:`WHITESPACE`: space,
  tab, CR, LF, vertical tab, form feed; nothing else, no Unicode spaces);
* it is a *long* when, with that whitespace trimmed from both ends, it is an optional
  ``+`` or ``-`` followed by ASCII digits only (leading zeros allowed: ``007``, ``+5``,
  `` 7 `` and ``-0`` are longs; ``1_000``, ``1e3``, ``5.0``, ``0x1F``, ``٣`` are not), whose
  value lies in ``[-2**63, 2**63 - 1]`` (``9223372036854775807`` is a long,
  ``9223372036854775808`` is not);
* a column is ``long`` when every non-blank value in it is a long and at least one
  value is not blank; otherwise (no value, or one value that is not a long) ``string``.

Kernels keep one state per column, :data:`UNSEEN` < :data:`SEEN_LONG` < :data:`NOT_LONG`,
and a value's kind (:func:`value_kind`: :data:`BLANK`, :data:`A_LONG`, :data:`NOT_A_LONG`)
uses the same numbers, so folding a value into a column is ``max(state, kind)``, and two
halves of a file merge by ``max`` too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

LONG = "long"
STRING = "string"
SAMPLE_ROWS = 25_000
SAMPLE_VALUES = 250_000
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
#: The whitespace trimmed from a value before it is typed (ASCII only; the C kernel uses the same set).
WHITESPACE = " \t\n\r\x0b\x0c"
#: A value's kind, and a column's state (the largest kind seen in it).
BLANK = UNSEEN = 0
A_LONG = SEEN_LONG = 1
NOT_A_LONG = NOT_LONG = 2
_MAX_DIGITS = len(str(LONG_MAX))  # 19: past it (leading zeros aside) a value cannot fit


def sample_rows(columns: int) -> int:
    """How many rows of a table with ``columns`` columns the expectations step reads values from."""
    return min(SAMPLE_ROWS, max(1, SAMPLE_VALUES // max(columns, 1)))


def strip(value: str) -> str:
    """``value`` without the whitespace the rule ignores at its ends (:data:`WHITESPACE`)."""
    return value.strip(WHITESPACE)


def is_int_literal(value: str) -> bool:
    """Whether a stripped, non-blank value is an optional sign followed by ASCII digits."""
    digits = value[1:] if value[0] in "+-" else value
    return digits.isascii() and digits.isdigit()


def _fits(stripped: str) -> bool:
    """Whether an integer literal's value lies in 64 bits (checked before ``int()``, which refuses huge literals)."""
    significant = stripped.lstrip("+-").lstrip("0")
    return len(significant) <= _MAX_DIGITS and LONG_MIN <= int(stripped) <= LONG_MAX


def value_kind(value: str) -> int:
    """:data:`BLANK`, :data:`A_LONG` or :data:`NOT_A_LONG`, for one value as the service reads it."""
    stripped = strip(value)
    if not stripped:
        return BLANK
    return A_LONG if is_int_literal(stripped) and _fits(stripped) else NOT_A_LONG


def fold(state: int, values: Sequence[str]) -> int:
    """A column's state after ``values`` (a batch of its values): ``max(state, kind of each value)``.

    The common cases are C-level calls on the whole batch: digits only (joined, then
    their lengths), or a first value that is not a long.
    """
    if state == NOT_LONG or not values:
        return state
    joined = "".join(values)
    if joined.isascii() and joined.isdigit():  # no sign, no whitespace, no blank
        if max(map(len, values)) < _MAX_DIGITS or all(_fits(v) for v in values if v):
            return SEEN_LONG
        return NOT_LONG
    for value in values:
        kind = value_kind(value)
        if kind == NOT_A_LONG:
            return NOT_LONG
        state = max(state, kind)
    return state


def type_of(state: int) -> str:
    """The ``DataType`` of a column in ``state``."""
    return LONG if state == SEEN_LONG else STRING


def long_range(stripped: Sequence[str]) -> tuple[int, int] | None:
    """The smallest and largest of the non-blank stripped values if all of them are longs, else None.

    Also None when every value is blank (nothing says the column holds numbers).
    """
    if fold(UNSEEN, stripped) != SEEN_LONG:
        return None
    numbers = list(map(int, filter(None, stripped)))
    return min(numbers), max(numbers)


def parse_long(value: str) -> int | None:
    """The value as the table's ``long`` holds it; None for a blank or a value that is not a long."""
    return int(strip(value)) if value_kind(value) == A_LONG else None


def column_type(values: Iterable[str]) -> str:
    """``long`` or ``string`` for a column holding ``values`` (all of them, for the service's answer)."""
    return type_of(fold(UNSEEN, list(values)))
