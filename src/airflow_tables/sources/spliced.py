"""Local files' byte ranges read as one file: the good rows of a file whose bad rows were set aside, or many parts.

A quarantine sends a file's good rows: its bytes with the bad records' cut out. Writing them to
a copy first would cost a write of the whole file and a read of that copy (the page cache is
filled twice); the service receives the same bytes when the file's own kept ranges are read one
after the other. :func:`spliced_source` is that file as a :class:`~airflow_tables.sources.Source`
(sent by the hook like any other); :func:`write_spliced` makes a real copy for the few readers
that need a path (a Great Expectations suite, the ``skip_if_unchanged`` fingerprint). The parts
of ``combine=`` are read the same way, each part's data rows a range of its own file
(:mod:`airflow_tables.validation.combine`).
"""

from __future__ import annotations

import dataclasses
import functools
import io
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from typing import BinaryIO

    from airflow_tables.sources import Source

#: A kept range of the file: (offset, length).
Kept = tuple[int, int]
#: A piece of a spliced stream: a range ``(path, offset, length)`` of a local file, or bytes as they are.
Piece = tuple[str, int, int] | bytes


class SplicedReader(io.RawIOBase):
    """``pieces`` read in order as one stream: ranges of local files (one ``pread`` a range) and literal bytes.

    The first piece's file is opened at once (a file gone before the read fails here); the others
    as the stream reaches them, one open at a time.
    """

    def __init__(self, pieces: Sequence[Piece]) -> None:
        super().__init__()
        self._pieces = pieces
        self._next = 0  # the piece to read from next
        self._fd: int | None = None
        self._path: str | None = None
        self._offset = self._left = 0  # where in the file, and how much is left of that range
        self._literal = memoryview(b"")
        if pieces and not isinstance(pieces[0], bytes):
            self._open(pieces[0][0])

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        filled, pieces = 0, self._pieces
        while filled < len(view):
            if self._literal:
                n = min(len(self._literal), len(view) - filled)
                view[filled : filled + n] = self._literal[:n]
                self._literal = self._literal[n:]
                filled += n
                continue
            if not self._left:
                if self._next == len(pieces):
                    break
                piece = pieces[self._next]
                self._next += 1
                if isinstance(piece, bytes):
                    self._literal = memoryview(piece)
                    continue
                path, self._offset, self._left = piece
                if path != self._path:
                    self._open(path)
            assert self._fd is not None
            want = min(self._left, len(view) - filled)
            got = os.preadv(self._fd, [view[filled : filled + want]], self._offset)
            if not got:  # a file is shorter than when it was read: the sender notices the size
                self._left, self._next = 0, len(pieces)
                break
            filled += got
            self._offset += got
            self._left -= got
        return filled

    def _open(self, path: str) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self._fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        self._path = path

    def close(self) -> None:
        if not self.closed and self._fd is not None:
            os.close(self._fd)
            self._fd = None
        super().close()


def spliced_source(source: Source, kept: Sequence[Kept]) -> Source:
    """``source`` (a local file) as the ``kept`` ranges of it: what a reader of the :class:`Source` receives."""
    assert source.local_path is not None and source.codec is None, "a spliced source is a local UTF-8 file"
    return dataclasses.replace(
        source,
        stored_size=sum(length for _, length in kept),
        local_path=None,
        opener=cast(
            "functools.partial[BinaryIO]", functools.partial(SplicedReader, ranges_of(source.local_path, kept))
        ),
        copy_scan=None,
        version=None,
    )


def pieces_source(name: str, pieces: Sequence[Piece]) -> Source:
    """``pieces`` as one file named ``name`` (a Source that :class:`SplicedReader` reads)."""
    from airflow_tables.sources import Source

    size = sum(map(piece_size, pieces))
    opener = cast("functools.partial[BinaryIO]", functools.partial(SplicedReader, tuple(pieces)))
    return Source(name, name, size, None, None, opener)


def piece_size(piece: Piece) -> int:
    """How many bytes a piece reads."""
    return len(piece) if isinstance(piece, bytes) else piece[2]


def ranges_of(path: str, kept: Sequence[Kept]) -> tuple[Piece, ...]:
    """The pieces of :class:`SplicedReader` that read the ``kept`` ranges of ``path``."""
    return tuple((path, offset, length) for offset, length in kept)


def write_spliced(path: str, kept: Sequence[Kept], target: str) -> None:
    """Copy the ``kept`` ranges of ``path`` to a new file ``target`` (in the kernel, where it can)."""
    with open(path, "rb") as src, open(target, "xb", buffering=0) as dst:
        for offset, length in kept:
            _copy_range(src, dst, offset, length)


def _copy_range(src: BinaryIO, dst: BinaryIO, offset: int, length: int) -> None:
    while length > 0:
        try:
            copied = os.copy_file_range(src.fileno(), dst.fileno(), length, offset)
        except (AttributeError, OSError):  # not on this system or file system: through a buffer
            src.seek(offset)
            while length > 0:
                block = src.read(min(length, 1024 * 1024))
                if not block:
                    raise OSError(f"{src.name} became shorter while its good rows were copied") from None
                dst.write(block)
                length -= len(block)
            return
        if not copied:
            raise OSError(f"{src.name} became shorter while its good rows were copied")
        offset += copied
        length -= copied
