"""Why a file or object cannot be read: the errors every reader of ``sources`` raises.

A leaf (it imports nothing of ours), so the storage, the signed GET and the read-ahead that
hands bytes between them can all raise the same error without importing one another.
:mod:`airflow_tables.sources` and :mod:`.storage` re-export both names, where callers
import them from.
"""

from __future__ import annotations


class SourceError(OSError):
    """A file or object cannot be read; nothing was read from it, and nothing sent anywhere."""

    def __init__(self, label: str, reason: str) -> None:
        super().__init__(f"cannot read {label}: {reason}")
        self.label = label
        self.reason = reason


class SourceNotFoundError(SourceError, FileNotFoundError):
    """The file or object does not exist (or is a directory)."""


__all__ = ["SourceError", "SourceNotFoundError"]
