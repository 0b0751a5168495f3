"""The import request's multipart body, streamed straight into the data directory.

Why not Starlette's ``request.form()``: it spools the file to a temporary
directory (then it must be copied into the data directory, another 512 MiB), and
python-multipart's byte-level parser doubles the time of a 512 MiB upload. The
format is simple enough to cut with ``bytes.find`` a network chunk at a time, so
the process's memory never holds more than one chunk of the file, and a file
over the limit is counted, not kept.

The parser never raises in the middle of a body: it notes the first problem and
goes on reading, so the caller can always answer with a proper response instead
of leaving the client's upload half-sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from python_multipart.multipart import parse_options_header

MAX_HEADER_BYTES = 16 * 1024
MAX_FIELD_BYTES = 64 * 1024


def base_name(filename: str) -> str:
    """The file name a client sent, without any directory part (``../../x.csv`` and ``C:\\x\\y.csv`` alike).

    RFC 7578 (4.2) lets a client send a path and tells the receiver to keep only its last
    part; the table is named after it, so no path ever reaches a CardName.
    """
    return re.split(r"[\\/]", filename)[-1]


@dataclass
class FilePart:
    """The ``File`` part as received: what the client called it (its base name) and how big it was."""

    filename: str
    content_type: str | None
    size: int = 0
    path: Path | None = None  # None when the bytes were not kept (too large, or not wanted)
    too_large: bool = False


@dataclass
class ImportForm:
    """The fields of an import request, and the first thing wrong with its encoding, if any."""

    fields: dict[str, str] = field(default_factory=dict)
    file: FilePart | None = None
    file_parts: int = 0
    problem: str | None = None

    def discard(self) -> None:
        """Remove the received file (the request was refused)."""
        if self.file is not None and self.file.path is not None:
            self.file.path.unlink(missing_ok=True)
            self.file.path = None


def boundary_of(content_type: str | None) -> bytes | None:
    """The boundary of a ``multipart/form-data`` Content-Type, or None if it is not one."""
    if not content_type:
        return None
    kind, params = parse_options_header(content_type)
    if kind != b"multipart/form-data" or not params.get(b"boundary"):
        return None
    return params[b"boundary"]


class FormParser:
    """Feed the body chunk by chunk; the ``File`` part goes to ``file_path`` (if given), up to ``max_bytes``."""

    def __init__(self, boundary: bytes, *, file_field: str, file_path: Path | None, max_bytes: int) -> None:
        self.form = ImportForm()
        self._separator = b"\r\n--" + boundary
        self._file_field = file_field
        self._file_path = file_path
        self._max_bytes = max_bytes
        # The first boundary has no line break before it; lending it one makes the
        # preamble just another part whose bytes are dropped.
        self._buf = b"\r\n"
        self._state = "data"
        self._sink: BinaryIO | bytearray | None = None  # an open file, a text field's bytes, or discard
        self._part_name: str | None = None

    def feed(self, chunk: bytes) -> None:
        self._buf = self._buf + chunk if self._buf else chunk
        while self._buf:
            if self._state == "data":
                if not self._data():
                    return
            elif self._state == "after":
                if len(self._buf) < 2:
                    return
                if self._buf.startswith(b"--"):
                    self._state, self._buf = "end", b""
                else:
                    line_end = self._buf.find(b"\r\n")  # transport padding may precede it
                    if line_end == -1:
                        return
                    self._buf = self._buf[line_end + 2 :]
                    self._state = "headers"
            elif self._state == "headers":
                if not self._headers():
                    return
            else:  # the epilogue after the closing boundary is ignored
                self._buf = b""

    def finish(self) -> ImportForm:
        """Close the body; note a body that ended before its closing boundary."""
        if self._state != "end":
            self._problem("the multipart body ended before its closing boundary (the upload was cut short)")
        self._close_part()
        return self.form

    def abort(self) -> None:
        """Stop mid-body (the client went away): close and remove whatever was received."""
        self._close_sink()
        self.form.discard()

    def _data(self) -> bool:
        at = self._buf.find(self._separator)
        if at == -1:
            keep = len(self._separator) - 1  # the separator may straddle two chunks
            if len(self._buf) > keep:
                self._write(self._buf[:-keep])
                self._buf = self._buf[-keep:]
            return False
        self._write(self._buf[:at])
        self._close_part()
        self._buf = self._buf[at + len(self._separator) :]
        self._state = "after"
        return True

    def _headers(self) -> bool:
        end = self._buf.find(b"\r\n\r\n")
        if end == -1:
            if len(self._buf) > MAX_HEADER_BYTES:
                self._problem("a part's headers run on for more than 16 KiB")
                self._state, self._buf = "end", b""
            return False
        headers: dict[str, str] = {}
        for line in self._buf[:end].split(b"\r\n"):
            name, _, value = line.partition(b":")
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("utf-8", "replace")
        self._buf = self._buf[end + 4 :]
        self._state = "data"
        self._open_part(headers)
        return True

    def _open_part(self, headers: dict[str, str]) -> None:
        _, params = parse_options_header(headers.get("content-disposition", ""))
        name = params.get(b"name", b"").decode("utf-8", "replace")
        self._part_name = name
        if name == self._file_field:
            self.form.file_parts += 1
            if self.form.file_parts > 1:
                self._problem(f"the request has more than one {self._file_field} part; send exactly one")
                self._sink = None
                return
            raw = params.get(b"filename")
            self.form.file = FilePart(
                filename=base_name(raw.decode("utf-8", "replace")) if raw is not None else "",
                content_type=headers.get("content-type"),
            )
            if self._file_path is not None:
                self.form.file.path = self._file_path
                self._sink = open(self._file_path, "wb")  # noqa: SIM115 - closed in _close_part
            else:
                self._sink = None
        elif name in self.form.fields:
            self._problem(f"the field {name} is sent twice; send it once")
            self._sink = None
        else:
            self._sink = bytearray()

    def _write(self, data: bytes) -> None:
        if not data:
            return
        if self._part_name == self._file_field and self.form.file is not None and self.form.file_parts == 1:
            part = self.form.file
            part.size += len(data)
            if part.size > self._max_bytes and not part.too_large:
                part.too_large = True
                self._close_sink()
                self.form.discard()
            if part.too_large:
                return
        if isinstance(self._sink, bytearray):
            if len(self._sink) + len(data) > MAX_FIELD_BYTES:
                self._problem(f"the field {self._part_name} is longer than 64 KiB")
                self._sink = None
                return
            self._sink += data
        elif self._sink is not None:
            self._sink.write(data)

    def _close_part(self) -> None:
        if isinstance(self._sink, bytearray) and self._part_name:
            self.form.fields[self._part_name] = self._sink.decode("utf-8", "replace")
        self._close_sink()
        self._part_name = None

    def _close_sink(self) -> None:
        if self._sink is not None and not isinstance(self._sink, bytearray):
            self._sink.close()
        self._sink = None

    def _problem(self, message: str) -> None:
        if self.form.problem is None:
            self.form.problem = message
