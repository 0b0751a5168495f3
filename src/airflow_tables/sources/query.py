"""A query's result as the CSV the service receives: streamed from the database into one bounded local file.

The transfer operator (:mod:`airflow_tables.transfers.sql_to_datatables`) hands a DB-API
connection and a query to :func:`staged_result`, which yields a :class:`~airflow_tables.sources.Source`
of a local UTF-8 CSV, the kind of source the import path reads in place: validation, the
schema guard, send-once and the upload take it as they take a file, and know nothing of
databases.

The values follow the Parquet conversion's rules (:mod:`.tabular`, ``docs/sources.md``): every
batch of rows becomes an Arrow record batch and is written by :func:`.tabular.batch_csv`, so
there is one set of rules, not two. Memory holds a few batches, never the result: the rows are
read a block at a time and written to the file as they come.

* **PostgreSQL** (a psycopg2 or psycopg 3 connection): ``COPY (query) TO STDOUT`` in PostgreSQL's CSV, read a
  block of :data:`BLOCK_ROWS` rows at a time and parsed by Arrow into the column types the
  query's description gives. A server-side (named) cursor was measured at 2.3 times the time of
  ``COPY`` for the same rows (psycopg2 makes a Python object of every value); ``COPY`` lets the
  server write text and Arrow parse it in C++. The session's settings that shape PostgreSQL's
  text are fixed for the query (``DateStyle`` ISO, ``TimeZone`` UTC, ``extra_float_digits`` 3),
  so that a result does not change with a server's configuration. psycopg 3's rows are read from
  libpq directly (:func:`_libpq_copy_out`), not through its ``Copy`` object.
* **Any other DB-API connection** (SQLite, MySQL, Snowflake, ...): ``fetchmany`` of
  :data:`BLOCK_ROWS` rows at a time, each column's Python values made an Arrow array.

What a value becomes is in ``docs/transfers.md`` ("Values"); in short: whole numbers and
decimals as written, floats shortest round-trip, booleans ``true``/``false``, dates, times and
timestamps ISO 8601 (``timestamptz`` in UTC, ``+00:00``), NULL an empty field, text (``uuid``,
``json``, enums, ...) as the database writes it. A column without a CSV form (bytes, an array,
an interval, a composite) is refused naming it, before any row is read when the database says
its type up front. A result wider than the service's 300 columns is refused before any row is
read; one that grows past 512 MB stops there, saying after how many rows
(:class:`QueryRefused`). Nothing is sent in either case: the import path gets no source.
"""

from __future__ import annotations

import contextlib
import decimal
import functools
import os
import queue
import threading
import uuid
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_tables.sources import Source
from airflow_tables.sources.errors import SourceError
from airflow_tables.sources.storage import local_opener
from airflow_tables.sources.tabular import MAX_COLUMNS, batch_csv, checked_schema, header, in_order

#: The service's size limit in bytes (``validation/rules.py``'s ``MAX_BYTES``, which sources may not import).
#: Module-level so that a test can lower it instead of writing 512 MB.
MAX_BYTES = 512 * 1024**2
#: Rows fetched, converted and written at a time by ``fetchmany`` (a few hundred KiB of CSV for a typical row).
BLOCK_ROWS = 4 * 1024
#: Bytes of PostgreSQL's ``COPY`` text parsed and written at a time (a block ends with a row). Memory
#: grows with it (a block's values are copied a few times as they are written): 512 KiB keeps the
#: transfer's memory under 64 MiB, and larger blocks were not faster.
BLOCK_BYTES = 512 * 1024
#: How PostgreSQL's ``COPY`` writes a NULL (unquoted; a text value of these bytes is quoted).
NULL_MARK = "\\N"
#: Blocks of PostgreSQL's ``COPY`` text read ahead of their conversion.
COPY_AHEAD = 2
#: What a refusal of a column without a CSV form tells the query's author to do.
CAST_IN_THE_QUERY = "cast them to text in the query (col::text, CAST(col AS VARCHAR)), or leave them out"


class QueryRefused(SourceError):
    """A result the service cannot take as it is (too wide, too large, a column without a CSV form).

    Final: running the same query again gives the same refusal.
    """


@dataclass(frozen=True)
class QueryResult:
    """A query's result staged as a CSV: the source to import, its data rows and its columns."""

    source: Source
    rows: int
    columns: tuple[str, ...]


@dataclass(frozen=True)
class _Reading:
    """How a result is read: its header's names, and its blocks, each a row count and the work that writes it."""

    names: list[str]
    blocks: Generator[tuple[int, Callable[[], memoryview]], None, None]


@contextlib.contextmanager
def staged_result(
    connection: Any,
    sql: str,
    parameters: Any = None,
    *,
    name: str,
    label: str,
    max_bytes: int | None = None,
    max_columns: int = MAX_COLUMNS,
) -> Iterator[QueryResult]:
    """Run ``sql`` on ``connection`` and write its result as a CSV named ``name`` in a new temporary directory.

    The directory is removed after the block. The query runs in a transaction that is rolled
    back: a transfer reads, it never writes. ``label`` names the result in messages.
    ``max_bytes`` defaults to :data:`MAX_BYTES` (read when called, so a test may lower it).
    Raises :class:`QueryRefused` for a result the service cannot take; the database's own
    errors (a query that fails) propagate as the driver raises them.
    """
    import tempfile

    limit = MAX_BYTES if max_bytes is None else max_bytes
    with tempfile.TemporaryDirectory(prefix="airflow-tables-query-") as tmp:
        path = os.path.join(tmp, name)
        try:
            with open(path, "wb") as out:
                reading = _read(connection, sql, parameters, label, max_columns)
                rows, size = _write(out, reading, label, limit)
        finally:
            with contextlib.suppress(Exception):  # a connection the driver already closed
                connection.rollback()
        source = Source(label, name, size, path, None, local_opener(path))
        yield QueryResult(source, rows, tuple(reading.names))


def _read(connection: Any, sql: str, parameters: Any, label: str, max_columns: int) -> _Reading:
    """PostgreSQL's ``COPY`` for a psycopg2 or psycopg (3) connection, ``fetchmany`` for any other."""
    driver = type(connection).__module__.split(".")[0]
    if driver in ("psycopg2", "psycopg"):
        return _postgres_copy(connection, driver, sql, parameters, label, max_columns)
    return _fetched(connection, sql, parameters, label, max_columns)


def _write(out: Any, reading: _Reading, label: str, limit: int) -> tuple[int, int]:
    """Write the header and every block to ``out``; the data rows and bytes written.

    Stops as soon as the next block would pass ``limit`` bytes, saying how many rows fitted.
    """
    head = header(reading.names)
    out.write(head)
    written, rows = len(head), 0
    blocks = in_order(lambda block: (block[0], block[1]()), reading.blocks)
    try:
        for count, csv in blocks:
            if written + len(csv) > limit:
                raise QueryRefused(
                    label,
                    f"its result passed the service's limit of {limit:,} bytes after {rows:,} rows "
                    f"({written:,} bytes of CSV); reading stopped there. Select fewer rows or columns, "
                    "or split the result into several tables",
                )
            out.write(csv)
            written += len(csv)
            rows += count
    finally:
        blocks.close()  # the limit or an error ended the loop: stop the reading (a COPY's thread) too
        reading.blocks.close()
    return rows, written


# -- PostgreSQL: COPY -----------------------------------------------------------------------------

#: Settings that shape PostgreSQL's text, for the query's transaction only.
_SESSION = (
    "SET LOCAL DateStyle = 'ISO, YMD'",
    "SET LOCAL TimeZone = 'UTC'",
    "SET LOCAL extra_float_digits = 3",  # every float's exact digits: Arrow then writes the shortest round-trip
)
#: Type OIDs read as the Arrow type whose rule writes them; every other type is text, as PostgreSQL writes it.
_PARSED = {
    16: "bool",
    20: "int64",  # int8
    21: "int64",  # int2
    23: "int64",  # int4
    26: "int64",  # oid
    700: "float32",  # float4
    701: "float64",  # float8
    1082: "date32",  # date
    1083: "time64",  # time
    1114: "timestamp",  # timestamp
    1184: "timestamptz",  # timestamptz, written in UTC (the session's TimeZone above)
}
#: Type OIDs and categories (``pg_type.typcategory``) without a CSV form: bytes, intervals, arrays, composites.
_REFUSED_OIDS = {17: "binary", 1186: "duration"}
_REFUSED_CATEGORIES = {"A": "list", "C": "struct", "T": "duration"}


def _arrow_types(pa: Any) -> dict[str, Any]:
    """The Arrow type of each name :data:`_PARSED` and the refusals use."""
    return {
        "bool": pa.bool_(),
        "int64": pa.int64(),
        "float32": pa.float32(),
        "float64": pa.float64(),
        "date32": pa.date32(),
        "time64": pa.time64("us"),
        "timestamp": pa.timestamp("us"),
        # UTC as a fixed offset: the rules write it without a zone database (and so, faster).
        "timestamptz": pa.timestamp("us", tz="+00:00"),
        "binary": pa.binary(),
        "list": pa.list_(pa.string()),
        "struct": pa.struct([]),
        "duration": pa.duration("us"),
    }


def _postgres_copy(connection: Any, driver: str, sql: str, parameters: Any, label: str, max_columns: int) -> _Reading:
    """The result of ``COPY (sql) TO STDOUT``, its columns typed by the query's description (a ``LIMIT 0`` of it)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv

    cursor = connection.cursor()
    for setting in _SESSION:
        cursor.execute(setting)
    query = _bound(connection, driver, sql, parameters)
    cursor.execute(f"SELECT * FROM (\n{query}\n) AS result LIMIT 0")
    columns = [(_column_name(column), int(_column_type(column))) for column in cursor.description]
    kinds = _postgres_kinds(cursor, {oid for _, oid in columns})
    schema = pa.schema([_postgres_field(pa, name, oid, kinds) for name, oid in columns])
    names = checked_schema(schema, label, max_columns, remedy=CAST_IN_THE_QUERY)
    # Arrow names the columns by position: a result may repeat a name (validation says so, not the parser).
    positions = [f"f{i}" for i in range(len(names))]
    options = (
        pcsv.ReadOptions(column_names=positions, use_threads=False, block_size=1 << 30),
        # A one-column row of an empty text is an empty line: a row, not a line to skip.
        pcsv.ParseOptions(newlines_in_values=True, ignore_empty_lines=False),
        pcsv.ConvertOptions(
            column_types=dict(zip(positions, schema.types, strict=True)),
            # NULL is \N, not an empty field: a row whose one column is NULL would be an empty line,
            # which a CSV reader skips (a one-column result lost its NULL rows). A text value "\N" comes quoted.
            null_values=[NULL_MARK],
            true_values=["t"],
            false_values=["f"],
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        ),
    )
    copy = f"COPY (\n{query}\n) TO STDOUT WITH (FORMAT csv, NULL '{NULL_MARK}')"
    plain = schema.remove_metadata()

    def produce(put: Callable[[tuple[int, bytearray]], None]) -> None:
        sink = _RowSink(put)
        if driver == "psycopg2":
            cursor.copy_expert(copy, sink)
        else:
            for row in _libpq_copy_out(connection, copy):
                sink.write(row)
        sink.flush()

    def blocks() -> Generator[tuple[int, Callable[[], memoryview]], None, None]:
        with contextlib.closing(_pushed(produce, connection)) as pushed:
            for rows, text in pushed:
                yield rows, functools.partial(_copy_csv, pa, pcsv, text, options, plain, label)

    return _Reading(names, blocks())


def _bound(connection: Any, driver: str, sql: str, parameters: Any) -> str:
    """``sql`` with ``parameters`` bound by the driver (client side), as one statement ``COPY ( ... )`` can hold."""
    query = sql.strip().rstrip(";").strip()
    if parameters is None:
        return query
    if driver == "psycopg2":
        bound = connection.cursor().mogrify(query, parameters)
    else:
        from psycopg import ClientCursor

        bound = ClientCursor(connection).mogrify(query, parameters)
    return bound.decode() if isinstance(bound, bytes) else str(bound)


def _postgres_kinds(cursor: Any, oids: set[int]) -> dict[int, tuple[str, str]]:
    """Each type OID's name as people write it (``integer[]``) and its category, from ``pg_type``."""
    listed = ", ".join(str(int(oid)) for oid in sorted(oids))  # the server's own numbers
    cursor.execute(f"SELECT oid, format_type(oid, NULL), typcategory FROM pg_catalog.pg_type WHERE oid IN ({listed})")
    return {int(oid): (str(name), str(category)) for oid, name, category in map(_values, cursor.fetchall())}


def _values(row: Any) -> tuple[Any, ...]:
    """A row's values, whatever the connection's row type (tuples, or the dicts of a ``dictcursor`` extra)."""
    return tuple(row.values()) if isinstance(row, dict) else tuple(row)


def _column_name(column: Any) -> str:
    """A description column's name: DB-API's first item (psycopg's columns also have ``.name``)."""
    return str(getattr(column, "name", None) or column[0])


def _column_type(column: Any) -> Any:
    """A description column's type code: PostgreSQL's type OID, for psycopg2 and psycopg alike."""
    return getattr(column, "type_code", None) or column[1]


def _postgres_field(pa: Any, name: str, oid: int, kinds: dict[int, tuple[str, str]]) -> Any:
    """The Arrow field a column of type ``oid`` is read as; a type without a CSV form gets a stand-in the rules refuse.

    The field carries PostgreSQL's name of its type, which a refusal shows (``tags (integer[])``).
    """
    type_name, category = kinds.get(oid, (str(oid), ""))
    kind = _REFUSED_OIDS.get(oid) or _REFUSED_CATEGORIES.get(category) or _PARSED.get(oid)
    return pa.field(name, _arrow_types(pa)[kind] if kind else pa.string(), metadata={"type": type_name})


def _copy_csv(
    pa: Any, pcsv: Any, text: bytearray, options: tuple[Any, Any, Any], schema: Any, label: str
) -> memoryview:
    """One block of PostgreSQL's CSV rows, parsed into the columns' types and written by the rules."""
    try:
        table = pcsv.read_csv(pa.py_buffer(text), *options)
    except pa.ArrowInvalid as err:
        raise QueryRefused(
            label, f"a value cannot be read as its column's type ({_column_named(err, schema)})"
        ) from None
    if not table.num_rows:
        return memoryview(b"")
    columns = [column.combine_chunks() for column in table.columns]
    return batch_csv(pa.record_batch(columns, schema=schema), label)


def _column_named(err: Exception, schema: Any) -> str:
    """Arrow's message with the column it numbers (``#3``) named, and what to do about it."""
    import re

    said = str(err)
    found = re.search(r"column #(\d+)", said)
    if found and int(found.group(1)) < len(schema):
        said = f"column {schema[int(found.group(1))].name!r}: {said}"
    return f"{said}; {CAST_IN_THE_QUERY.replace('them', 'it')}"


class _RowSink:
    """What ``copy_expert`` writes to: rows (one per call) gathered into blocks of about :data:`BLOCK_BYTES`.

    A block is one growing buffer, not a list of rows: the driver's object for a row is freed
    as soon as it is copied, so memory holds a few blocks' bytes and no Python object per row.
    """

    def __init__(self, put: Callable[[tuple[int, bytearray]], None]) -> None:
        self._put = put
        self._block = bytearray()
        self._rows = 0

    def write(self, row: bytes) -> None:
        self._block += row
        self._rows += 1
        if len(self._block) >= BLOCK_BYTES:
            self.flush()

    def flush(self) -> None:
        if self._rows:
            self._put((self._rows, self._block))
            self._block, self._rows = bytearray(), 0


def _libpq_copy_out(connection: Any, copy: str) -> Iterator[Any]:
    """The rows of ``COPY ... TO STDOUT`` on a psycopg (3) connection, read from libpq one call each.

    Psycopg's own ``Copy`` object reads each row through its generator and wait machinery, about a
    microsecond of Python per row: 5 million rows took 1.6x psql's ``\\copy`` against 1.1x through
    psycopg2's ``copy_expert`` (benchmarks/sql_transfer.py). libpq's ``PQgetCopyData`` (psycopg's
    ``pgconn``) gives the same bytes. The statement runs in the connection's open transaction
    (psycopg began it with the session's settings), which the caller rolls back.
    """
    from psycopg import errors, pq

    pgconn = connection.pgconn
    pgconn.send_query(copy.encode(connection.info.encoding))
    while pgconn.flush():  # a long statement on a non-blocking connection may need more than one send
        pass
    started = pgconn.get_result()
    if started is None or started.status != pq.ExecStatus.COPY_OUT:
        _drain(pgconn)
        raise errors.DatabaseError(_said(pgconn, started))
    while True:
        size, data = pgconn.get_copy_data(0)  # 0: wait for the next row
        if size == -1:  # the end of the rows
            break
        if size == -2:
            _drain(pgconn)
            raise errors.DatabaseError(_said(pgconn, None))
        yield data
    ended = _drain(pgconn)
    if ended is not None and ended.status != pq.ExecStatus.COMMAND_OK:
        raise errors.DatabaseError(_said(pgconn, ended))


def _drain(pgconn: Any) -> Any:
    """Read libpq's results to the end (the connection can take a statement again); the first one, if any."""
    first = None
    while (result := pgconn.get_result()) is not None:
        first = first or result
    return first


def _said(pgconn: Any, result: Any) -> str:
    """The server's message for a failed ``COPY``."""
    message = result.error_message if result is not None else pgconn.error_message
    return (message or b"COPY failed").decode("utf-8", "replace").strip()


class _Stopped(Exception):
    """Raised in a producer whose reader has gone (the limit, an error): ends the ``COPY``."""


def _pushed(produce: Callable[[Callable[[Any], None]], None], connection: Any) -> Generator[Any, None, None]:
    """The blocks ``produce`` pushes (from a thread of its own), pulled by the caller, :data:`COPY_AHEAD` ahead.

    A reader that stops early has the connection's query cancelled (the server stops writing)
    and the producer ended; an error of the producer (the query's) is raised to the reader.
    """
    blocks: queue.Queue[Any] = queue.Queue(COPY_AHEAD)
    stop = threading.Event()
    done = object()
    failed: list[BaseException] = []

    def put(block: Any) -> None:
        while not stop.is_set():
            with contextlib.suppress(queue.Full):
                blocks.put(block, timeout=0.1)
                return
        raise _Stopped

    def run() -> None:
        try:
            produce(put)
        except BaseException as err:  # noqa: BLE001 - handed to the reader, which raises it
            failed.append(err)
        finally:
            with contextlib.suppress(_Stopped):
                put(done)

    thread = threading.Thread(target=run, name="query-copy", daemon=True)
    thread.start()
    try:
        while (block := blocks.get()) is not done:
            yield block
        if failed and not isinstance(failed[0], _Stopped):
            raise failed[0]
    finally:
        if thread.is_alive():
            stop.set()
            with contextlib.suppress(Exception):
                connection.cancel()
        thread.join()


# -- any DB-API connection: fetchmany ---------------------------------------------------------------


def _fetched(connection: Any, sql: str, parameters: Any, label: str, max_columns: int) -> _Reading:
    """The result of ``cursor.execute`` read :data:`BLOCK_ROWS` rows at a time (``fetchmany``)."""
    import pyarrow as pa

    cursor = connection.cursor()
    if parameters is None:
        cursor.execute(sql)
    else:
        cursor.execute(sql, parameters)
    if cursor.description is None:
        raise QueryRefused(label, "the statement returns no result (it is not a query); nothing to import")
    names = [_column_name(column) for column in cursor.description]
    if len(names) > max_columns:
        checked_schema(pa.schema([pa.field(f"f{i}", pa.null()) for i in range(len(names))]), label, max_columns)

    def blocks() -> Generator[tuple[int, Callable[[], memoryview]], None, None]:
        while rows := cursor.fetchmany(BLOCK_ROWS):
            yield len(rows), functools.partial(_rows_csv, pa, rows, names, label)

    return _Reading(names, blocks())


def _rows_csv(pa: Any, rows: Sequence[Any], names: list[str], label: str) -> memoryview:
    """A block of rows as CSV: each column's values an Arrow array (its type told by the values), then the rules."""
    if rows and isinstance(rows[0], dict):
        rows = [_values(row) for row in rows]
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in names]
    arrays = [_array(pa, name, values, label) for name, values in zip(names, columns, strict=True)]
    schema = pa.schema([pa.field(f"f{i}", array.type) for i, array in enumerate(arrays)])
    named = pa.schema([pa.field(name, array.type) for name, array in zip(names, arrays, strict=True)])
    checked_schema(named, label, max_columns=None, remedy=CAST_IN_THE_QUERY)
    return batch_csv(pa.record_batch(arrays, schema=schema), label)


#: Python values with no Arrow type of their own, written as their text.
_AS_TEXT = (uuid.UUID,)


def _array(pa: Any, name: str, values: Sequence[Any], label: str) -> Any:
    """One column's values as an Arrow array; a decimal as written (its own scale), a UUID as its text."""
    sample = next((v for v in values if v is not None), None)
    if isinstance(sample, decimal.Decimal):  # Arrow would give every value the block's widest scale
        values = [None if v is None else format(v, "f") if isinstance(v, decimal.Decimal) else v for v in values]
    elif isinstance(sample, _AS_TEXT):
        values = [None if v is None else str(v) for v in values]
    elif isinstance(sample, memoryview):
        values = [None if v is None else bytes(v) for v in values]
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as err:
        kinds = sorted({type(v).__name__ for v in values if v is not None})
        raise QueryRefused(
            label,
            f"column {name!r} holds values of {' and '.join(kinds)} ({err}); a column must hold one kind of value: "
            f"{CAST_IN_THE_QUERY.replace('them', 'it')}",
        ) from None


__all__ = ["BLOCK_ROWS", "MAX_BYTES", "QueryRefused", "QueryResult", "staged_result"]
