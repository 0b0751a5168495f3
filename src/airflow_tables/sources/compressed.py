"""Compressed files: told by their first bytes, read as their decompressed bytes, never past a limit.

A landing zone's exports arrive as ``.csv.gz`` (or bzip2, xz, zstandard, a zip of one CSV).
:func:`detect` tells the format from the file's first bytes (its magic number), never from
its suffix alone: a ``.gz`` that is not gzip is refused, and a gzip file named ``.csv`` is
still read as gzip. :class:`Decompressed` is the stream of the decompressed bytes, read a
block at a time with the output of each step bounded, so that memory stays bounded and a
file that expands past the reader's limit (a "bomb") is stopped after ``limit`` bytes,
having decompressed nothing more.

Two traps other readers fall into are closed here: every member of a gzip file (``cat a.gz
b.gz``, what parallel compressors write) and every stream of a bzip2 or xz file is read, not
only the first; and a file cut short (a transfer that stopped, an archive still being
written) is an error naming the file and the offset of the compressed byte where it ended,
never a shorter table. A zip must hold exactly one file, read from a seekable copy (the zip's
directory is at its end).

This module knows nothing of where the bytes come from (:mod:`airflow_tables.sources` hands
it a stream) nor of CSV.
"""

from __future__ import annotations

import bz2
import contextlib
import importlib
import io
import lzma
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO, Protocol

from airflow_tables.sources.errors import SourceError

#: Compressed bytes read from the stored stream at a time.
READ_BLOCK = 256 * 1024


class _Decompressor(Protocol):
    """One member's (one stream's) decompressor, as the standard library's bz2 and lzma ones behave."""

    @property
    def eof(self) -> bool: ...
    @property
    def unused_data(self) -> bytes: ...
    @property
    def needs_input(self) -> bool: ...

    def decompress(self, data: bytes, max_length: int = -1) -> bytes: ...


@dataclass(frozen=True)
class Compression:
    """A compression format: its name, the suffixes its files carry, and the first bytes that tell it."""

    name: str
    suffixes: tuple[str, ...]
    magic: bytes
    #: A new decompressor for one member (stream, frame); None for a zip (read through ``zipfile``).
    member: Callable[[], _Decompressor] | None

    def matches(self, head: bytes) -> bool:
        """Whether ``head`` (a file's first bytes) begins a file of this format."""
        if not head.startswith(self.magic):
            return False
        if self.magic == b"BZh":  # three letters a CSV may begin with: the block size, then a block's magic
            return len(head) >= 10 and head[3:4] in b"123456789" and head[4:10] in _BZIP2_BLOCKS
        return True

    def strip_suffix(self, name: str) -> str:
        """``name`` without this format's suffix (``orders.csv.gz`` -> ``orders.csv``): what names the table."""
        lowered = name.lower()
        for suffix in self.suffixes:
            if lowered.endswith(suffix) and len(name) > len(suffix):
                return name[: -len(suffix)]
        return name


def _inflater() -> Any:
    """zlib-ng's decompressor when it is installed (twice zlib's speed here: benchmarks/NOTES.md), else zlib's."""
    try:
        from zlib_ng import zlib_ng
    except ImportError:
        return zlib
    return zlib_ng


class _Zlib:
    """zlib's decompressor for one gzip member, with the ``needs_input`` of bz2's and lzma's."""

    def __init__(self) -> None:
        self._d = _INFLATE.decompressobj(wbits=31)  # 16 + 15: a gzip header and trailer (its CRC-32 checked)
        self._tail = b""

    @property
    def eof(self) -> bool:
        return self._d.eof

    @property
    def unused_data(self) -> bytes:
        return self._d.unused_data

    @property
    def needs_input(self) -> bool:
        return not self._tail

    def decompress(self, data: bytes, max_length: int = -1) -> bytes:
        data = self._tail + data if self._tail else data
        out = self._d.decompress(data, max(0, max_length))
        self._tail = self._d.unconsumed_tail
        return out


def _zstd_module() -> Any:
    """Python 3.14's ``compression.zstd``, or its backport (a dependency below 3.14)."""
    for name in ("compression.zstd", "backports.zstd"):
        with contextlib.suppress(ImportError):
            return importlib.import_module(name)
    raise ImportError("reading zstandard needs Python 3.14 or the package backports.zstd")


def _zstd() -> _Decompressor:
    decompressor: _Decompressor = _zstd_module().ZstdDecompressor()
    return decompressor


def _format_errors() -> tuple[type[BaseException], ...]:
    """What the decompressors raise for bytes not valid in their format (zstandard's only when it is installed)."""
    errors: tuple[type[BaseException], ...] = (OSError, EOFError, ValueError, lzma.LZMAError, zlib.error)
    with contextlib.suppress(ImportError):  # no decoder: a .zst file is refused before this is asked
        errors += (_zstd_module().ZstdError,)
    return errors


#: What follows a bzip2 stream's header: a block's magic (pi), or the end of an empty stream's (sqrt(pi)).
_BZIP2_BLOCKS = (b"\x31\x41\x59\x26\x53\x59", b"\x17\x72\x45\x38\x50\x90")
_INFLATE = _inflater()
_FORMAT_ERRORS = _format_errors()
GZIP = Compression("gzip", (".gz", ".gzip"), b"\x1f\x8b", _Zlib)
BZIP2 = Compression("bzip2", (".bz2",), b"BZh", bz2.BZ2Decompressor)
XZ = Compression("xz", (".xz",), b"\xfd7zXZ\x00", lambda: lzma.LZMADecompressor(lzma.FORMAT_XZ))
ZSTD = Compression("zstandard", (".zst", ".zstd"), b"\x28\xb5\x2f\xfd", _zstd)
ZIP = Compression("zip", (".zip",), b"PK\x03\x04", None)
FORMATS = (GZIP, BZIP2, XZ, ZSTD, ZIP)
#: The most first bytes :func:`detect` needs (bzip2's header and its first block's magic).
MAGIC_BYTES = 10


def detect(label: str, name: str, head: bytes) -> Compression | None:
    """The format ``head`` (a file's first bytes) is compressed in; ``None`` for bytes that are not compressed.

    Raises :class:`SourceError` for a file whose suffix names a format its bytes are not in: the
    user expects it decompressed, and reading it as it is would import the bytes of something else.
    """
    for compression in FORMATS:
        if compression.matches(head):
            return compression
    lowered = name.lower()
    for compression in FORMATS:
        if any(lowered.endswith(suffix) for suffix in compression.suffixes):
            raise SourceError(
                label,
                f"it is named like a {compression.name} file but its first bytes are not {compression.name}'s "
                f"({head[:MAGIC_BYTES]!r}); rename it, or compress it as its name says",
            )
    return None


class _Counted(io.RawIOBase):
    """The stored stream, counting the compressed bytes read from it (to name where a file ended)."""

    def __init__(self, raw: BinaryIO) -> None:
        self._raw = raw
        self.read_bytes = 0

    def readable(self) -> bool:
        return True

    def read_block(self) -> bytes:
        block = self._raw.read(READ_BLOCK)
        self.read_bytes += len(block)
        return block

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()


class Decompressed(io.RawIOBase):
    """The decompressed bytes of a stored stream in ``compression``, every member of it, at most ``limit`` + 1.

    ``limit`` (bytes, ``None``: none) is the reader's own: once more than ``limit`` bytes came
    out, reading stops, having decompressed one byte past it (the reader sees a file larger
    than its limit, and ``over_limit`` is set), so a file that expands a thousandfold costs
    what its first ``limit`` bytes cost. A file cut short, or whose bytes are not valid in
    the format, raises :class:`SourceError` naming ``label`` and the compressed offset.
    """

    def __init__(self, raw: BinaryIO, compression: Compression, label: str, limit: int | None = None) -> None:
        if compression.member is None:
            raise ValueError("a zip is read with open_zip_member, from a seekable file")
        self._raw = _Counted(raw)
        self._compression = compression
        self._label = label
        self._limit = limit
        try:
            self._member: _Decompressor | None = compression.member()
        except ImportError as err:  # the format's decoder is not installed: say so, naming the file
            raise SourceError(label, f"{err}; nothing was sent") from None
        self._members = 1
        self._pending = b""  # compressed bytes read, not yet given to a decompressor
        self._ended = False
        self.written = 0
        self.over_limit = False

    @property
    def members(self) -> int:
        """Members (gzip), streams (bzip2, xz) or frames (zstandard) begun so far."""
        return self._members

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        if self._ended or not len(view):
            return 0
        wanted = len(view)
        if self._limit is not None:
            wanted = min(wanted, self._limit + 1 - self.written)
            if wanted <= 0:
                self._stop_at_limit()
                return 0
        while True:
            out = self._step(wanted)
            if out:
                view[: len(out)] = out
                self.written += len(out)
                if self._limit is not None and self.written > self._limit:
                    self._stop_at_limit()
                return len(out)
            if self._ended:
                return 0

    def _step(self, wanted: int) -> bytes:
        """Up to ``wanted`` decompressed bytes; ``b""`` when more input was needed (read) or the file ended."""
        if self._member is not None and self._member.eof:  # between two members: what follows begins the next
            self._pending = self._member.unused_data + self._pending
            self._member = None
        if self._member is None:
            data = self._pending or self._raw.read_block()
            self._pending = b""
            if not data:
                self._ended = True
                return b""
            if self._compression is XZ or self._compression is GZIP:
                data = data.lstrip(b"\0")  # stream padding (xz) and the zeros some writers leave after a gzip
                if not data:
                    return b""
            self._member = self._compression.member()  # type: ignore[misc]
            self._members += 1
        elif self._member.needs_input:
            data = self._pending or self._raw.read_block()
            self._pending = b""
            if not data:
                raise self._error("it ends in the middle of its compressed data (cut short?)")
        else:
            data = b""
        try:
            return self._member.decompress(data, wanted)
        except (*_FORMAT_ERRORS, _INFLATE.error) as err:
            raise self._error(f"its {self._compression.name} data is not valid ({err})") from None

    def _stop_at_limit(self) -> None:
        self.over_limit = True
        self._ended = True

    def _error(self, reason: str) -> SourceError:
        where = f"compressed byte {self._raw.read_bytes:,}"
        member = f", member {self._members}" if self._members > 1 else ""
        return SourceError(self._label, f"{reason}, at or before {where}{member}; nothing was sent")

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()


def open_zip_member(file: BinaryIO, label: str) -> tuple[str, BinaryIO]:
    """The one CSV a zip holds (its name, and its decompressed bytes), from a seekable ``file``.

    Refused, naming what the zip holds: a zip of no file, of several (which one would be the
    table?), of one that is not a ``.csv``, an encrypted one, or one that is not a valid zip
    (cut short: its directory is at its end). The folders and the metadata files macOS's
    archiver adds (``__MACOSX/``, ``.DS_Store``) are not files of the zip's.
    """
    try:
        archive = zipfile.ZipFile(file)
        members = [info for info in archive.infolist() if not info.is_dir() and not _metadata(info.filename)]
    except (zipfile.BadZipFile, EOFError, OSError) as err:
        raise SourceError(label, f"it is not a valid zip file ({err}): cut short, or not a zip") from None
    if len(members) != 1 or not members[0].filename.lower().endswith(".csv"):
        names = ", ".join(info.filename for info in members[:5]) + (", ..." if len(members) > 5 else "")
        office = any(info.filename.startswith(("xl/", "word/", "ppt/")) for info in members)
        what = " (an Office document, not a zip of a CSV: save it as CSV from its program)" if office else ""
        files = f"{len(members)} file{'s' if len(members) != 1 else ''}"
        holds = f"{files} ({names or 'none'}){what}"
        raise SourceError(label, f"a zip must hold exactly one .csv file to import, and this one holds {holds}")
    info = members[0]
    if info.flag_bits & 0x1:
        raise SourceError(label, f"{info.filename} in the zip is encrypted")
    try:
        return info.filename.rsplit("/", 1)[-1], archive.open(info)  # type: ignore[return-value]
    except (zipfile.BadZipFile, NotImplementedError, RuntimeError) as err:
        raise SourceError(label, f"{info.filename} in the zip cannot be read ({err})") from None


def _metadata(name: str) -> bool:
    """A file an archiver adds beside the user's (macOS's resource forks and folder settings)."""
    return name.startswith("__MACOSX/") or name.rsplit("/", 1)[-1] == ".DS_Store"


__all__ = [
    "BZIP2",
    "FORMATS",
    "GZIP",
    "MAGIC_BYTES",
    "XZ",
    "ZIP",
    "ZSTD",
    "Compression",
    "Decompressed",
    "detect",
    "open_zip_member",
]
