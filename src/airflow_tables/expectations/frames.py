"""The columns a suite reads, as DataFrames holding the values the table will hold.

Only the columns the suite names are kept; pandas' C parser reads the file a few MiB at a
time, so its buffers stay small whatever the file's size. Values are typed as the service
types them (:mod:`airflow_tables.validation.types`, the rule the emulator uses too):

* a ``long`` column (decided on the first rows, like the service) holds integers: ``int64``,
  or the nullable ``Int64`` where a blank makes a value missing. A later value that is not a
  whole number is missing too, and counted (see :attr:`ColumnReader.not_long`);
* every other column is text (``dtype=str``: pandas 3's string dtype, Python strings before), as written;
* a blank (empty, or only whitespace) is a missing value in either.

Column names are the ones the service gives the table (``CsvReport.columns``: blank
headings named, repeated ones numbered).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

from airflow_tables.expectations._gx import ExpectationsError
from airflow_tables.validation import types as column_types

if TYPE_CHECKING:
    import pandas as pd

    from airflow_tables.validation import CsvReport

#: About how much of the file pandas' parser holds at a time (its buffers grow with every column of the file).
PARSE_BYTES = 1024 * 1024
#: How many values (rows x columns read) a chunk handed to GX holds...
FRAME_VALUES = 200_000
#: ... but never fewer rows than this: each GX validation has a fixed cost per expectation
#: whatever its size (measured in benchmarks/expectations.py), so a suite over many columns
#: gets wider chunks, not thousands of them.
MIN_CHUNK_ROWS = 10_000
#: How many values that are not whole numbers are kept per ``long`` column, to show in the log.
SAMPLES = 5
_LITERAL = r"[+-]?[0-9]+"


class ColumnReader:
    """Reads ``columns`` of the file ``report`` describes, typed as the service types them.

    ``path`` is the local UTF-8 copy to read when ``report.path`` is not a local UTF-8 file.
    """

    def __init__(self, report: CsvReport, columns: list[str], path: str | None = None) -> None:
        self.report = report
        self.columns = columns
        self.path = path or report.path
        self.types: dict[str, str] = {}
        #: per ``long`` column: how many values were not whole numbers, and the first few of them
        self.not_long: dict[str, tuple[int, list[str]]] = {}

    @property
    def name(self) -> str:
        return os.path.basename(self.report.path)

    def sniff_types(self) -> dict[str, str]:
        """Decide each column's type on the first rows, as the service does; remember and return them."""
        sample_size = column_types.sample_rows(len(self.report.columns))
        sample = next(self._raw(sample_size), None)
        self.types = {
            column: column_types.column_type(
                [] if sample is None else [v for v in sample[column].tolist() if isinstance(v, str)]
            )
            for column in self.columns
        }
        return self.types

    def chunks(self, values: int | None = None) -> Iterator[pd.DataFrame]:
        """The columns in consecutive chunks of about ``values`` (default :data:`FRAME_VALUES`) values each."""
        rows = max(MIN_CHUNK_ROWS, (values or FRAME_VALUES) // max(len(self.columns), 1))
        pending: list[pd.DataFrame] = []
        held = 0
        empty = True
        for piece in self._pieces(at_most=rows):
            pending.append(piece)
            held += len(piece)
            if held >= rows:
                chunk = self._typed(_joined(pending))
                pending, held, empty = [], 0, False  # not held twice while the chunk is validated
                yield chunk
                del chunk
        if pending or empty:  # a file with no rows still gets its (vacuous) results
            yield self._typed(_joined(pending)) if pending else self._empty()

    def whole(self) -> pd.DataFrame:
        """The columns whole, indexed by row number from 0 (zero columns: just the row count)."""
        import pandas as pd

        if not self.columns:
            return pd.DataFrame(index=pd.RangeIndex(self.report.rows))
        pieces = list(self._pieces())
        if not pieces:
            return self._empty()
        text = _joined(pieces)
        del pieces  # joined: not held twice while typed
        return self._typed(text)

    def header(self) -> pd.DataFrame:
        """Every column of the file and no row: what the table's shape questions are answered on."""
        return self._empty(self.report.columns)

    def _empty(self, columns: list[str] | None = None) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(
            {
                c: pd.Series([], dtype="Int64" if self.types.get(c) == column_types.LONG else str)
                for c in (self.columns if columns is None else columns)
            }
        )

    def _pieces(self, at_most: int | None = None) -> Iterator[pd.DataFrame]:
        """The columns as text, in parser-sized pieces (or ``at_most`` rows); checks the row count against the scan."""
        if not self.types:
            self.sniff_types()
        rows = max(1_000, PARSE_BYTES * max(self.report.rows, 1) // max(self.report.size_bytes, 1))
        read = 0
        for piece in self._raw(min(rows, at_most or rows), chunked=True):
            read += len(piece)
            yield piece
        if read != self.report.rows:
            raise ExpectationsError(
                f"reading {self.name} for the suite gave {read:,} rows where the service's rules count "
                f"{self.report.rows:,}; the file is not what the service would read (validate=True lists why)"
            )

    def _typed(self, text: pd.DataFrame) -> pd.DataFrame:
        """The text columns as the table holds them: blanks missing, ``long`` columns as integers."""
        if not len(text):
            return text
        text = text.mask(text.apply(_only_whitespace))
        for column in self.columns:
            if self.types[column] == column_types.LONG:
                text[column] = self._as_long(column, text[column])
        return text

    def _raw(self, rows: int, chunked: bool = False) -> Iterator[pd.DataFrame]:
        """The columns as text, empty cells missing: one frame of the first ``rows`` rows, or every row in pieces."""
        import pandas as pd

        options = {"chunksize": rows} if chunked else {"nrows": rows}
        frames = pd.read_csv(
            self.path,
            sep=self.report.delimiter,
            quotechar='"',
            doublequote=True,
            header=0,
            names=self.report.columns,
            usecols=self.columns,
            dtype=str,
            keep_default_na=False,
            na_values=[""],
            encoding="utf-8",  # the file itself or its converted copy; a BOM is in the header, which is skipped
            encoding_errors="replace",
            engine="c",
            **options,
        )
        if not chunked:
            yield frames
            return
        with frames:
            yield from frames

    def _as_long(self, column: str, text: pd.Series) -> pd.Series:
        """``text`` as the integers a ``long`` column holds; values that are not whole numbers become missing."""
        import pandas as pd

        stripped = text.str.strip()
        literal = stripped.str.fullmatch(_LITERAL, na=False)
        try:
            values = stripped.where(literal).astype("Int64")
        except (ValueError, TypeError, OverflowError):  # a '+' sign, or past 64 bits: the exact, slower way
            values = pd.Series(
                pd.array([column_types.parse_long(v) if isinstance(v, str) else None for v in stripped], dtype="Int64"),
                index=text.index,
            )
        bad = values.isna() & text.notna()
        if bad.any():
            count, samples = self.not_long.get(column, (0, []))
            shown = samples + [v for v in itertools.islice(text[bad], SAMPLES - len(samples))]
            self.not_long[column] = (count + int(bad.sum()), shown)
        return values if values.hasnans else values.astype("int64")


@contextlib.contextmanager
def system_allocator() -> Iterator[None]:
    """Have pyarrow (which holds pandas 3's text columns) allocate with the system allocator meanwhile.

    Its default allocator (mimalloc) keeps freed memory for reuse, and chunk after chunk the
    step's resident memory creeps up by tens of MiB; the system's hands large blocks back.
    Buffers remember their allocator, so restoring the default afterwards is safe.
    """
    pyarrow = sys.modules.get("pyarrow")  # imported by pandas when pandas uses it
    if pyarrow is None:
        yield
        return
    previous = pyarrow.default_memory_pool()
    pyarrow.set_memory_pool(pyarrow.system_memory_pool())
    try:
        yield
    finally:
        pyarrow.set_memory_pool(previous)


def _only_whitespace(text: pd.Series) -> pd.Series:
    """Which values are blank though not empty (empty ones are missing already)."""
    return text.str.isspace().eq(True)


def _joined(pieces: list[pd.DataFrame]) -> pd.DataFrame:
    import pandas as pd

    return pieces[0] if len(pieces) == 1 else pd.concat(pieces)
