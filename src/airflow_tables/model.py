"""The service's nouns, I/O-free: what a table is, what state it is in, and what a waiter knows.

Glossary. The service's document calls a table a *card* and a department a *project*; its
wire names keep those nouns (``CardID``, ``ProjectID``), and so do our identifiers that
mirror them (``card_id``, ``project_id``). Prose, logs and messages say *table* and
*department*.

This module is the only code outside the emulator that reads the service's field names
(besides the hook's request builders, which write form fields). Everything else asks it:

* :class:`TableSummary` and :class:`TableDetail` (with :class:`Column`): a summary or a
  fetched table, typed, read from the JSON the hook returns (``from_json``). The hook keeps
  returning the JSON itself (plain dicts keyed by the service's names go straight into XCom);
  code that needs a field reads it through these.
* :class:`TableStatus`: being read, ready, failed or gone, from ``Processed`` and
  ``SuccessfulUpload`` alone (only the JSON ``true`` counts), with the label and order people
  see (the UI uses both).
* :class:`TableWatch` and :class:`RefreshWatch`: one waiter's knowledge between looks.

It does no I/O (it only reads the monotonic clock to stamp a look). The hook's sync wait, the
sensor's poke, the operators' look before deferring and the trigger's department poller all
feed it what they saw (a summary, or nothing when the table is not in the department) and act
on its answer.

The replacement rule. The seed does not say whether ``Processed`` turns false while a
replacement is read, so right after a replacement is sent, a "processed" summary may
still be the previous file's. A watch for a replacement knows the previous file's
``UploadCompletionTime`` (``replaced_after``): a processed summary whose completion time is
not later than that is the previous file's and counts as being read, until the table is
seen being read; from then on, the next "processed" is the new file's whatever its time
(the read may finish within the same second as the previous one). Completion times have
whole seconds, so a replacement is sent no earlier than a second after the look that saw
the previous read finished (:data:`REPLACEMENT_SPACING`): then, even when the new read is
never seen in progress, its completion time is later than the previous one.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import Enum
from typing import Any

#: Seconds between the look that saw a table's previous read finished and sending its replacement.
REPLACEMENT_SPACING = 1.0


class TableStatus(str, Enum):
    """Where a table is in its life, as seen through its summary."""

    BEING_READ = "being_read"
    READY = "ready"
    FAILED = "failed"
    GONE = "gone"

    @classmethod
    def from_summary(cls, summary: Mapping[str, Any] | None) -> TableStatus:
        """The status a summary (or detail) shows; ``None`` means the table is not there.

        Only the JSON ``true`` counts: a string such as ``"false"`` must not read as
        finished, and a summary that is not an object reads as still being read (the next
        look decides).
        """
        if summary is None:
            return cls.GONE
        if not isinstance(summary, Mapping) or summary.get("Processed") is not True:
            return cls.BEING_READ
        return cls.READY if summary.get("SuccessfulUpload") is True else cls.FAILED

    @property
    def is_terminal(self) -> bool:
        """Whether waiting longer can change anything."""
        return self is not TableStatus.BEING_READ

    @property
    def label(self) -> str:
        """The state in words, for people (the UI, logs)."""
        return {
            TableStatus.BEING_READ: "Being read",
            TableStatus.READY: "Ready",
            TableStatus.FAILED: "Failed",
            TableStatus.GONE: "Gone",
        }[self]

    @property
    def rank(self) -> int:
        """Where the state sorts for people: what needs a look first (failed, then being read)."""
        return {TableStatus.FAILED: 0, TableStatus.BEING_READ: 1, TableStatus.READY: 2, TableStatus.GONE: 3}[self]

    def describe(self, card_id: str, department: str | None = None) -> str:
        """One sentence for logs, events and errors, naming the department when it is known."""
        where = f"department {department}" if department else "the department"
        return {
            TableStatus.BEING_READ: f"table {card_id} is still being read",
            TableStatus.READY: f"table {card_id} is ready",
            TableStatus.FAILED: f"the service could not read the file of table {card_id} (SuccessfulUpload is false)",
            TableStatus.GONE: f"table {card_id} is not (or no longer) in {where}",
        }[self]


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _flag(value: object) -> bool | None:
    """A JSON boolean, or ``None`` for anything else (``"false"`` is not false, nor true)."""
    return value if isinstance(value, bool) else None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class TableSummary:
    """A table as the list shows it (the seed's 2.1), typed; also the head of a fetched table.

    Read tolerantly: a field missing or of the wrong JSON type reads as ``None``, never as a
    plausible value (a ``"false"`` string is not false). Only ``card_id`` is required.
    """

    card_id: str
    name: str | None = None
    rows: int | None = None
    domain: str | None = None
    processed: bool | None = None
    successful_upload: bool | None = None
    connector_source: str | None = None
    connector_status: str | None = None
    completion_time: str | None = None
    locked_from_delete: bool | None = None

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> TableSummary:
        """Read a summary (an element of ``Cards``, or a fetched table's head)."""
        return cls(**_summary_fields(body))

    @property
    def status(self) -> TableStatus:
        """Being read, ready or failed (a summary in hand is never gone)."""
        if self.processed is not True:
            return TableStatus.BEING_READ
        return TableStatus.READY if self.successful_upload is True else TableStatus.FAILED

    @property
    def fed_by_live_connection(self) -> bool:
        """Whether a connected system feeds the table now: the service refuses to delete or replace it."""
        return self.locked_from_delete is True or self.connector_status == "active"


def _summary_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    card_id = body.get("CardID")
    if not isinstance(card_id, str):
        raise ValueError(f"a table summary without a CardID string: {sorted(body)}")
    return {
        "card_id": card_id,
        "name": _text(body.get("CardName")),
        "rows": _count(body.get("Rows")),
        "domain": _text(body.get("Domain")),
        "processed": _flag(body.get("Processed")),
        "successful_upload": _flag(body.get("SuccessfulUpload")),
        "connector_source": _text(body.get("ConnectorSource")) or None,
        "connector_status": _text(body.get("ConnectorStatus")) or None,
        "completion_time": _text(body.get("UploadCompletionTime")) or None,
        "locked_from_delete": _flag(body.get("LockedFromDelete")),
    }


@dataclass(frozen=True)
class Column:
    """One column of a fetched table (the seed's 2.3). ``data_type``: ``long`` or ``string`` seen so far."""

    name: str | None
    data_type: str | None = None
    description: str | None = None

    @classmethod
    def from_json(cls, record: object) -> Column:
        record = record if isinstance(record, Mapping) else {}
        return cls(
            _text(record.get("ColumnName")), _text(record.get("DataType")), _text(record.get("ColumnDescription"))
        )


@dataclass(frozen=True)
class TableDetail(TableSummary):
    """A fetched table (the seed's 2.2): the summary, the service's description of it, and its columns."""

    description: str | None = None
    columns: tuple[Column, ...] = ()

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> TableDetail:
        columns = body.get("Columns")
        return cls(
            **_summary_fields(body),
            description=_text(body.get("Description")) or None,
            columns=tuple(Column.from_json(c) for c in columns) if isinstance(columns, list) else (),
        )


def cards_of(body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The ``Cards`` of a list answer, each an object with a CardID; ``None`` when the answer is not that shape."""
    cards = body.get("Cards")
    if not isinstance(cards, list) or not all(isinstance(c, dict) and isinstance(c.get("CardID"), str) for c in cards):
        return None
    return cards


def card_id_of(body: Mapping[str, Any]) -> str | None:
    """The ``CardID`` an import's answer names (a string), or ``None``."""
    return _text(body.get("CardID"))


def by_card_id(cards: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A listing's summaries (as :func:`cards_of` returns them) by their CardID."""
    return {card["CardID"]: card for card in cards}


def summary_of(detail: Mapping[str, Any]) -> dict[str, Any]:
    """A fetched table's summary, as the list shows it: the detail without ``Description`` and ``Columns``."""
    return {k: v for k, v in detail.items() if k not in ("Description", "Columns")}


@dataclass(frozen=True)
class Look:
    """The answer to one look at a table: its status, the summary seen, and the watch to carry on.

    ``seen_at`` (``time.monotonic()``) lets a replacement keep :data:`REPLACEMENT_SPACING`
    after the look that found the table idle.
    """

    status: TableStatus
    summary: dict[str, Any] | None
    watch: TableWatch
    seen_at: float = field(default_factory=time.monotonic, compare=False)

    @property
    def message(self) -> str:
        """What the look saw; a table idle since a read before the awaited instant is not "being read"."""
        after = self.watch.replaced_after
        if (
            self.status is TableStatus.BEING_READ
            and after is not None
            and TableStatus.from_summary(self.summary) is not TableStatus.BEING_READ
        ):
            return f"table {self.watch.card_id} has not finished a read after {after} yet"
        return self.status.describe(self.watch.card_id)


@dataclass(frozen=True)
class TableWatch:
    """What one waiter knows about a table between looks (JSON-able, for a trigger's kwargs).

    :param card_id: the table.
    :param replaced_after: for a replacement, the previous file's ``UploadCompletionTime``;
        cleared once the table is seen being read (see the module's replacement rule).
    """

    card_id: str
    replaced_after: str | None = None

    def observe(self, summary: Mapping[str, Any] | None) -> Look:
        """Decide the table's status from one summary (``None``: not in the department)."""
        seen = TableStatus.from_summary(summary)
        copy = dict(summary) if isinstance(summary, Mapping) else None
        if self.replaced_after is None or seen is TableStatus.GONE:
            return Look(seen, copy, self)
        if seen is TableStatus.BEING_READ:
            return Look(seen, copy, replace(self, replaced_after=None))  # the new file is being read
        if not _later((summary or {}).get("UploadCompletionTime"), self.replaced_after):
            return Look(TableStatus.BEING_READ, copy, self)  # the previous file's "processed"
        return Look(seen, copy, replace(self, replaced_after=None))


@dataclass(frozen=True)
class RefreshWatch:
    """Whether a table finished a new successful read since the last look (JSON-able, I/O-free).

    The first well-formed look sets the baseline; after it, a refresh is a successful read
    (``Processed`` and ``SuccessfulUpload`` true) with a later ``UploadCompletionTime``, or
    ``Processed`` seen turning from false to true with ``SuccessfulUpload`` true (a read
    that ended within the same second as the previous one). A failed read moves the
    baseline on without a refresh. A summary that is missing (the table is gone, or the
    listing failed) or malformed (``Processed`` not a JSON boolean, no completion time)
    changes nothing and never counts as a refresh.

    :param baseline: the completion time of the last read seen to end, ``None`` before the first look.
    :param reading: the last well-formed look saw ``Processed`` false.
    """

    card_id: str
    baseline: str | None = None
    reading: bool = False

    def observe(self, summary: Mapping[str, Any] | None) -> tuple[RefreshWatch, bool]:
        """The watch to carry on, and whether this look shows a refresh."""
        if not isinstance(summary, Mapping):
            return self, False
        processed = summary.get("Processed")
        if processed is False:
            return replace(self, reading=True), False
        completed = summary.get("UploadCompletionTime")
        if processed is not True or not isinstance(completed, str) or not completed:
            return self, False
        ended = replace(self, baseline=completed, reading=False)
        if self.baseline is None and not self.reading:
            return ended, False  # the first look: where watching starts
        succeeded = summary.get("SuccessfulUpload") is True
        new = self.reading or self.baseline is None or _later(completed, self.baseline)
        if not new:
            return self, False
        return ended, succeeded


def service_time(when: datetime | str) -> str:
    """An instant as the service writes ``UploadCompletionTime``: ``YYYY-MM-DDTHH:MM:SS``, UTC, no offset.

    The seed shows no offset and names no zone; we read the service's times as UTC (as the
    emulator writes them), so an aware instant is turned to UTC and a naive one is taken as
    UTC. Fractions of a second are dropped: a read shown in that second is not "after" it.
    Raises ``ValueError`` for text that is not an ISO 8601 date-time.
    """
    if isinstance(when, str):
        when = datetime.fromisoformat(when.strip())
    if not isinstance(when, datetime):
        raise ValueError(f"not a date-time: {when!r}")
    if when.tzinfo is not None:
        when = when.astimezone(UTC).replace(tzinfo=None)
    return when.strftime("%Y-%m-%dT%H:%M:%S")


def _later(value: object, than: str) -> bool:
    """Whether completion time ``value`` is after ``than`` (ISO 8601; compared as text if unparsable)."""
    if not isinstance(value, str):
        return False
    try:
        return datetime.fromisoformat(value) > datetime.fromisoformat(than)
    except (TypeError, ValueError):
        return value > than


def check_wait(
    poll_interval: object, timeout: object, *, poll_name: str = "poll_interval", timeout_name: str = "timeout"
) -> None:
    """Refuse wait settings that make a busy loop or end a wait before it starts, naming the parameter.

    ``poll_interval`` is a number of seconds > 0; ``timeout`` is a number of seconds > 0, or
    ``None`` for no deadline.
    """
    if isinstance(poll_interval, bool) or not isinstance(poll_interval, (int, float)) or not poll_interval > 0:
        raise ValueError(f"{poll_name} must be a number of seconds greater than 0, not {poll_interval!r}")
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(
            f"{timeout_name} must be a number of seconds greater than 0 (or None for no deadline), not {timeout!r}"
        )


def missing_from(cards: Mapping[str, Any], card_ids: Iterable[str]) -> list[str]:
    """The wanted tables a listing lacks: each is fetched once before it counts as gone (a list may lag)."""
    return sorted(set(card_ids) - cards.keys())
