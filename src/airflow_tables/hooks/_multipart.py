"""A multipart/form-data body that streams one file, with a known length.

requests' ``files=`` builds the whole body in memory (twice the file's size);
this body is an iterable of blocks read into reused buffers, and it has
a ``len()``, so requests sends a ``Content-Length`` instead of chunked encoding.
The file is read through :mod:`airflow_tables.sources` (a local file, an object in
storage, UTF-8 converted from a declared encoding), and its length is what that says
the service receives. Each iteration opens the file again, so a retried request sends
it from the start.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Generator, Iterator
from time import monotonic
from typing import TYPE_CHECKING

from airflow_tables.evidence import part_name
from airflow_tables.exceptions import DataTablesError
from airflow_tables.sources import Source, open_source

if TYPE_CHECKING:
    from airflow_tables.hooks._http import LogLike

# Small enough to stay in the CPU's cache between the read and the send (measured in benchmarks/upload.py).
BLOCK_SIZE = 256 * 1024
PROGRESS_MIN_BYTES = 8 * 1024 * 1024
#: A progress line is written at a tenth of the file, once this many seconds passed since the
#: upload started or the last line: a slow upload says how far it is, one that takes a fraction
#: of a second does not fill the log, nor pay for lines nobody reads (benchmarks/NOTES.md).
PROGRESS_EVERY = 2.0


def _quote(value: str) -> str:
    # What browsers do to a name in Content-Disposition: no quote or line break can end the header.
    return part_name(value)


class MultipartFile:
    """The body of a form with text ``fields`` and one file part (``file_field``) read from ``source``.

    ``source`` is a :class:`~airflow_tables.sources.Source` or anything
    :func:`~airflow_tables.sources.open_source` takes (a local path, a URI...).
    """

    def __init__(
        self,
        fields: dict[str, str],
        file_field: str,
        source: Source | str | os.PathLike,
        *,
        filename: str | None = None,
        media_type: str = "text/csv",
        block_size: int = BLOCK_SIZE,
        logger: LogLike | None = None,
        progress_every: float = PROGRESS_EVERY,
    ) -> None:
        self.source = open_source(source)
        self.label = self.source.label  # a local path or a URI: what the messages name
        self.size = self.source.utf8_size()
        self.block_size = block_size
        self.logger = logger
        self.progress_every = progress_every
        boundary = f"airflow-tables-{secrets.token_hex(16)}"
        self.content_type = f"multipart/form-data; boundary={boundary}"
        self.changed_size: str | None = None  # set when the file shrank or grew mid-upload
        self.read_error: str | None = None  # set when reading the file failed mid-upload
        parts = [
            f'--{boundary}\r\nContent-Disposition: form-data; name="{_quote(k)}"\r\n\r\n{v}\r\n'
            for k, v in fields.items()
        ]
        name = _quote(filename or self.source.name)
        disposition = f'form-data; name="{_quote(file_field)}"; filename="{name}"'
        parts.append(f"--{boundary}\r\nContent-Disposition: {disposition}\r\nContent-Type: {media_type}\r\n\r\n")
        self.head = "".join(parts).encode()
        self.tail = f"\r\n--{boundary}--\r\n".encode()

    def __len__(self) -> int:
        return len(self.head) + self.size + len(self.tail)

    def __repr__(self) -> str:
        return f"MultipartFile(label={self.label!r}, size={self.size})"

    def __iter__(self) -> Iterator[bytes | memoryview]:
        yield self.head
        try:
            sent = yield from self._file_blocks()
        except OSError as err:
            # Content-Length is already on the wire: the form can only be cut off, never completed.
            self.read_error = str(err)
            raise
        if sent != self.size:
            # Content-Length is already on the wire; a file that changed size cannot be sent honestly.
            self.changed_size = f"{self.size:,} bytes when the upload started, {sent:,} read"
            raise OSError(f"{self.label} changed size during the upload ({self.changed_size})")
        yield self.tail

    def cut_off(self, url: str) -> DataTablesError | None:
        """Why the upload ended before the form did (the file changed size or could not be read), or ``None``.

        The closing boundary was never sent, so no service can parse the form: nothing was imported.
        """
        name = self.source.name
        if self.changed_size:
            why = f"{name} changed size while it was being uploaded ({self.changed_size}); the upload was cut off "
            fix = " Write the file completely, then import it."
        elif self.read_error:
            why = (
                f"{name} could not be read to its end while it was being uploaded ({self.read_error}); "
                "the upload was cut off "
            )
            fix = ""
        else:
            return None
        return DataTablesError(None, f"{why}before its end, so nothing was imported.{fix}", method="POST", url=url)

    def _file_blocks(self) -> Generator[memoryview, None, int]:
        """Yield the file's blocks, each sent before its buffer is reused; return how many bytes were read.

        The blocks come from reused buffers (:meth:`Source.blocks`): a local file is read
        straight into one, one copy from the page cache; a declared encoding is converted
        into another and sent from there.
        """
        sent = 0
        step = self.size // 10 if self.logger and self.size >= PROGRESS_MIN_BYTES else 0
        next_report = step
        last_report = monotonic()
        for block in self.source.blocks(self.block_size):
            sent += len(block)
            if sent > self.size:
                break
            yield block
            if not step or sent < next_report:
                continue
            next_report = (sent // step + 1) * step
            now = monotonic()
            if self.logger is not None and now - last_report >= self.progress_every:
                last_report = now
                self.logger.info(
                    "Uploaded %d%% of %s (%.1f of %.1f MiB)",
                    100 * sent // self.size,
                    self.source.name,
                    sent / 2**20,
                    self.size / 2**20,
                )
        return sent
