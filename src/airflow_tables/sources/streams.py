"""The byte streams a :class:`~airflow_tables.sources.Source` is read through, and the counts made of them.

What :mod:`airflow_tables.sources` hands its readers is built here: a stored file held to its
listed size (:class:`Listed`), its first bytes checked for a compression its name does not say
(:class:`Prefixed`, :func:`plain_pieces`, :class:`CompressedAfterAll`), a zip's one member
(:func:`zip_member`), a spooled copy for a reader that seeks (:func:`spooled`), the staged copy
written as it is read (:class:`Copier`), and the UTF-8 length of a file in a declared encoding
(:func:`count_utf8`). None of it knows what a Source decides; each takes one and reads it.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from airflow_tables.sources.compressed import MAGIC_BYTES, Compression, detect, open_zip_member
from airflow_tables.sources.errors import SourceError
from airflow_tables.sources.transcode import Converter, DecodeError, count_single_byte, counts_natively

if TYPE_CHECKING:
    from airflow_tables.sources import Source

#: Bytes copied at a time into a staged copy.
COPY_BLOCK = 1024 * 1024
#: How much of a converted source's stored bytes its staged copy keeps (``Source.stored_head``): the
#: sample validation reads to see whether a declared encoding misreads a UTF-8 file.
STORED_HEAD_BYTES = 64 * 1024
#: Threads that count a local file's UTF-8 length in a single-byte code page (the upload waits for it).
COUNT_THREADS = min(2, os.cpu_count() or 1)


def plain_pieces(pieces: Iterator[memoryview], label: str) -> Iterator[memoryview]:
    """A plain object's pieces as its GET receives them, its first bytes checked not to be compressed."""
    first = True
    for piece in pieces:
        if first and len(piece):
            found = detect(label, "", bytes(piece[:MAGIC_BYTES]))
            if found is not None:
                raise CompressedAfterAll(label, found)
            first = False
        yield piece


def spooled(source: Source, limit: int | None) -> BinaryIO:
    """``source``'s decompressed bytes in a temporary file (removed when closed), for a reader that seeks."""
    import tempfile

    spool = cast(BinaryIO, tempfile.TemporaryFile(prefix="airflow-tables-"))  # noqa: SIM115 - the caller's
    try:
        with source.open_decompressed(limit) as stored:
            written = 0
            while block := stored.read(COPY_BLOCK):
                written += len(block)
                if limit is not None and written > limit:
                    raise SourceError(source.label, f"it is more than {limit:,} bytes once decompressed")
                spool.write(block)
        spool.seek(0)
    except BaseException:
        spool.close()
        raise
    return spool


def file_ends(path: str) -> tuple[bytes, bytes]:
    """A local file's first and last bytes: enough to tell whether it is compressed, or Parquet."""
    try:
        with open(path, "rb") as f:
            head = f.read(MAGIC_BYTES)
            f.seek(max(0, os.fstat(f.fileno()).st_size - 4))
            return head, f.read(4)
    except OSError as err:
        raise SourceError(path, err.strerror or type(err).__name__) from None


def by_suffix(label: str, name: str) -> Compression | None:
    """The compression an object's name says (``.gz``, ``.zst``, ...); its bytes are checked as they are read."""
    from airflow_tables.sources.compressed import FORMATS

    lowered = name.lower()
    return next((c for c in FORMATS if any(lowered.endswith(suffix) for suffix in c.suffixes)), None)


def count_utf8(source: Source) -> tuple[int, DecodeError | None]:
    """Convert the whole source once, keeping only the count (and the first undecodable bytes).

    A local file is counted in place (mapped, :mod:`airflow_tables.sources.mapped`), in a
    single-byte code page on :data:`COUNT_THREADS` threads at once; an object as it streams.
    """
    assert source.codec is not None
    converter = Converter(source.codec)
    if source.local_path is not None and counts_natively(source.codec):
        from airflow_tables.sources.mapped import each_window

        codec = source.codec
        counts = each_window(source.local_path, "counted", lambda view: count_single_byte(codec, view), COUNT_THREADS)
        if not any(bad for _, bad in counts):
            return sum(n for n, _ in counts), None
        # A byte not valid in the code page: counted again in order, to say where the first one is.
    if source.local_path is not None:
        from airflow_tables.sources.mapped import mapped_windows

        total = 0
        for view in mapped_windows(source.local_path, "counted"):
            for start in range(0, len(view), COPY_BLOCK):  # Python's decoders hold a block's text at once
                total += converter.count(view[start : start + COPY_BLOCK])
        return total + converter.count(b"", final=True), converter.first_error
    total = 0
    with source.open_stored() as raw:
        while True:
            block = raw.read(COPY_BLOCK)
            total += converter.count(block, final=not block)
            if not block:
                return total, converter.first_error


def zip_member(source: Source) -> BinaryIO:
    """The one file of a zip source, decompressed; a zip in storage is first copied to a temporary file."""
    import tempfile

    if source.local_path is not None:
        archive: BinaryIO = open(source.local_path, "rb")  # noqa: SIM115 - closed with the member
    else:
        archive = cast(BinaryIO, tempfile.TemporaryFile(prefix="airflow-tables-"))  # noqa: SIM115 - likewise
        try:
            with source.open_listed() as stored:
                while block := stored.read(COPY_BLOCK):
                    archive.write(block)
            archive.seek(0)
        except BaseException:
            archive.close()
            raise
    try:
        _, member = open_zip_member(archive, source.label)
    except BaseException:
        archive.close()
        raise
    return cast(BinaryIO, ZipMember(member, archive))


class ZipMember(io.RawIOBase):
    """A zip's one file, closing the zip with it."""

    def __init__(self, member: BinaryIO, archive: BinaryIO) -> None:
        super().__init__()
        self._member = member
        self._archive = archive

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        import zipfile
        import zlib

        try:
            return self._member.readinto(buffer)  # type: ignore[attr-defined]
        except (zipfile.BadZipFile, zlib.error, EOFError) as err:
            raise SourceError(getattr(self._archive, "name", "zip"), f"its zip data is not valid ({err})") from None

    def close(self) -> None:
        if not self.closed:
            try:
                self._member.close()
            finally:
                self._archive.close()
        super().close()


class Copier(io.RawIOBase):
    """Copies a source's bytes (converted to UTF-8) to a local file as they are read through it, or by :meth:`finish`.

    Reading it (only without a converter: the bytes read are the bytes written) lets a reader
    see the copy's bytes once, as they are written; :meth:`finish` copies whatever is left.
    Past ``max_bytes`` written, the copy stops and is not ``complete``.
    """

    def __init__(
        self, source: Source, raw: Any, out: BinaryIO, path: str, converter: Converter | None, max_bytes: int | None
    ) -> None:
        super().__init__()
        self.source = source  # as it is read (compressed after all: see _copying)
        self.raw = raw
        self.out = out
        self.path = path
        self.converter = converter
        self.max_bytes = max_bytes
        self.written = 0
        self.head = bytearray()  # the first bytes as stored, kept when they are converted
        self.complete = True
        self.ended = False  # the source is read to its end, or the copy stopped at its limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        assert self.converter is None  # converted bytes do not fit the reader's buffer one for one
        if self.ended:
            return 0
        view = memoryview(buffer).cast("B")
        n = self.raw.readinto(view)
        self._copy(view[:n])
        return n

    def finish(self) -> None:
        """Copy the rest and close both ends: the copy at :attr:`path` is whole (or stopped at its limit)."""
        view = memoryview(bytearray(COPY_BLOCK))
        while not self.ended:
            self._copy(view[: self.raw.readinto(view)])
        self.raw.close()
        self.out.close()

    def _copy(self, data: memoryview) -> None:
        if self.converter is not None and len(self.head) < STORED_HEAD_BYTES:
            self.head += data[: STORED_HEAD_BYTES - len(self.head)]
        converted = data if self.converter is None else self.converter.convert(data, final=not data)
        self.out.write(converted)
        self.written += len(converted)
        if self.max_bytes is not None and self.written > self.max_bytes:
            self.complete = False
            self.ended = True
        elif not data:
            self.ended = True


class CompressedAfterAll(SourceError):
    """An object read as a plain file whose first bytes are a compression format's (its name has no suffix for it).

    A reader that can start again reads :meth:`source_in` (a second GET, in this case only):
    the staged copy and the validator do. The hook's upload straight from storage cannot: it
    is cut off before the form ends (nothing is imported) with this error's words.
    """

    def __init__(self, label: str, compression: Compression) -> None:
        super().__init__(
            label,
            f"its first bytes are {compression.name}'s but its name has no {compression.suffixes[0]}: "
            f"validate it (which reads it decompressed), or name it {compression.suffixes[0]}",
        )
        self.compression = compression

    def source_in(self, source: Source) -> Source:
        """``source`` read as the compressed file it is."""
        return replace(source, compression=self.compression)


class Prefixed(io.RawIOBase):
    """A stream whose first bytes were read already (to look at them), given back before the rest."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        super().__init__()
        self._head = memoryview(head)
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if not self._head:
            return self._rest.readinto(buffer)  # type: ignore[attr-defined]
        view = memoryview(buffer).cast("B")
        n = min(len(view), len(self._head))
        view[:n] = self._head[:n]
        self._head = self._head[n:]
        return n

    def close(self) -> None:
        if not self.closed:
            self._rest.close()
        super().close()


class Listed(io.RawIOBase):
    """Stored bytes held to the size they were listed with: reading their end after another count raises.

    The check is made where the end is read, by whichever reader reads it (a streamed scan, a
    copy), so no reader counts bytes or compares sizes itself; a reader that stops early (a
    copy at its limit) has nothing to say about the size.
    """

    def __init__(self, raw: Any, label: str, size: int, plain: bool = False) -> None:
        super().__init__()
        self.raw = raw
        self.label = label
        self.size = size
        self.count = 0
        self.plain = plain  # read as not compressed: its first bytes must say so too

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self.raw.readinto(buffer)
        if self.plain and self.count == 0 and n:
            found = detect(self.label, "", bytes(memoryview(buffer)[: min(n, MAGIC_BYTES)]))
            if found is not None:
                raise CompressedAfterAll(self.label, found)
        self.count += n
        if n == 0 and self.count != self.size and memoryview(buffer).nbytes:
            raise SourceError(
                self.label, f"it changed size while it was read ({self.size:,} bytes listed, {self.count:,} read)"
            )
        return n

    def close(self) -> None:
        if not self.closed:
            self.raw.close()
        super().close()
