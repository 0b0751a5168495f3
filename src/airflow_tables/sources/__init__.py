"""Where a CSV comes from, turned into what the service receives: a named, sized stream of UTF-8 bytes.

A file is named by a local path, an ``airflow.sdk.ObjectStoragePath`` or a URI
(``s3://aws_conn@bucket/key.csv``, ``gs://...``, ``file:///...``), and may be in a
declared encoding (``encoding="cp1252"``). :func:`open_source` turns any of them into a
:class:`Source`; the validator, the hook's upload and ``import_dataframe`` read through
it and know nothing of fsspec or codecs.

* :mod:`.allowed` refuses a file outside the allowed sources (``[datatables] allowed_sources``,
  a task's ``allowed_sources=``) before anything is read: every reader passes here.
* :mod:`.storage` finds objects through Airflow's object storage (imported only for them).
* :mod:`.transcode` converts a declared encoding to UTF-8 while the bytes are read.
* :mod:`.streams` holds the byte streams a :class:`Source` hands out (held to its listed size, a
  zip's member, the staged copy written as it is read) and the UTF-8 count of a converted file.
* :func:`read_plan` decides, once, how a source is read (:class:`Reading`: in place,
  streamed, or staged) and whether it is too large to be worth reading; a reader follows the
  plan as it is handed: it streams the stored bytes (:meth:`Source.open_listed`, which refuses
  an object that does not have the size it was listed with, where its end is read) or takes
  the plan's local file (:meth:`ReadPlan.local_file`), and asks nothing of how it was made.
* :meth:`ReadPlan.local_file` is the source itself when it is a local UTF-8 file, and
  otherwise a bounded local UTF-8 copy (:func:`staged` of a source is the same): for the
  validator's exact scan (which reads a record again to name its line, and splits a large
  file between two processes), and the operators, which validate and upload from that one
  copy, so an object is read from storage once and what was checked is exactly what is sent
  (``docs/sources.md`` has the measurements behind this choice). :meth:`ReadPlan.staging`
  is the same copy while it is written: a reader may scan its bytes as they are copied and
  leave what it found on the copy (:class:`CopyScan`, with the arguments it was made with),
  so the copy is not read again by a reader asking the same question.
  ``validate_csv`` of a plain UTF-8 object scans it as it streams, with no copy, and the
  hook alone streams from storage straight into the upload.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import os
from collections.abc import Callable, Generator, Hashable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, BinaryIO, Generic, TypeVar, cast

from airflow_tables.sources.allowed import ARGUMENT, SourceNotAllowedError, check_object, check_path, parse_prefixes
from airflow_tables.sources.compressed import MAGIC_BYTES, Compression, Decompressed, detect
from airflow_tables.sources.read_ahead import FileReadAhead, ReadAhead
from airflow_tables.sources.storage import (
    SourceError,
    SourceNotFoundError,
    is_storage_path,
    is_uri,
    label_of,
    local_opener,
    local_size,
    stat_object,
)
from airflow_tables.sources.streams import (
    COPY_BLOCK,
    CompressedAfterAll,
    Copier,
    Listed,
    Prefixed,
    by_suffix,
    count_utf8,
    file_ends,
    plain_pieces,
    spooled,
    zip_member,
)
from airflow_tables.sources.tabular import CSV, InputFormat, check_encoding, csv_stream, input_format_of
from airflow_tables.sources.transcode import (
    Codec,
    Converter,
    DecodeError,
    Undecodable,
    Utf8Reader,
    declared,
)

__all__ = [
    "CompressedAfterAll",
    "Compression",
    "CopyScan",
    "NotCopyScanned",
    "ReadPlan",
    "Reading",
    "Source",
    "TooLarge",
    "SourceError",
    "SourceNotAllowedError",
    "SourceNotFoundError",
    "identity",
    "is_uri",
    "open_source",
    "read_plan",
    "staged",
    "staging",
]

#: How many times the CSV limit a compressed Parquet or JSON Lines file may decompress to before it is
#: converted (JSON repeats its keys on every line; a file larger than this is refused, not spooled).
SPOOL_FACTOR = 8
#: Blocks of a file read ahead of its upload, on a thread of their own (the file's read and the send overlap).
FILE_READ_AHEAD = 4

#: What a reader found in a copy's bytes (the validator's ``FileScan``: this package knows nothing of it).
Found = TypeVar("Found")


@dataclass(frozen=True)
class CopyScan(Generic[Found]):
    """What a reader found in a staged copy's bytes as they were written, and the arguments it read them with.

    ``made_with`` is the reader's question (for the validator: its limits and whether it typed
    the columns); a reader asking another question cannot use ``found`` and is told why
    (:meth:`Source.copy_scan_for`). ``found`` may itself say that only an exact read of the
    copy describes the file (the validator's ``None``).
    """

    found: Found
    made_with: Hashable


@dataclass(frozen=True)
class NotCopyScanned:
    """Why a copy's bytes must be read again: no scan was made while it was copied, or one with other arguments.

    ``other_arguments`` is True for the second case: a scan was paid for and cannot be used,
    which a reader says (a second pass over the copy) rather than pays for silently.
    """

    reason: str
    other_arguments: bool = False

    def __str__(self) -> str:
        return self.reason


@dataclass(frozen=True)
class Source:
    """A CSV to read: what to call it, how big it is, and its bytes as UTF-8.

    ``label`` names it in messages (the path or URI as given, no password); ``name`` is
    its base name, which names the upload and so the table. ``stored_size`` is its size
    in storage; :meth:`utf8_size` what the service receives (the same, unless converted).
    ``local_path`` is set when the bytes are in a local file as they are.
    """

    label: str
    name: str
    stored_size: int
    local_path: str | None
    codec: Codec | None
    opener: Callable[[], BinaryIO]
    #: For a staged copy: the encoding the original was in, its first undecodable bytes, and
    #: False when the copy stopped at its size limit (the file is too large to send).
    converted_from: Codec | None = None
    decode_error: DecodeError | None = None
    complete: bool = True
    #: For a staged copy: what a reader found in its bytes as they were written (:meth:`Staging.done`).
    copy_scan: CopyScan[Any] | None = None
    #: For an object: what its storage says changes with its content (:func:`identity`).
    version: str | None = None
    #: For a staged copy converted from a declared encoding: its first :data:`STORED_HEAD_BYTES` as
    #: stored, so that the declaration can be checked against the bytes it was wrong about.
    stored_head: bytes | None = None
    #: The format its stored bytes are compressed in (:mod:`.compressed`); ``None`` for a plain file.
    #: A compressed source is always read from its staged, decompressed copy (:func:`read_plan`).
    compression: Compression | None = None
    #: What its (decompressed) bytes are: a CSV, or Parquet or JSON Lines (:mod:`.tabular`), which
    #: is read from its staged copy, converted to CSV; ``name`` is then the CSV's (``orders.csv``).
    input_format: InputFormat = CSV

    @property
    def encoding(self) -> str | None:
        """The declared encoding's canonical name (``cp1252``), or None for UTF-8."""
        codec = self.codec or self.converted_from
        return codec.name if codec else None

    @property
    def size_known(self) -> bool:
        """Whether the size the service receives can be told before the bytes are sent (:meth:`utf8_size`).

        Not for a compressed file, nor Parquet or JSON Lines: their CSV's size is known once it
        is written, so they are sent from their staged copy (an upload states its length before
        its first byte).
        """
        return self.compression is None and self.input_format is CSV

    @property
    def is_local_utf8(self) -> bool:
        """A local CSV sent as it is: every reader can use it directly."""
        return self.local_path is not None and self.codec is None and self.size_known

    def copy_scan_for(self, made_with: Hashable) -> CopyScan[Any] | NotCopyScanned:
        """The scan made while this copy was written, when it was made with ``made_with``; else why not."""
        if self.copy_scan is None:
            return NotCopyScanned("nothing was scanned while it was copied")
        if self.copy_scan.made_with != made_with:
            return NotCopyScanned(
                f"the scan made while it was copied was made with {self.copy_scan.made_with}, not {made_with}",
                other_arguments=True,
            )
        return self.copy_scan

    def _copied(self, copier: Copier, scan: CopyScan[Any] | None = None) -> Source:
        """This source's staged copy, as ``copier`` wrote it; ``scan`` is kept only on a complete copy."""
        return Source(
            self.label,
            self.name,
            copier.written,
            copier.path,
            None,
            local_opener(copier.path),
            converted_from=self.codec,
            decode_error=copier.converter.first_error if copier.converter and copier.complete else None,
            complete=copier.complete,
            copy_scan=scan if copier.complete else None,
            stored_head=bytes(copier.head) if self.codec else None,
        )

    def open_stored(self) -> BinaryIO:
        """The bytes as stored (in the declared encoding), streaming."""
        return self.opener()

    def open(self) -> BinaryIO:
        """The bytes the service receives: UTF-8, converted while read when an encoding was declared."""
        raw = self.opener()
        return raw if self.codec is None else cast(BinaryIO, Utf8Reader(raw, self.codec))

    def open_listed(self) -> BinaryIO:
        """The bytes as stored, held to their listed size: another count at their end is a :class:`SourceError`.

        What a reader that reads the whole file takes (a streamed scan, a staged copy): an
        object rewritten between its listing and its read is then refused where its end is
        read, not described by bytes that are not the ones listed.
        """
        return cast(BinaryIO, Listed(self.opener(), self.label, self.stored_size, self.compression is None))

    def open_csv(self, limit: int | None = None) -> BinaryIO:
        """The CSV bytes the service receives, before any encoding is converted: decompressed, converted from
        Parquet or JSON Lines (:mod:`.tabular`, which reads a seekable file: an object's, or a compressed
        file's, bytes are first spooled to a temporary file, at most :data:`SPOOL_FACTOR` times ``limit``).
        """
        if self.input_format is CSV:
            return self.open_decompressed(limit)
        if self.local_path is not None and self.compression is None:
            return csv_stream(open(self.local_path, "rb"), self.input_format, self.label)  # noqa: SIM115 - closed with it
        spool_limit = None if limit is None else SPOOL_FACTOR * limit
        return csv_stream(spooled(self, spool_limit), self.input_format, self.label)

    def open_decompressed(self, limit: int | None = None) -> BinaryIO:
        """The bytes as stored, decompressed (:meth:`open_listed` for a plain file), at most ``limit`` + 1 of them.

        Every gzip member (bzip2, xz stream; zstandard frame) is read; a file cut short or not
        valid in its format is a :class:`SourceError` naming it and the compressed offset. A
        zip's one file is read from a seekable copy of the zip when it is in storage (its
        directory is at its end).
        """
        if self.compression is None:
            listed = self.open_listed()
            try:
                head = listed.read(MAGIC_BYTES)  # a plain-named object's first bytes may say it is compressed
            except BaseException:
                listed.close()
                raise
            return cast(BinaryIO, Prefixed(head, listed))
        if self.compression.member is not None:
            return cast(BinaryIO, Decompressed(self.open_listed(), self.compression, self.label, limit))
        return zip_member(self)

    def blocks(self, block_size: int) -> Generator[memoryview, None, None]:
        """The bytes the service receives, a block of about ``block_size`` at a time.

        Each view is valid until the next is asked for: the blocks are read (and converted)
        into reused buffers, for a reader that passes them on without keeping them. A file's
        blocks are read on a thread a few blocks ahead (:class:`.FileReadAhead`: the read and
        the send overlap); a streamed object's are the pieces its GET received, as they are.
        Either is converted piece by piece where it was read, when an encoding was declared.
        """
        with self.open_stored() as raw:
            if self.codec is not None:
                if isinstance(raw, ReadAhead):
                    yield from Utf8Reader(raw, self.codec, block_size).blocks()
                    return
                with FileReadAhead(raw, self.label, FILE_READ_AHEAD * block_size, block_size) as ahead:
                    yield from Utf8Reader(cast(BinaryIO, ahead), self.codec, block_size).blocks()
                return
            if isinstance(raw, ReadAhead):
                yield from plain_pieces(raw.pieces(), self.label)
                return
            with FileReadAhead(raw, self.label, FILE_READ_AHEAD * block_size, block_size) as ahead:
                yield from ahead.pieces()

    def utf8_size(self) -> int:
        """Bytes the service receives. A declared encoding costs one pass over the file to count them.

        Raises :class:`SourceError` when a byte is not valid in the declared encoding. A compressed
        file has no such size until it is decompressed: its staged copy (:func:`staged`) has.
        """
        if not self.size_known:
            raise ValueError(f"{self.label} is compressed or not a CSV: its staged copy has a size")
        return self.stored_size if self.codec is None else self._counted_utf8_size

    @functools.cached_property
    def _counted_utf8_size(self) -> int:
        try:
            size, error = count_utf8(self)
        except SourceError:
            raise
        except OSError as err:  # cut short or grown while counted (a mapped file's SIGBUS is one, see _transcode.c)
            raise SourceError(self.label, f"it changed while it was counted ({err})") from None
        if error is not None:
            raise SourceError(self.label, str(replace(self, decode_error=error).undecodable()))
        return size

    def undecodable(self) -> Undecodable | None:
        """The first bytes not valid in the declared encoding, with their line; None if all are."""
        if self.decode_error is None:
            return None
        codec = self.converted_from or self.codec
        error = self.decode_error
        return Undecodable(
            self._line_at(error.output_offset), codec.name if codec else "utf-8", error.source_offset, error.bad
        )

    def _line_at(self, offset: int) -> int:
        """The 1-based line of the byte at ``offset`` of the UTF-8 the service receives (LF, CRLF, CR: one break)."""
        line, last = 1, b""
        with contextlib.closing(self.blocks(COPY_BLOCK)) as blocks:
            for block in blocks:
                if offset <= 0:
                    break
                part = bytes(block[:offset])
                offset -= len(part)
                split_crlf = last == b"\r" and part.startswith(b"\n")  # one break, cut between two blocks
                line += part.count(b"\n") + part.count(b"\r") - part.count(b"\r\n") - split_crlf
                last = part[-1:]
        return line


def open_source(
    file: Any,
    encoding: str | None = None,
    *,
    allowed: str | Sequence[str] | None = None,
    input_format: str | None = None,
) -> Source:
    """Find ``file`` (a local path, an ``ObjectStoragePath``, a URI or a :class:`Source`) and say how to read it.

    Reads nothing but the object's metadata, and only once the file is known to be an
    allowed source (:mod:`.allowed`): inside ``[datatables] allowed_sources`` when it is set,
    and inside ``allowed`` (prefixes, a task's own list) when given. A :class:`Source` was
    checked when it was opened. Raises :class:`ValueError` for an unknown ``encoding`` or a
    bad prefix, :class:`SourceNotAllowedError` (a ``PermissionError``) outside the allowed
    sources, and :class:`SourceError` (:class:`SourceNotFoundError`, a
    ``FileNotFoundError``, for a missing file) when it cannot be read.
    """
    codec = declared(encoding)
    if isinstance(file, Source):
        return file if encoding is None else replace(file, codec=codec)
    # input_format: "csv", "parquet", "jsonl", or None (told by the file's first bytes and its suffix).
    narrowed = None if allowed is None else parse_prefixes(allowed, ARGUMENT)
    if is_storage_path(file) or is_uri(file):
        label = label_of(file)
        check_object(file, narrowed)
        obj = stat_object(file, check_local=lambda local: check_path(label, local, narrowed))
        # An object's first bytes are not read here (that would be a request of its own): its suffix
        # says it is compressed, and a stream of a plain-named one checks its first bytes (Listed).
        head, tail = file_ends(obj.local_path) if obj.local_path is not None else (b"", b"")
        compression = detect(label, obj.name, head) if head else by_suffix(label, obj.name)
        kind, name = _kind(label, obj.name, compression, (head, tail), input_format, codec)
        return Source(
            label,
            name,
            obj.size,
            obj.local_path,
            codec,
            obj.open,
            version=obj.version,
            compression=compression,
            input_format=kind,
        )
    path = os.fspath(file)
    check_path(path, path, narrowed)
    size = local_size(path)
    head, tail = file_ends(path)
    compression = detect(path, os.path.basename(path), head)
    kind, name = _kind(path, os.path.basename(path), compression, (head, tail), input_format, codec)
    return Source(path, name, size, path, codec, local_opener(path), compression=compression, input_format=kind)


def _kind(
    label: str,
    stored_name: str,
    compression: Compression | None,
    ends: tuple[bytes, bytes],
    declared: str | None,
    codec: Any,
) -> tuple[InputFormat, str]:
    """What a file's (decompressed) bytes are, and the name its CSV is sent under (``ends``: its first, last bytes)."""
    name = compression.strip_suffix(stored_name) if compression else stored_name
    head, tail = (b"", b"") if compression else ends
    kind = input_format_of(label, name, head, declared, tail)
    check_encoding(kind, codec, f"declared for {label}")
    return kind, kind.csv_name(name)


def identity(source: Source) -> str:
    """What tells these bytes in this place from any other: the location, and the content's fingerprint.

    A local file's content is fingerprinted (XXH3, :mod:`.fingerprint`: it reads the page cache
    in place); an object's is its storage's version (ETag or modification time) and size, since
    reading it to hash it would be a second download. Two files of one base name in two folders,
    or one path rewritten between two imports, have different identities.
    """
    if source.local_path is not None:
        from airflow_tables.sources.fingerprint import fingerprint_file

        where = os.path.realpath(source.local_path)
        return f"{where}\0{fingerprint_file(source.local_path, encoding=source.encoding)}"
    return f"{source.label}\0{source.version or 'unversioned'}\0{source.stored_size}\0{source.encoding or 'utf-8'}"


class Reading(enum.Enum):
    """How a source's bytes are read (``docs/sources.md``): the one decision, made by :func:`read_plan`."""

    #: A local file in UTF-8 (a staged copy is one): read where it lies, mapped, as often as a reader needs.
    IN_PLACE = "in place"
    #: An object in UTF-8: read once as it streams (:meth:`Source.open_listed`), nothing written. A reader
    #: that needs an exact read (to name a line) reads the plan's :meth:`~ReadPlan.local_file` instead: a
    #: second read, only then.
    STREAMED = "streamed"
    #: A file in a declared encoding or compressed: copied once to a bounded local file, decompressed
    #: and converted to UTF-8 on the way (:meth:`ReadPlan.local_file`), and that copy read in place.
    #: The limit holds the decompressed bytes: a file that expands past it stops being copied there.
    STAGED = "staged"


@dataclass(frozen=True)
class TooLarge:
    """A source not worth reading: more than the reader's limit (``at_least`` when only the limit is known)."""

    size: int
    at_least: bool


@dataclass(frozen=True)
class ReadPlan:
    """Where and how one source is read, decided once (:func:`read_plan`), for a reader to follow as it is.

    A reader streams ``source`` (:meth:`Source.open_listed`) when it is ``STREAMED`` and reads
    :meth:`local_file` otherwise (or when the stream cannot describe the file): the plan hands
    over the local file, and the reader asks nothing of how it was made.
    """

    source: Source
    reading: Reading
    #: Set when the bytes are more than the reader's limit: nothing is worth reading.
    too_large: TooLarge | None = None
    #: The reader's limit, which bounds a copy: past it the copy stops and is not ``complete``.
    max_bytes: int | None = None

    @contextlib.contextmanager
    def local_file(self) -> Iterator[Source]:
        """The bytes in a local UTF-8 file for the time of the block: the source itself when it is read in place.

        Anything else is copied: converted from the declared encoding on the way (its first
        undecodable bytes kept in ``decode_error``), into a temporary directory under the
        source's own name, and at most ``max_bytes`` of it (past them the copy stops and is
        marked ``complete=False``: the file is too large to send anyway). An object that does
        not have the size it was listed with is a :class:`SourceError`.
        """
        if self.reading is Reading.IN_PLACE:
            yield self.source
            return
        with _copying(self.source, self.max_bytes) as copier:
            copier.finish()
            yield copier.source._copied(copier)

    @contextlib.contextmanager
    def staging(self) -> Iterator[Staging]:
        """:meth:`local_file` while it is written (:class:`Staging`): for a reader that scans it on the way."""
        if self.reading is Reading.IN_PLACE:
            yield Staging(self.source)
            return
        with _copying(self.source, self.max_bytes) as copier:
            yield Staging(self.source, copier)


def read_plan(source: Source, *, max_bytes: int | None = None) -> ReadPlan:
    """How ``source`` is read: in place, streamed or staged (:class:`Reading`); reads nothing.

    ``max_bytes`` is the reader's limit: an object in UTF-8 listed larger is not worth copying
    out of storage to say more, a staged copy that stopped at its own limit is too large
    whatever it holds, and a copy the plan makes stops past it. A local file is read in place
    whatever its size (its scan says where the limit falls).
    """
    if source.is_local_utf8:
        too_large = None if source.complete else TooLarge(max_bytes or source.stored_size, at_least=True)
        return ReadPlan(source, Reading.IN_PLACE, too_large, max_bytes)
    if source.codec is not None or not source.size_known:
        return ReadPlan(source, Reading.STAGED, max_bytes=max_bytes)
    if max_bytes is not None and source.stored_size > max_bytes:
        return ReadPlan(source, Reading.STREAMED, TooLarge(source.stored_size, at_least=False), max_bytes)
    return ReadPlan(source, Reading.STREAMED, max_bytes=max_bytes)


def staged(source: Source, *, max_bytes: int | None = None) -> contextlib.AbstractContextManager[Source]:
    """``source``'s local UTF-8 file for the time of the block (:meth:`ReadPlan.local_file` of its plan)."""
    return read_plan(source, max_bytes=max_bytes).local_file()


def staging(source: Source, *, max_bytes: int | None = None) -> contextlib.AbstractContextManager[Staging]:
    """:func:`staged`'s copy while it is written (:meth:`ReadPlan.staging` of its plan)."""
    return read_plan(source, max_bytes=max_bytes).staging()


class Staging:
    """A staged copy while it is written: its bytes can be read once as they are copied, then :meth:`done`.

    ``stream`` (a plain object in UTF-8 only: converted bytes do not fit a reader's buffer one for
    one, and a scan as it streams needs the size a compressed file has only once read) gives the
    bytes forward only, each written to the copy as it is read, so a reader
    scans them in the pass that copies them; whatever it leaves unread is copied by
    :meth:`done`. ``stream`` is None when there is nothing to copy (the source is read in
    place) or the bytes are converted on the way.
    """

    def __init__(self, source: Source, copier: Copier | None = None) -> None:
        self.source = source if copier is None else copier.source
        self._copier = copier
        plain = self.source.codec is None and self.source.size_known
        self.stream = cast(BinaryIO, copier) if copier is not None and plain else None

    def done(self, scan: CopyScan[Any] | None = None) -> Source:
        """Copy what is left and return the copy, carrying ``scan`` when it is complete (the source itself if none)."""
        if self._copier is None:
            return self.source
        self._copier.finish()
        return self.source._copied(self._copier, scan)


@contextlib.contextmanager
def _copying(source: Source, max_bytes: int | None) -> Iterator[Copier]:
    """A copier of ``source``'s bytes (decompressed) into a file of its name in a new temporary directory.

    The directory is removed after the block.
    """
    import tempfile  # not at import: the validator of local files starts in milliseconds

    try:
        raw = source.open_csv(max_bytes)
    except CompressedAfterAll as found:  # named as plain, stored compressed: read again, as what it is
        source = found.source_in(source)
        raw = source.open_csv(max_bytes)
    with raw, tempfile.TemporaryDirectory(prefix="airflow-tables-") as tmp:
        path = os.path.join(tmp, source.name or "source.csv")
        codec = source.codec
        with open(path, "wb") as out:
            yield Copier(source, raw, out, path, Converter(codec) if codec else None, max_bytes)
