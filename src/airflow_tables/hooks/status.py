"""A table's status, derived from ``Processed`` and ``SuccessfulUpload`` here and nowhere else.

The hook, the operators, the sensor and the trigger all ask this module "is it
finished, did it work"; none of them reads the raw fields.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from enum import Enum


class TableStatus(str, Enum):
    """Where a table is in its life, as seen through its summary."""

    BEING_READ = "being_read"
    READY = "ready"
    FAILED = "failed"
    GONE = "gone"

    @classmethod
    def from_summary(cls, summary: Mapping | None, *, replaced_after: str | None = None) -> TableStatus:
        """Derive the status from a table summary (or detail); ``None`` means the table is not there.

        Only the JSON ``true`` counts: a string such as ``"false"`` must not read as finished.

        :param replaced_after: for a replacement, the table's ``UploadCompletionTime`` before the
            new file was sent. The seed does not say whether ``Processed`` turns false while a
            replacement is read, so a "processed" summary whose completion time is not later
            than this is the previous file's and counts as still being read. The times have
            whole seconds: send a replacement at least a second after that completion (or
            stop passing this once the table was seen being read), or an equal time keeps
            the table "being read" for good.
        """
        if summary is None:
            return cls.GONE
        if summary.get("Processed") is not True:
            return cls.BEING_READ
        if replaced_after is not None and not _later(summary.get("UploadCompletionTime"), replaced_after):
            return cls.BEING_READ
        return cls.READY if summary.get("SuccessfulUpload") is True else cls.FAILED

    @property
    def is_terminal(self) -> bool:
        """Whether waiting longer can change anything."""
        return self is not TableStatus.BEING_READ

    def describe(self, card_id: str) -> str:
        """One sentence for logs, events and errors."""
        return {
            TableStatus.BEING_READ: f"table {card_id} is still being read",
            TableStatus.READY: f"table {card_id} is ready",
            TableStatus.FAILED: f"the service could not read the file of table {card_id} (SuccessfulUpload is false)",
            TableStatus.GONE: f"table {card_id} is not (or no longer) in the department",
        }[self]


def _later(value: object, than: str) -> bool:
    """Whether completion time ``value`` is after ``than`` (ISO 8601; compared as text if unparsable)."""
    if not isinstance(value, str):
        return False
    try:
        return datetime.fromisoformat(value) > datetime.fromisoformat(than)
    except (TypeError, ValueError):
        return value > than


def find_summary(cards: Iterable[Mapping], card_id: str) -> dict | None:
    """The entry of ``list_cards`` with this CardID, or ``None`` (the seed's polling rule)."""
    return next((dict(card) for card in cards if card.get("CardID") == card_id), None)
