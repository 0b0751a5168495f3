"""Parquet and JSON Lines read as the CSV the service receives: converted a batch at a time, by exact rules.

The service takes one CSV. A lake's Parquet file or an event stream's JSON Lines is converted
here, as a stream of CSV bytes (:func:`csv_stream`) that :mod:`airflow_tables.sources` copies
into the task's one bounded local file, where validation and the upload read it as any CSV.
Memory stays bounded: a Parquet file is read a batch of a few thousand rows at a time (its pages as
they are needed, not a row group's at once); JSON Lines a block of lines at a time. Every value is
converted by pyarrow's compute kernels (C++), a column at a time, never a Python object per value.

The rules (``docs/sources.md``, "Parquet and JSON Lines", says them for users):

* whole numbers as written (every digit of a 64-bit integer); floats in their shortest
  round-trip form (``0.1``, ``100``, ``1e+20``, ``nan``, ``inf``; a float32 by float32's);
* booleans ``true`` / ``false``; decimals as written, with their scale (``1.2300``);
* dates ``2026-11-29``; times ``12:30:00.250000``; timestamps ISO 8601, ``2026-11-29T12:30:00``
  with the fraction the unit holds (none when it is zero: Parquet stores seconds as
  milliseconds), and the zone they carry as an offset, in that zone's local time
  (``2026-11-29T13:30:00+01:00``); a naive timestamp stays naive;
* a null is an empty field (and so is an empty string: CSV cannot tell them apart); a line that
  would be empty (one column, empty) is written ``""``, so that no reader skips it as blank;
* strings as they are, quoted only when they hold a separator a reader might choose (comma,
  semicolon, tab, pipe), a quote or a line break;
* the header from the schema's names;
* nested (list, struct, map, union), binary and duration columns have no CSV form: the file is
  refused naming them, before anything is converted; so is a schema of more than 300 columns.

JSON Lines: each line one object. A key missing from a line is a null; the columns are every
key found in the file, in the order they first appear; a key whose values are numbers in some
lines and text in others is refused naming it. The file is read twice (once for its keys and
their kinds, once to convert): it is the task's local copy, read from the page cache.

pyarrow is an optional dependency (``airflow-tables[parquet]``), imported only here and only
when such a file is read.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import datetime
import functools
import io
import os
import re
import struct
import threading
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar, cast

from airflow_tables.sources.errors import SourceError

if TYPE_CHECKING:
    import pyarrow as pa

#: The service's column limit (``validation/rules.py``'s ``MAX_COLUMNS``, which sources may not import).
MAX_COLUMNS = 300
#: Values (rows x columns) converted at a time: 8,192 rows of 20 columns, a batch's CSV under 2 MiB
#: for a typical row; every batch is :data:`MIN_BATCH_ROWS` to :data:`MAX_BATCH_ROWS` rows.
BATCH_VALUES = 8192 * 20
#: A kernel call's fixed cost stays small beside its rows however wide the table is ...
MIN_BATCH_ROWS = 2048
#: ... and a narrow table's batches stay as many as a wide one's rows would be worth.
MAX_BATCH_ROWS = 64 * 1024
#: Batches converted at once, on threads of their own.
_THREADS = min(4, os.cpu_count() or 1)
#: Bytes of JSON Lines parsed at a time (cut at a line's end).
JSON_BLOCK = 16 * 1024 * 1024
#: Text that is quoted: a quote, a line break, or any separator a reader may choose (the validator's
#: and the service's candidates, validation/dialect.py: a column of "a;b" must not look like ';'-separated).
_NEEDS_QUOTES = '[,;\t|"\r\n]'
In = TypeVar("In")
Out = TypeVar("Out")


@dataclass(frozen=True)
class InputFormat:
    """A kind of file the service's CSV is made from: its name, the suffixes it carries, its first bytes."""

    name: str
    suffixes: tuple[str, ...]
    magic: bytes = b""

    def csv_name(self, name: str) -> str:
        """The upload's name for a file called ``name`` (``orders.parquet`` -> ``orders.csv``)."""
        lowered = name.lower()
        for suffix in self.suffixes:
            if lowered.endswith(suffix) and len(name) > len(suffix):
                return name[: -len(suffix)] + ".csv"
        return name if self.name == "csv" else name + ".csv"  # converted, it is a CSV whatever it was called


CSV = InputFormat("csv", (".csv",))
PARQUET = InputFormat("parquet", (".parquet", ".pq"), b"PAR1")
JSONL = InputFormat("jsonl", (".jsonl", ".ndjson"))
INPUT_FORMATS = {f.name: f for f in (CSV, PARQUET, JSONL)}


def input_format_of(label: str, name: str, head: bytes, declared: str | None = None, tail: bytes = b"") -> InputFormat:
    """The format a file is in: ``declared`` (``input_format=``) when given, else its bytes, then its suffix.

    ``head`` and ``tail`` are the file's first and last bytes, ``b""`` when they are not read (an
    object, a compressed file: its suffix decides). A Parquet file begins and ends with ``PAR1``:
    both are asked, so a CSV whose first heading is ``PAR1`` stays a CSV. Raises
    :class:`ValueError` for an unknown ``declared``.
    """
    if declared is not None:
        if declared not in INPUT_FORMATS:
            raise ValueError(f"input_format must be one of {sorted(INPUT_FORMATS)} or None, not {declared!r}")
        return INPUT_FORMATS[declared]
    if head.startswith(PARQUET.magic) and tail.endswith(PARQUET.magic):
        return PARQUET
    lowered = name.lower()
    return next((f for f in (PARQUET, JSONL) if lowered.endswith(f.suffixes)), CSV)


def check_encoding(input_format: InputFormat, encoding: object, label: str) -> None:
    """Refuse ``encoding=`` for a format that is converted (its text is UTF-8 by its own definition)."""
    if input_format is not CSV and encoding is not None:
        raise ValueError(f"encoding= is for a CSV's text; {input_format.name} text is UTF-8 ({label})")


def csv_stream(file: BinaryIO, input_format: InputFormat, label: str) -> BinaryIO:
    """The CSV bytes of ``file`` (seekable for Parquet), a batch at a time, as a stream."""
    pa = _pyarrow(label, input_format)
    if input_format is PARQUET:
        chunks = _parquet_csv(pa, file, label)
    elif input_format is JSONL:
        chunks = _jsonl_csv(pa, file, label)
    else:
        raise ValueError(f"{input_format.name} needs no conversion")
    return cast(BinaryIO, _Chunks(chunks, file))


def table_csv(table: pa.Table, label: str) -> Iterator[memoryview]:
    """An Arrow table's CSV by the same rules (``import_dataframe`` writes a DataFrame's this way).

    Its width is left to the validator that reads the CSV (a table in memory costs nothing to
    convert); a column without a CSV form is refused here, naming it.
    """
    import pyarrow as pa

    names = checked_schema(table.schema, label, max_columns=None)
    yield memoryview(header(names))
    yield from _converted(pa, table.to_batches(batch_rows(len(names))), label)


def batch_rows(columns: int) -> int:
    """Rows a batch of a table of ``columns`` columns holds (:data:`BATCH_VALUES`, within the bounds).

    Memory is a few batches in flight (:data:`_THREADS` converting, each with its columns' text
    and its CSV), so a batch is counted in values, not rows: a 300-column table's batch holds as
    much as a 20-column one's.
    """
    return max(MIN_BATCH_ROWS, min(MAX_BATCH_ROWS, BATCH_VALUES // max(1, columns)))


# -- Parquet ---------------------------------------------------------------------------------


def _parquet_csv(pa: Any, file: BinaryIO, label: str) -> Iterator[memoryview]:
    import pyarrow.parquet as pq

    try:
        # Pages are read as the batches need them: pre-buffering reads a row group's column chunks
        # at once, tens of MiB of a large file held until its last batch is converted.
        parquet = pq.ParquetFile(file, pre_buffer=False)
    except (pa.ArrowException, OSError) as err:
        raise SourceError(label, f"it is not a valid Parquet file ({err})") from None
    schema = parquet.schema_arrow
    yield memoryview(header(checked_schema(schema, label)))
    try:
        # One thread decodes (a batch's columns are small); the batches convert on the pool's threads.
        batches = parquet.iter_batches(batch_size=batch_rows(len(schema)), use_threads=False)
        yield from _converted(pa, batches, label)
    except (pa.ArrowException, OSError) as err:
        raise SourceError(label, f"its Parquet data cannot be read ({err})") from None


# -- JSON Lines ------------------------------------------------------------------------------


def _jsonl_csv(pa: Any, file: BinaryIO, label: str) -> Iterator[memoryview]:
    schema = _jsonl_schema(pa, file, label)
    yield memoryview(header(checked_schema(schema, label)))
    file.seek(0)
    batches = (
        batch
        for block, first_line in _line_blocks(file)
        for batch in _parse_json(pa, block, first_line, label, schema).to_batches(batch_rows(len(schema)))
    )
    yield from _converted(pa, batches, label)


def _jsonl_schema(pa: Any, file: BinaryIO, label: str) -> pa.Schema:
    """Every key of the file in the order it first appears, each with one kind (numbers widen to float)."""
    fields: dict[str, Any] = {}
    where: dict[str, int] = {}
    for block, first_line in _line_blocks(file):
        for field in _parse_json(pa, block, first_line, label).schema:
            known = fields.get(field.name)
            if known is None or pa.types.is_null(known):
                fields[field.name], where[field.name] = field.type, first_line
            elif not pa.types.is_null(field.type) and known != field.type:
                fields[field.name] = _widened(pa, field.name, known, field.type, where[field.name], first_line, label)
    return pa.schema([pa.field(name, kind) for name, kind in fields.items()])


def _widened(pa: Any, name: str, a: Any, b: Any, line_a: int, line_b: int, label: str) -> Any:
    """The one kind two blocks' kinds of a key become: numbers widen to float64; anything else is refused."""
    numeric = pa.types.is_integer(a) or pa.types.is_floating(a), pa.types.is_integer(b) or pa.types.is_floating(b)
    if all(numeric):
        return pa.float64()
    raise SourceError(
        label,
        f"the key {name!r} holds {a} from line {line_a:,} and {b} from line {line_b:,} on; "
        "a column must hold one kind of value",
    )


def _line_blocks(file: BinaryIO) -> Iterator[tuple[bytes, int]]:
    """The file in blocks of about :data:`JSON_BLOCK` bytes, each ending at a line's end, with its first line."""
    line, rest = 1, b""
    while True:
        data = file.read(JSON_BLOCK)
        if not data:
            if rest.strip():
                yield rest, line
            return
        data = rest + data
        cut = data.rfind(b"\n") + 1
        block, rest = data[:cut], data[cut:]
        if block.strip():
            yield block, line
        line += block.count(b"\n")


def _parse_json(pa: Any, block: bytes, first_line: int, label: str, schema: Any = None) -> pa.Table:
    import pyarrow.json as pj

    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore" if schema else "infer")
    try:
        return pj.read_json(io.BytesIO(block), parse_options=options)
    except pa.ArrowException as err:
        changed = re.search(r"Column\(/(.+?)\) changed from (\w+) to (\w+) in row (\d+)", str(err))
        if changed:
            key, before, after, row = changed.groups()
            line = _line_of_row(block, int(row), first_line)
            raise SourceError(
                label,
                f"the key {key!r} holds a {before} before line {line:,} and a {after} on it; "
                "a column must hold one kind of value",
            ) from None
        raise SourceError(label, f"its JSON Lines from line {first_line:,} on cannot be read ({err})") from None


def _line_of_row(block: bytes, row: int, first_line: int) -> int:
    """The file's line of a block's ``row`` (0-based, as Arrow counts them: blank lines are not rows)."""
    for number, line in enumerate(block.split(b"\n"), first_line):
        if line.strip():
            if row == 0:
                return number
            row -= 1
    return first_line


# -- the rules -------------------------------------------------------------------------------


#: What a refusal of columns without a CSV form tells a file's owner to do.
FLATTEN = "select the other columns, or flatten them, first"


def checked_schema(schema: Any, label: str, max_columns: int | None = MAX_COLUMNS, remedy: str = FLATTEN) -> list[str]:
    """The header's names; refuses a schema too wide, or with a column that has no CSV form (naming them).

    A field's ``type`` metadata, when set, is how the refusal names its kind (a database's own
    type name, ``integer[]``, where the Arrow type stands in for it); ``remedy`` what to do instead.
    """
    if max_columns is not None and len(schema) > max_columns:
        raise SourceError(label, f"it has {len(schema)} columns; the service takes at most {max_columns}")
    refused = [f"{field.name} ({_kind_name(field)})" for field in schema if _no_csv_form(field.type)]
    if refused:
        raise SourceError(
            label,
            f"{'these columns have' if len(refused) > 1 else 'this column has'} no CSV form: {', '.join(refused)} "
            f"(nested, binary or duration values); {remedy}",
        )
    return [field.name for field in schema]


def _kind_name(field: Any) -> str:
    named = (field.metadata or {}).get(b"type")
    return named.decode() if named else str(field.type)


def _no_csv_form(kind: Any) -> bool:
    import pyarrow as pa

    if pa.types.is_dictionary(kind):
        return _no_csv_form(kind.value_type)
    return bool(
        pa.types.is_nested(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_fixed_size_binary(kind)
        or getattr(pa.types, "is_binary_view", lambda _: False)(kind)
        or pa.types.is_duration(kind)
        or pa.types.is_interval(kind)
    )


def header(names: list[str]) -> bytes:
    return (",".join(_quoted_name(name) for name in names) + "\n").encode()


def _quoted_name(name: str) -> str:
    return f'"{name.replace(chr(34), chr(34) * 2)}"' if re.search(_NEEDS_QUOTES, name) else name


def _batch_csv(pa: Any, batch: Any, label: str) -> memoryview:
    """One batch's rows as CSV bytes (every line ending in ``\\n``), from its columns' text."""
    import pyarrow.compute as pc

    if batch.num_rows == 0:
        return memoryview(b"")
    columns = [_field_text(pa, pc, column) for column in batch.columns]
    if len(columns) == 1:  # a line that would be empty is written "" (no reader skips it as blank)
        columns = [pc.if_else(pc.equal(columns[0], ""), '""', columns[0])]
    # The line's end goes on its last field (a copy of that column, not of every line), then one join.
    columns[-1] = pc.binary_join_element_wise(columns[-1], pa.scalar("", pa.string()), "\n")
    lines = pc.binary_join_element_wise(*columns, ",") if len(columns) > 1 else columns[0]
    lines = lines.combine_chunks() if isinstance(lines, pa.ChunkedArray) else lines
    offsets, data = lines.buffers()[1], lines.buffers()[2]
    start, end = _offset(offsets, lines.offset), _offset(offsets, lines.offset + len(lines))
    return memoryview(data)[start:end]


@functools.cache
def _pool() -> concurrent.futures.ThreadPoolExecutor:
    """Threads that convert batches side by side: Arrow's kernels release the GIL."""
    return concurrent.futures.ThreadPoolExecutor(_THREADS, thread_name_prefix="tabular")


def batch_csv(batch: Any, label: str) -> memoryview:
    """One Arrow record batch's rows as CSV bytes by this module's rules (its schema checked by the caller)."""
    import pyarrow as pa

    return _batch_csv(pa, batch, label)


def _converted(pa: Any, batches: Iterable[Any], label: str) -> Iterator[memoryview]:
    """Each batch's CSV, in order, with up to :data:`_THREADS` batches converting at once (memory: that many)."""
    with _returning_allocator(pa):
        yield from in_order(lambda batch: _batch_csv(pa, batch, label), batches)


_allocator_lock = threading.Lock()
_allocator_users = 0
_allocator_before: Any = None


@contextlib.contextmanager
def _returning_allocator(pa: Any) -> Iterator[None]:
    """Arrow's allocations on the system allocator while a file converts, the process's pool again after.

    Why: Arrow's default pool (mimalloc) keeps the pages a converted batch frees for the threads that
    freed them, and a conversion frees a batch's worth on each thread every few milliseconds; the
    system allocator gives them to the next batch. Converting ``benchmarks/formats.py``'s 512 MiB
    Parquet file added 95 MiB to its process with it, 130 MiB without (and 226 MiB with batches of
    32,768 rows and row groups pre-buffered, as before), at the same speed. Arrow's pool is the
    process's: a conversion in another thread meanwhile shares the switch, and the last one to end
    puts the pool back.
    """
    global _allocator_users, _allocator_before
    with _allocator_lock:
        if _allocator_users == 0:
            _allocator_before = pa.default_memory_pool()
            pa.set_memory_pool(pa.system_memory_pool())
        _allocator_users += 1
    try:
        yield
    finally:
        with _allocator_lock:
            _allocator_users -= 1
            if _allocator_users == 0:
                pa.set_memory_pool(_allocator_before)
                _allocator_before = None


def in_order(work: Callable[[In], Out], items: Iterable[In]) -> Generator[Out, None, None]:
    """``work`` of each item, in the items' order, with up to :data:`_THREADS` items worked on at once.

    Memory holds that many items and results; a reader that stops early (a copy at its limit)
    drops the rest.
    """
    pending: collections.deque[concurrent.futures.Future[Out]] = collections.deque()
    try:
        for item in items:
            pending.append(_pool().submit(work, item))
            if len(pending) >= _THREADS:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:
            future.cancel()


def _offset(buffer: Any, index: int) -> int:
    return int.from_bytes(memoryview(buffer)[index * 4 : index * 4 + 4], "little", signed=True)


def _field_text(pa: Any, pc: Any, column: Any) -> Any:
    """A column's values as CSV fields (string, no nulls), by the module's rules."""
    kind = column.type
    if pa.types.is_dictionary(kind):
        column = column.dictionary_decode()
        kind = column.type
    if pa.types.is_null(kind):
        return pa.array([""] * len(column), pa.string())
    if pa.types.is_timestamp(kind):
        text = _timestamp_text(pa, pc, column, kind)
    elif pa.types.is_date(kind):
        text = column.cast(pa.string())  # YYYY-MM-DD, as strftime's "%Y-%m-%d" writes it and six times faster
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        text = column.cast(pa.string()) if pa.types.is_large_string(kind) else column
    else:
        text = column.cast(pa.string())  # numbers, booleans, decimals, times: Arrow's exact forms
    text = pc.fill_null(text, "")
    if (pa.types.is_string(kind) or pa.types.is_large_string(kind)) and _holds(pa, pc, text, _NEEDS_QUOTES):
        needs = pc.match_substring_regex(text, _NEEDS_QUOTES)
        if pc.any(needs).as_py():
            # Only the values that need it are quoted, then put back in their places.
            chosen = pc.filter(text, needs)
            inner = pc.replace_substring(chosen, '"', '""') if _holds(pa, pc, chosen, '"') else chosen
            text = pc.replace_with_mask(text, needs, pc.binary_join_element_wise('"', inner, '"', ""))
    return text


def _holds(pa: Any, pc: Any, text: Any, pattern: str) -> bool:
    """Whether any value of a string array matches the regular expression ``pattern``: one search of its bytes.

    Most text columns (ids, names, codes) hold no character that is quoted, and most quoted ones
    no quote to double: then no value is looked at on its own. The values' bytes are searched as
    one binary value by Arrow's RE2, which lets the other threads' batches convert meanwhile
    (Python's ``re`` would hold the interpreter for the whole search).
    """
    text = text.combine_chunks() if hasattr(text, "combine_chunks") else text
    offsets, data = text.buffers()[1], text.buffers()[2]
    if data is None or not len(text):
        return False
    # Only this array's values: a slice (a DataFrame's batch) shares its whole column's data buffer.
    start, end = _offset(offsets, text.offset), _offset(offsets, text.offset + len(text))
    if start == end:
        return False
    bounds = pa.py_buffer(struct.pack("<ii", 0, end - start))
    values = pa.Array.from_buffers(pa.binary(), 1, [None, bounds, data.slice(start, end - start)])
    return bool(pc.match_substring_regex(values, pattern)[0].as_py())


#: A zone that is a fixed offset from UTC, as Arrow names it (``+01:00``).
_FIXED_OFFSET = re.compile(r"(?P<sign>[+-])(?P<hours>\d\d):(?P<minutes>\d\d)")
#: The instants Arrow writes with a four-digit year (a nanosecond timestamp is always between them).
_FIRST, _LAST = datetime.datetime(1, 1, 1), datetime.datetime(9999, 12, 31, 23, 59, 59, 999999)
#: Characters of a timestamp's fraction (the dot and its digits) by unit, after ``YYYY-MM-DD HH:MM:SS``.
_FRACTION = {"s": 0, "ms": 4, "us": 7, "ns": 10}
_SECONDS = len("2026-11-29 12:30:00")


def _timestamp_text(pa: Any, pc: Any, column: Any, kind: Any) -> Any:
    """ISO 8601 text of timestamps: Arrow's cast (``2026-11-29 12:30:00.005+0100``), reshaped with literal edits.

    ``T`` between date and time; a fraction of zeros dropped; the offset written ``+01:00``
    (Arrow writes ``+0100``, and ``Z`` for UTC). Everything is done on fixed positions, a few
    times faster than ``strftime``; a year outside 1 to 9999 (which Arrow does not write in four
    digits) is left to ``strftime``.
    """
    if kind.tz and (offset := _FIXED_OFFSET.fullmatch(kind.tz)):
        # A fixed offset needs no zone database (which pyarrow before 26 asks, and fails): the UTC wall
        # clock moved by the offset, written naive, and the offset after it.
        sign = -1 if offset["sign"] == "-" else 1
        moved = datetime.timedelta(hours=int(offset["hours"]), minutes=int(offset["minutes"])) * sign
        local = pc.add(column.cast(pa.timestamp(kind.unit)), pa.scalar(moved, pa.duration(kind.unit)))
        return pc.binary_join_element_wise(_timestamp_text(pa, pc, local, local.type), kind.tz, "")
    fraction = _FRACTION[kind.unit]
    seconds = _in_whole_seconds(pa, column, kind) if fraction else None
    # The space after YYYY-MM-DD (a byte position: a year Arrow writes otherwise is strftime's, below).
    text = pc.binary_replace_slice((column if seconds is None else seconds).cast(pa.string()), 10, 11, "T")
    if fraction and seconds is None:
        whole = pc.equal(pc.floor_temporal(column, unit="second"), column)
        text = pc.if_else(whole, pc.utf8_replace_slice(text, _SECONDS, _SECONDS + fraction, ""), text)
    if kind.tz:
        utc = pc.ends_with(text, "Z")
        text = pc.if_else(utc, pc.replace_substring(text, "Z", "+00:00"), pc.utf8_replace_slice(text, -2, -2, ":"))
    if kind.unit == "ns":
        return text
    least, most = pc.min_max(column).values()
    if least.is_valid and (least.value < _first(pa, kind).value or most.value > _last(pa, kind).value):
        # Years Arrow writes in more or fewer digits: strftime's text for them.
        usual = pc.fill_null(
            pc.and_kleene(pc.greater_equal(column, _first(pa, kind)), pc.less_equal(column, _last(pa, kind))), True
        )
        fmt = "%Y-%m-%dT%H:%M:%S%z" if kind.tz else "%Y-%m-%dT%H:%M:%S"
        text = pc.if_else(usual, text, pc.strftime(column, fmt))
    return text


def _in_whole_seconds(pa: Any, column: Any, kind: Any) -> Any:
    """``column`` in seconds if every value is a whole second (Parquet stores seconds as milliseconds), else None.

    One checked cast: the common case skips the per-value test for a fraction and its edit.
    """
    try:
        return column.cast(pa.timestamp("s", kind.tz))
    except pa.ArrowInvalid:
        return None


@functools.cache
def _first(pa: Any, kind: Any) -> Any:
    return pa.scalar(_FIRST, kind)


@functools.cache
def _last(pa: Any, kind: Any) -> Any:
    return pa.scalar(_LAST, kind)


def _pyarrow(label: str, input_format: InputFormat) -> Any:
    try:
        import pyarrow as pa
    except ImportError:
        raise SourceError(
            label, f"reading {input_format.name} needs pyarrow: pip install 'airflow-tables[parquet]'"
        ) from None
    return pa


class _Chunks(io.RawIOBase):
    """A stream of the bytes an iterator of chunks yields; closing it closes ``underlying`` too."""

    def __init__(self, chunks: Iterable[memoryview], underlying: BinaryIO) -> None:
        super().__init__()
        self._chunks = iter(chunks)
        self._current = memoryview(b"")
        self._underlying = underlying

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        while not len(self._current):
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._current = chunk.cast("B") if chunk.format != "B" else chunk
        n = min(len(view), len(self._current))
        view[:n] = self._current[:n]
        self._current = self._current[n:]
        return n

    def close(self) -> None:
        if not self.closed:
            self._underlying.close()
        super().close()


__all__ = [
    "CSV",
    "INPUT_FORMATS",
    "JSONL",
    "PARQUET",
    "InputFormat",
    "batch_csv",
    "check_encoding",
    "checked_schema",
    "csv_stream",
    "header",
    "in_order",
    "input_format_of",
    "table_csv",
]
