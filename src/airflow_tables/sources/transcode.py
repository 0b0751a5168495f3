"""Declared encodings: which codec a name means, and converting its bytes to UTF-8 as they are read.

The service reads UTF-8. A file in another encoding is converted block by block while
it is read, never held whole: :class:`Converter` turns successive blocks of the source
into UTF-8 (a character split between two blocks is carried over), and :class:`Utf8Reader`
is the binary stream of the result, for the upload and the validator alike.

Single-byte code pages (Windows-1252, Latin-1, ISO 8859-x, KOI8-R, EBCDIC...) go through a
256-entry table applied by the C kernel ``airflow_tables.sources._transcode`` (much faster than
Python's codecs, measured in ``benchmarks/sources.py``);
every other codec (UTF-16, Shift JIS, GB18030...) through Python's incremental decoders.
A byte the encoding does not define becomes U+FFFD and the first one is remembered
(:attr:`Converter.first_error`): the validator reports it with its line, and the hook
refuses to send the file.
"""

from __future__ import annotations

import codecs
import io
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import BinaryIO

from airflow_tables.sources.read_ahead import ReadAhead

_transcode: ModuleType | None
try:
    # A compiled module: no stub, so the checker does not know it (see setup.py).
    from airflow_tables.sources import _transcode  # type: ignore[attr-defined,no-redef]
except ImportError:  # not built here (no C compiler at install time): Python's codecs do it
    _transcode = None

#: Codec names that mean "UTF-8 as it is": nothing to convert, today's UTF-8 rules apply.
UTF8_CODECS = frozenset({"utf-8", "utf-8-sig"})
#: How much of the source is converted at a time (with its conversion, it stays in the CPU's cache).
BLOCK_BYTES = 256 * 1024
_REPLACEMENT = "\ufffd".encode()
_UNDEFINED = 0x80
#: Codecs that need a byte-order mark to tell their byte order, and how many first bytes show it without one.
_MARKED = ("utf-16", "utf-32")
_ORDER_SAMPLE = 64


@dataclass(frozen=True)
class Codec:
    """A declared text encoding other than UTF-8.

    ``name`` is Python's canonical name (``cp1252``, ``iso8859-1``, ``utf-16``); ``table``
    is set for single-byte code pages (each byte's UTF-8, see ``_transcode.c``).
    """

    name: str
    table: bytes | None = None
    ascii_same: bool = False


def declared(encoding: str | None) -> Codec | None:
    """The codec ``encoding`` names, or None for UTF-8 (the file is sent as it is).

    Raises :class:`ValueError` for a name Python does not know, or one that is not a
    text encoding (``base64``, ``rot13``): a mistake in the DAG, not in the file.
    """
    if encoding is None:
        return None
    try:
        info = codecs.lookup(encoding)
    except LookupError:
        raise ValueError(
            f"unknown encoding {encoding!r}: pass a Python codec name such as 'cp1252', 'latin-1' or 'utf-16'"
        ) from None
    if not getattr(info, "_is_text_encoding", True):
        raise ValueError(f"{encoding!r} is not a text encoding: pass a codec such as 'cp1252', 'latin-1' or 'utf-16'")
    if info.name in UTF8_CODECS:
        return None
    table = _single_byte_table(info)
    ascii_same = table is not None and all(table[4 * b : 4 * b + 4] == bytes([b, 0, 0, 1]) for b in range(128))
    return Codec(info.name, table, ascii_same)


def _single_byte_table(info: codecs.CodecInfo) -> bytes | None:
    """Each byte's UTF-8 (4 bytes an entry, see ``_transcode.c``), when the codec is a single-byte code page.

    A codec is one when Python generated it from a decoding table (``encodings.cp1252`` and
    its kind), or when it is Latin-1 or ASCII; each byte is then decoded on its own.
    """
    module = sys.modules.get(getattr(info.incrementaldecoder, "__module__", ""))
    if info.name not in ("iso8859-1", "ascii") and not hasattr(module, "decoding_table"):
        return None
    entries = []
    for byte in range(256):
        try:
            utf8 = bytes([byte]).decode(info.name).encode()
            flag = 0
        except UnicodeDecodeError:
            utf8, flag = _REPLACEMENT, _UNDEFINED
        if len(utf8) > 3:
            return None  # not a code page of the Basic Multilingual Plane: the general path
        entries.append(utf8.ljust(3, b"\0") + bytes([len(utf8) | flag]))
    return b"".join(entries)


def counts_natively(codec: Codec) -> bool:
    """Whether :func:`count_single_byte` counts this codec: a single-byte code page, with the C kernel built."""
    return _transcode is not None and codec.table is not None


def count_single_byte(codec: Codec, block: bytes | memoryview) -> tuple[int, bool]:
    """UTF-8 bytes ``block`` becomes, and whether a byte of it is undefined (:func:`counts_natively` codecs).

    A single-byte code page needs no state between blocks, so blocks of one file may be
    counted at once on several threads (the kernel releases the GIL).
    """
    assert _transcode is not None and codec.table is not None  # counts_natively(codec)
    written, bad = _transcode.single_byte_to_utf8(block, codec.table, codec.ascii_same, None)
    return written, bad >= 0


@dataclass(frozen=True)
class DecodeError:
    """The first bytes that are not valid in the declared encoding, and where they are."""

    source_offset: int  # in the file as stored
    output_offset: int  # in its UTF-8 conversion (where the U+FFFD stands)
    bad: bytes


@dataclass(frozen=True)
class Undecodable:
    """A :class:`DecodeError` located by line, in words: what validation reports as an ``encoding`` problem."""

    line: int
    encoding: str
    offset: int  # in the file as stored
    bad: bytes  # for a missing byte-order mark, the file's first bytes (they show its order)

    def describe(self) -> str:
        """What is wrong and what to do, without the line (a report gives the line apart)."""
        shown = " ".join(f"0x{b:02X}" for b in self.bad[:4])
        many = len(self.bad) > 1
        if self.encoding in _MARKED and self.offset == 0:
            # Without a mark Python's "utf-16" decodes nothing at all (offset 0): the file needs its order named.
            order = byte_order(self.encoding, self.bad)
            declare = (
                f"encoding='{self.encoding}-{order}'"
                if order
                else f"encoding='{self.encoding}-le' or encoding='{self.encoding}-be', whichever it was written in"
            )
            reads = f"; its bytes ({shown}) read as {_ENDIAN[order]}" if order else ""
            return (
                f"the file has no byte-order mark, which {self.encoding} needs to tell its byte order{reads}. "
                f"Declare {declare}."
            )
        return (
            f"byte{'s' if many else ''} {shown} (offset {self.offset:,}) {'are' if many else 'is'} not valid "
            f"{self.encoding}: the file was written in another encoding, or is damaged. Declare the encoding it "
            "was written in (encoding=...)."
        )

    def __str__(self) -> str:
        return f"line {self.line}: {self.describe()}"


class Converter:
    """Converts a source's successive blocks to UTF-8, carrying characters split between blocks."""

    def __init__(self, codec: Codec) -> None:
        self.codec = codec
        self.consumed = 0  # source bytes converted so far
        self.produced = 0  # UTF-8 bytes produced so far
        self.first_error: DecodeError | None = None
        self._kernel = _transcode if codec.table is not None else None
        self._native = self._kernel is not None
        self._decoder = None if self._native else codecs.getincrementaldecoder(codec.name)("strict")
        self._target = bytearray()

    def convert(self, block: bytes | memoryview, final: bool = False) -> memoryview:
        """The UTF-8 of ``block``; valid until the next call (the buffer is reused)."""
        out = self._native_convert(block) if self._native else memoryview(self._decode(bytes(block), final).encode())
        self.consumed += len(block)
        self.produced += len(out)
        return out

    def count(self, block: bytes | memoryview, final: bool = False) -> int:
        """How many UTF-8 bytes ``block`` becomes, without keeping them (a size pass)."""
        if self._native:
            written, bad = self._single_byte(block, None)
            self._note_native(block, bad)
            self.consumed += len(block)
            self.produced += written
            return written
        return len(self.convert(block, final))

    def _native_convert(self, block: bytes | memoryview) -> memoryview:
        if len(self._target) < 3 * len(block):
            self._target = bytearray(3 * len(block))
        written, bad = self._single_byte(block, self._target)
        self._note_native(block, bad)
        return memoryview(self._target)[:written]

    def _single_byte(self, block: bytes | memoryview, target: bytearray | None) -> tuple[int, int]:
        """The C kernel for a single-byte code page: (UTF-8 bytes written or counted, first bad byte or -1)."""
        assert self._kernel is not None  # only called when _native
        return self._kernel.single_byte_to_utf8(block, self.codec.table, self.codec.ascii_same, target)

    def _note_native(self, block: bytes | memoryview, bad: int) -> None:
        if bad >= 0 and self.first_error is None:
            before, _ = self._single_byte(block[:bad], None)
            self.first_error = DecodeError(self.consumed + bad, self.produced + before, bytes(block[bad : bad + 1]))

    def _decode(self, data: bytes, final: bool) -> str:
        decoder = self._decoder
        assert decoder is not None  # set whenever the native kernel is not used
        state = decoder.getstate()
        try:
            text = decoder.decode(data, final)
        except UnicodeDecodeError as err:
            # Note the first error, then decode the block again with every bad byte replaced.
            pending = state[0] if isinstance(state[0], bytes) else b""
            decoder.setstate(state)
            decoder.errors = "replace"
            good = (pending + data)[: err.start][len(pending) :]
            try:
                before = decoder.decode(good, False) if good else ""
                decoder.setstate(state)
                text = decoder.decode(data, final)
            except UnicodeError:  # UTF-32 with no mark and bad bytes first: its decoder refuses even "replace"
                return _strip_bom(self._read_without_mark(data, final), self)
            if self.first_error is None:
                bad = (pending + data)[err.start : err.end]
                offset = self.consumed - len(pending) + err.start
                self.first_error = DecodeError(offset, self.produced + len(_strip_bom(before, self).encode()), bad)
        except UnicodeError:
            text = self._read_without_mark(data, final)
        return _strip_bom(text, self)

    def _read_without_mark(self, data: bytes, final: bool) -> str:
        """ "utf-16" and "utf-32" need a byte-order mark to start with: noted as an error, read on in the order
        the first bytes show (little-endian when they show none), so the rest of the report still makes sense."""
        if self.first_error is None:
            self.first_error = DecodeError(self.consumed, self.produced, data[:_ORDER_SAMPLE])
        order = byte_order(self.codec.name, data) or "le"
        self._decoder = codecs.getincrementaldecoder(f"{self.codec.name}-{order}")("replace")
        return self._decoder.decode(data, final)


_ENDIAN = {"le": "little-endian", "be": "big-endian", None: ""}


def byte_order(name: str, head: bytes) -> str | None:
    """``"le"`` or ``"be"``: the byte order of UTF-16 or UTF-32 text without a mark, from its first bytes.

    Text (a CSV's separators, digits, line breaks) is mostly characters whose high byte is
    zero, so the zeros fall on one side of each unit; None when the bytes do not show it.
    """
    width = 4 if name.startswith("utf-32") else 2
    sample = head[: _ORDER_SAMPLE - _ORDER_SAMPLE % width]
    low_zeros, high_zeros = sample[0::width].count(0), sample[width - 1 :: width].count(0)
    if high_zeros > low_zeros:
        return "le"
    if low_zeros > high_zeros:
        return "be"
    return None


def _strip_bom(text: str, converter: Converter) -> str:
    # A byte-order mark the codec kept (utf-16-le on a file that has one) is not data.
    return text[1:] if converter.produced == 0 and text.startswith("\ufeff") else text


class Utf8Reader(io.RawIOBase):
    """The UTF-8 conversion of a binary stream in a declared encoding, as a binary stream of its own.

    The source is read into one reused buffer and converted into another, both small enough
    to stay in the CPU's cache (a new 1 MiB ``bytes`` a read, converted into 3 MiB, made the
    conversion slower; the converted send is measured in ``benchmarks/sources.py``). A source
    that reads ahead on a thread of its own (:class:`.ReadAhead`) is converted from its pieces,
    without a copy into that buffer: its read overlaps the conversion and the send.
    """

    def __init__(self, raw: BinaryIO, codec: Codec, block_size: int = BLOCK_BYTES) -> None:
        super().__init__()
        self.raw = raw
        self.converter = Converter(codec)
        self._block = bytearray(block_size)
        self._pending = memoryview(b"")
        self._eof = False
        self._position = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # noqa: ANN001 - any writable buffer, as io's own
        while not self._pending and not self._eof:
            n = self.raw.readinto(self._block)  # type: ignore[attr-defined]  # every opener gives a raw or buffered reader
            self._eof = not n
            self._pending = self.converter.convert(memoryview(self._block)[:n], final=self._eof)
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        self._position += n
        return n

    def blocks(self) -> Iterator[memoryview]:
        """The conversion a block at a time, each view valid until the next is asked for.

        For a reader that only passes the bytes on (the upload): it saves copying them into
        its buffer first (a large share of the converted upload, measured in ``benchmarks/upload.py``).
        """
        if self._pending:  # what an earlier readinto() left over
            self._position += len(self._pending)
            yield self._pending
            self._pending = memoryview(b"")
        if isinstance(self.raw, ReadAhead):  # its pieces are converted where they are: no copy into ours
            for piece in self.raw.pieces():
                out = self.converter.convert(piece)
                self._position += len(out)
                if out:
                    yield out
            self._eof = True
            out = self.converter.convert(b"", final=True)
            self._position += len(out)
            if out:
                yield out
            return
        while not self._eof:
            n = self.raw.readinto(self._block)  # type: ignore[attr-defined]  # every opener gives a raw or buffered reader
            self._eof = not n
            out = self.converter.convert(memoryview(self._block)[:n], final=self._eof)
            self._position += len(out)
            if out:
                yield out

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        """Only to where the stream already is: it cannot go back or skip ahead."""
        if (whence, offset) not in ((io.SEEK_SET, self._position), (io.SEEK_CUR, 0)):
            raise io.UnsupportedOperation("a converted stream is read from start to end")
        return self._position

    def close(self) -> None:
        if not self.closed:
            self.raw.close()
        super().close()
