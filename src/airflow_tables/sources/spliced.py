"""A local file with parts left out, read as one file: the good rows of a file whose bad rows were set aside.

A quarantine sends a file's good rows: its bytes with the bad records' cut out. Writing them to
a copy first would cost a write of the whole file and a read of that copy (the page cache is
filled twice); the service receives the same bytes when the file's own kept ranges are read one
after the other. :func:`spliced_source` is that file as a :class:`~airflow_tables.sources.Source`
(sent by the hook like any other); :func:`write_spliced` makes a real copy for the few readers
that need a path (a Great Expectations suite, the ``skip_if_unchanged`` fingerprint).
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


class SplicedReader(io.RawIOBase):
    """The ``kept`` ranges of the local file ``path``, in order, read as one stream (one ``pread`` a range)."""

    def __init__(self, path: str, kept: Sequence[Kept]) -> None:
        super().__init__()
        self._fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        self._kept = kept
        self._next = 0  # the kept range to read from next
        self._offset = self._left = 0  # where in the file, and how much is left of that range

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        filled, kept = 0, self._kept
        while filled < len(view):
            if not self._left:
                if self._next == len(kept):
                    break
                self._offset, self._left = kept[self._next]
                self._next += 1
            want = min(self._left, len(view) - filled)
            got = os.preadv(self._fd, [view[filled : filled + want]], self._offset)
            if not got:  # the file is shorter than when it was sorted: the sender notices the size
                self._left, self._next = 0, len(kept)
                break
            filled += got
            self._offset += got
            self._left -= got
        return filled

    def close(self) -> None:
        if not self.closed:
            os.close(self._fd)
        super().close()


def spliced_source(source: Source, kept: Sequence[Kept]) -> Source:
    """``source`` (a local file) as the ``kept`` ranges of it: what a reader of the :class:`Source` receives."""
    assert source.local_path is not None and source.codec is None, "a spliced source is a local UTF-8 file"
    return dataclasses.replace(
        source,
        stored_size=sum(length for _, length in kept),
        local_path=None,
        opener=cast("functools.partial[BinaryIO]", functools.partial(SplicedReader, source.local_path, tuple(kept))),
        copy_scan=None,
        version=None,
    )


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
