"""The rejects file: the bad rows a quarantine set aside, one CSV line each, written completely or not at all.

Its columns are :data:`COLUMNS`: ``line`` (where the row starts in the file, 1-based),
``byte_offset`` (of its first byte, 0-based, in the bytes the service would have received),
``code`` (the rule it breaks: :mod:`.bad_rows`), ``message``, ``column`` (when one column is to
blame) and ``record`` (the row as it was, without its line break; bytes that are not UTF-8 and
NUL bytes written as ``\\xNN`` escapes; cut at :data:`MAX_RECORD_SHOWN` bytes, and then marked).

It is written to a temporary file and only then put where it belongs: a local path gets it by
a rename in its own directory (a reader never sees half a file), an object in storage by one
upload of the finished file. A file that is refused for something else than its bad rows
leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from typing import TYPE_CHECKING

from airflow_tables.validation.bad_rows import BadRow

if TYPE_CHECKING:
    from typing import TextIO

COLUMNS = ("line", "byte_offset", "code", "message", "column", "record")
#: How much of a bad row the rejects file keeps; a longer one is cut, and says how long it was.
MAX_RECORD_SHOWN = 8 * 1024
SUFFIX = ".rejects.csv"


def beside(label: str) -> str:
    """The default rejects path of the file ``label`` names: ``orders.csv`` -> ``orders.rejects.csv``, same place."""
    head, sep, name = label.rpartition("/")
    if not sep and os.sep != "/":
        head, sep, name = label.rpartition(os.sep)
    stem = name[: -len(".csv")] if name.lower().endswith(".csv") else name
    return f"{head}{sep}{stem}{SUFFIX}"


def shown_record(record: bytes) -> str:
    """A bad row's bytes as the rejects file shows them: UTF-8 text, other bytes and NUL as ``\\xNN``, bounded."""
    cut = len(record) > MAX_RECORD_SHOWN
    text = record[:MAX_RECORD_SHOWN].decode("utf-8", errors="backslashreplace").replace("\x00", "\\x00")
    return f"{text}... [cut: {len(record):,} bytes in all]" if cut else text


#: A field that holds one of these is quoted (the ``csv`` module's minimal quoting, with CR quoted on
#: every Python: before 3.13 ``csv.writer`` left a lone CR bare, which its own reader then splits on).
_QUOTED = re.compile(r'[,"\r\n]')


def _field(text: str) -> str:
    return '"' + text.replace('"', '""') + '"' if _QUOTED.search(text) else text


def rejects_line(row: BadRow) -> str:
    """A bad row as the rejects file's line has it (:data:`COLUMNS`), with its line break.

    Written here rather than by ``csv.writer``: a file with many bad rows writes one for each, and
    the writer took 2.2 microseconds a row against 1.6 (and twice that inside a sort, its caches
    cold): ``benchmarks/bad_rows.py``'s sort went from 0.32 s to 0.28 s with it and the count of a
    bad row's lines from its own bytes. ``csv.reader`` reads it as it reads the writer's.
    """
    return (
        f"{row.line},{row.byte_offset},{_field(row.code)},{_field(row.message)},"
        f"{_field(row.column or '')},{_field(shown_record(row.record))}\n"
    )


class RejectsPart:
    """Rows of a rejects file written by a process that sorts a later part of the file (:mod:`.sort_halves`).

    No header: its parent appends it to the rejects file (:meth:`RejectsFile.append_part`).
    """

    def __init__(self, path: str) -> None:
        self._file: TextIO = open(path, "w", encoding="utf-8", newline="")  # noqa: SIM115 - closed by close()

    def add(self, row: BadRow) -> None:
        self._file.write(rejects_line(row))

    def close(self) -> None:
        self._file.close()


class RejectsFile:
    """Bad rows written as they are found to a temporary file, then :meth:`commit`-ted to ``target`` (or discarded).

    ``target`` is a local path, a ``file://`` URI, or an object-storage URI as the sources take
    them (``s3://aws_conn@bucket/key.rejects.csv``).
    """

    def __init__(self, target: str) -> None:
        from airflow_tables.sources.storage import local_file_path

        self.target = target
        self.local_target = local_file_path(target)
        folder = os.path.dirname(os.path.abspath(self.local_target)) if self.local_target else None
        if folder is not None and not os.path.isdir(folder):
            raise FileNotFoundError(f"the rejects file cannot be written to {target}: {folder} is not a directory")
        fd, self.temp_path = tempfile.mkstemp(prefix=".rejects-", suffix=".csv.tmp", dir=folder)
        self._file: TextIO = os.fdopen(fd, "w", encoding="utf-8", newline="")
        self._file.write(",".join(COLUMNS) + "\n")
        self.rows = 0

    def add(self, row: BadRow) -> None:
        self._file.write(rejects_line(row))
        self.rows += 1

    def append_part(self, path: str, rows: int) -> None:
        """Append the ``rows`` rows another process wrote to ``path`` (a :class:`RejectsPart`), after the ones here."""
        self._file.flush()
        with open(path, "rb") as part:
            shutil.copyfileobj(part, self._file.buffer, 1024 * 1024)
        self._file.buffer.flush()
        self.rows += rows

    def commit(self) -> str:
        """Put the finished file at its target (a rename, or one upload); return the target."""
        self._file.close()
        try:
            if self.local_target is not None:
                os.replace(self.temp_path, self.local_target)
            else:
                from airflow_tables.sources.storage import put_file

                put_file(self.temp_path, self.target)
        finally:
            self._remove_temp()
        return self.target

    def discard(self) -> None:
        """Leave nothing behind."""
        self._file.close()
        self._remove_temp()

    def _remove_temp(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.temp_path)
