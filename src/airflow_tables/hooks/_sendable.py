"""The file an import sends, ready to send: found, decompressed, counted, and within the service's size.

Every path that sends a file passes here (the hook's ``send_import``, and through it the
operators and ``import_csv`` in a task), so that a compressed file is never sent as it is
stored, and a staged copy that stopped at its limit (a file that decompresses or converts to
more than 512 MB) is never sent cut short. A file that cannot be read, or is too large, raises
:class:`~airflow_tables.sources.SourceError` before any request.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from airflow_tables.sources import Source, SourceError, open_source, staged


@contextlib.contextmanager
def sendable(file_path: Any, encoding: str | None = None) -> Iterator[Source]:
    """``file_path`` (a path, URI or :class:`Source`) as the upload reads it, for the time of the block.

    A compressed file is decompressed to a staged copy, held to the service's 512 MB as it is
    written (a "bomb" stops there, having cost what its first 512 MB cost); a converted file
    is read once to count its UTF-8 length (a byte not valid in its encoding stops here).
    """
    from airflow_tables.validation.rules import MAX_BYTES

    with contextlib.ExitStack() as stack:
        with refused_before_sending():
            found = open_source(file_path, encoding=encoding)
            source = found if found.size_known else stack.enter_context(staged(found, max_bytes=MAX_BYTES))
            if not source.complete:
                once = " once decompressed" if found.compression is not None else " once converted to CSV in UTF-8"
                raise SourceError(source.label, f"it is more than the service's {MAX_BYTES:,} bytes{once}")
            source.utf8_size()
        yield source


@contextlib.contextmanager
def refused_before_sending() -> Iterator[None]:
    """A :class:`SourceError` raised in the block says that nothing was sent (it is raised before any request)."""
    try:
        yield
    except SourceError as err:
        reason = f"{err.reason}; nothing was sent to the Data Tables Service."
        try:
            said = type(err)(err.label, reason)  # the same kind (not found, not allowed), saying so
        except TypeError:  # a kind made otherwise (CompressedAfterAll)
            said = SourceError(err.label, reason)
        raise said from None


__all__ = ["refused_before_sending", "sendable"]
