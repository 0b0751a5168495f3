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

It is served on networks, so what it keeps is bounded whatever a client sends: at
most :data:`MAX_PARTS` parts, :data:`MAX_FIELD_BYTES` per text field and
:data:`MAX_HEADER_BYTES` of headers per part (the padding after a boundary
included); past a bound it notes the problem and drops the rest. Each byte is
searched once, so a body that never breaks its lines costs linear time, not
quadratic. The body as a whole is capped by the caller (:func:`body_limit`).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

#: The headers of one part, with any transport padding after its boundary.
MAX_HEADER_BYTES = 16 * 1024
#: One text field (ProjectID and CardID are a few dozen bytes).
MAX_FIELD_BYTES = 64 * 1024
#: Parts of one form: an import has three at most (ProjectID, CardID, File).
MAX_PARTS = 16
#: What a body may hold beyond the file: every part's headers and fields, with room to spare.
BODY_ALLOWANCE = 2 * 1024**2

_PARAM = re.compile(rb';\s*([^\s=;]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;]*)', re.DOTALL)
_ESCAPE = re.compile(rb"\\(.)", re.DOTALL)


def body_limit(max_bytes: int) -> int:
    """The most bytes an import body may have: the file limit plus :data:`BODY_ALLOWANCE`."""
    return max_bytes + BODY_ALLOWANCE


def _text(raw: bytes) -> str:
    """A header parameter as text: UTF-8 (RFC 7578), or Latin-1 from an older client that did not encode it."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def header_params(value: bytes) -> dict[str, str]:
    """The parameters of a ``Content-Disposition`` or ``Content-Type`` header, names lower-cased, UTF-8 kept.

    Why not python-multipart's ``parse_options_header``: it reads the header as Latin-1, so
    ``売上.csv`` cannot be encoded back (a 500) and ``données.csv`` became ``donn\ufffdes.csv``;
    and it drops ``filename*`` (RFC 5987), which some clients send for a non-ASCII name. A
    ``filename*`` wins over ``filename``, its fallback (RFC 6266).
    """
    params: dict[str, str] = {}
    for raw_key, raw_value in _PARAM.findall(value):
        key, raw = raw_key.lower().decode("latin-1"), raw_value.strip()
        if len(raw) >= 2 and raw[:1] == raw[-1:] == b'"':
            raw = _ESCAPE.sub(rb"\1", raw[1:-1])
        if key.endswith("*"):  # charset'language'percent-encoded
            charset, _, rest = raw.decode("latin-1").partition("'")
            try:
                params[key[:-1]] = urllib.parse.unquote_to_bytes(rest.partition("'")[2]).decode(charset or "utf-8")
            except (LookupError, UnicodeDecodeError):
                continue  # an encoding we cannot read: the plain parameter, if any, names it
        else:
            params.setdefault(key, _text(raw))
    return params


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
    value = content_type.encode("latin-1", "replace")
    boundary = header_params(value).get("boundary")
    if value.split(b";")[0].strip().lower() != b"multipart/form-data" or not boundary:
        return None
    return boundary.encode("utf-8")


class FormParser:
    """Feed the body chunk by chunk; the ``File`` part goes to ``file_path`` (if given), up to ``max_bytes``.

    ``may_keep`` is asked, with the fields read so far, when the file part starts: ``False`` counts
    its bytes without writing them (a caller the import will refuse leaves nothing on disk).
    """

    def __init__(
        self,
        boundary: bytes,
        *,
        file_field: str,
        file_path: Path | None,
        max_bytes: int,
        may_keep: Callable[[dict[str, str]], bool] | None = None,
    ) -> None:
        self.form = ImportForm()
        self._may_keep = may_keep
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
        self._parts = 0
        self._searched = 0  # how much of the buffer a search for a line end has already covered

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
                    line_end = self._find(b"\r\n")  # transport padding may precede it
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

    def _find(self, needle: bytes) -> int:
        """Where ``needle`` starts in the buffer, or -1; each byte is searched once however it arrives.

        Past :data:`MAX_HEADER_BYTES` without it, the body is refused and the rest dropped.
        """
        at = self._buf.find(needle, self._searched)
        if at != -1:
            self._searched = 0
        elif len(self._buf) > MAX_HEADER_BYTES:
            self._refuse(f"a part's headers run on for more than {MAX_HEADER_BYTES // 1024} KiB without ending")
        else:
            self._searched = max(0, len(self._buf) - len(needle) + 1)  # it may straddle the next chunk
        return at

    def _headers(self) -> bool:
        end = self._find(b"\r\n\r\n")
        if end == -1:
            return False
        headers: dict[str, bytes] = {}
        for line in self._buf[:end].split(b"\r\n"):
            name, _, value = line.partition(b":")
            headers[name.strip().lower().decode("latin-1")] = value.strip()
        self._buf = self._buf[end + 4 :]
        self._state = "data"
        self._parts += 1
        if self._parts > MAX_PARTS:
            self._refuse(
                f"the form has more than {MAX_PARTS} parts; an import sends ProjectID, File and, "
                "to replace a table, CardID"
            )
            return True
        self._open_part(headers)
        return True

    def _open_part(self, headers: dict[str, bytes]) -> None:
        params = header_params(headers.get("content-disposition", b""))
        name = params.get("name", "")
        self._part_name = name
        if name == self._file_field:
            self.form.file_parts += 1
            if self.form.file_parts > 1:
                self._problem(f"the request has more than one {self._file_field} part; send exactly one")
                self._sink = None
                return
            content_type = headers.get("content-type")
            self.form.file = FilePart(
                filename=base_name(params.get("filename", "")),
                content_type=content_type.decode("utf-8", "replace") if content_type is not None else None,
            )
            if self._file_path is not None and (self._may_keep is None or self._may_keep(self.form.fields)):
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

    def _refuse(self, message: str) -> None:
        """Note ``message`` and drop the rest of the body (past a bound, nothing more is worth keeping)."""
        self._problem(message)
        self._close_sink()
        self._state, self._buf, self._searched = "end", b"", 0
