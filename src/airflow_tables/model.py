"""The service's nouns, I/O-free: what a table is, what state it is in, and what a waiter knows.

Glossary. The service's document calls a table a *card* and a department a *project*; its
wire names keep those nouns (``CardID``, ``ProjectID``), and so do our identifiers that
mirror them (``card_id``, ``project_id``). Prose, logs and messages say *table* and
*department*.

This module is the only code outside the emulator that reads the service's field names
(besides the hook's request builders, which write form fields). Everything else asks it:

* :class:`TableSummary` and :class:`TableDetail` (with :class:`Column`): a summary or a
  fetched table, typed, read once where the hook receives the answer (``from_json``). They
  are what the code inside passes around (the hook's typed methods, looks, triggers, the
  page); each keeps the service's object it was read from, and ``to_json()`` gives it back
  unchanged for the hook's dict-returning public methods, XCom and trigger events.
* :class:`TableStatus`: being read, ready, failed or gone, from ``Processed`` and
  ``SuccessfulUpload`` alone (only the JSON ``true`` counts), decided in one place
  (:meth:`TableStatus.of`), with the label and order people see (the UI uses both).
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
never seen in progress, its completion time is later than the previous one. The wait is
needed only while the service's clock is in that second: a look the service dated a later
second (its HTTP ``Date``) sends at once (:attr:`Look.needs_spacing`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
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
    def of(cls, table: TableSummary | None) -> TableStatus:
        """The status a table shows (the one ladder); ``None`` means the table is not there.

        Only the JSON ``true`` counts (the typed fields are ``None`` for anything else): a
        ``Processed`` of ``"true"`` reads as still being read (the next look decides), and a
        ``SuccessfulUpload`` that is not ``true`` as failed once the table is processed.
        """
        if table is None:
            return cls.GONE
        if table.processed is not True:
            return cls.BEING_READ
        return cls.READY if table.successful_upload is True else cls.FAILED

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

    ``json`` is the service's object the table was read from (empty for one built in code):
    :meth:`to_json` hands it back as it came, unknown fields included, so the hook's public
    methods return exactly what the service said. It is not compared, and not to be changed.
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
    json: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> TableSummary:
        """Read a summary (an element of ``Cards``); ``ValueError`` when it names no table."""
        return cls(**_summary_fields(body), json=dict(body))

    def to_json(self) -> dict[str, Any]:
        """The table as the service wrote it (a copy): the edge to plain dicts, for XCom and the public methods.

        A table built in code, not read, gives its known fields under the service's names.
        """
        if self.json:
            return dict(self.json)
        return {
            wire: value for name, (wire, _) in _SUMMARY_FIELDS.items() if (value := getattr(self, name)) is not None
        }

    @property
    def status(self) -> TableStatus:
        """Being read, ready or failed (a summary in hand is never gone)."""
        return TableStatus.of(self)

    @property
    def fed_by_live_connection(self) -> bool:
        """Whether a connected system feeds the table now: the service refuses to delete or replace it."""
        return self.locked_from_delete is True or self.connector_status == "active"


def _filled(value: object) -> str | None:
    """A non-empty string, or ``None`` (the seed does not say whether an unused field is empty or null)."""
    return _text(value) or None


#: Each summary attribute: the service's field name, and how its value is read.
_SUMMARY_FIELDS: dict[str, tuple[str, Callable[[object], Any]]] = {
    "card_id": ("CardID", _text),
    "name": ("CardName", _text),
    "rows": ("Rows", _count),
    "domain": ("Domain", _text),
    "processed": ("Processed", _flag),
    "successful_upload": ("SuccessfulUpload", _flag),
    "connector_source": ("ConnectorSource", _filled),
    "connector_status": ("ConnectorStatus", _filled),
    "completion_time": ("UploadCompletionTime", _filled),
    "locked_from_delete": ("LockedFromDelete", _flag),
}
#: The fields a fetched table has beyond its summary (left out of :attr:`TableDetail.summary`).
_DETAIL_ONLY = ("Description", "Columns")


def _summary_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(body, Mapping) or not isinstance(body.get("CardID"), str):
        raise ValueError(
            f"a table summary without a CardID string: {sorted(body) if isinstance(body, Mapping) else body!r}"
        )
    return {name: read(body.get(wire)) for name, (wire, read) in _SUMMARY_FIELDS.items()}


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
        """Read a fetched table (the envelope already removed); ``ValueError`` when it names no table."""
        columns = body.get("Columns")
        return cls(
            **_summary_fields(body),
            json=dict(body),
            description=_filled(body.get("Description")),
            columns=tuple(Column.from_json(c) for c in columns) if isinstance(columns, list) else (),
        )

    @property
    def summary(self) -> TableSummary:
        """The table as the list shows it: without ``Description`` and ``Columns``."""
        head = {name: getattr(self, name) for name in _SUMMARY_FIELDS}
        return TableSummary(**head, json={k: v for k, v in self.json.items() if k not in _DETAIL_ONLY})


def cards_of(body: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The ``Cards`` of a list answer, each an object with a CardID; ``None`` when the answer is not that shape."""
    cards = body.get("Cards")
    if not isinstance(cards, list) or not all(isinstance(c, dict) and isinstance(c.get("CardID"), str) for c in cards):
        return None
    return cards


def card_id_of(body: Mapping[str, Any]) -> str | None:
    """The ``CardID`` an import's answer names (a string), or ``None``."""
    return _text(body.get("CardID"))


def by_card_id(tables: Iterable[TableSummary]) -> dict[str, TableSummary]:
    """A listing's tables by their CardID."""
    return {table.card_id: table for table in tables}


@dataclass(frozen=True)
class Look:
    """The answer to one look at a table: its status, the table seen, and the watch to carry on.

    ``table`` is ``None`` when the table is not in the department. ``seen_at``
    (``time.monotonic()``) lets a replacement keep :data:`REPLACEMENT_SPACING` after the look
    that found the table idle, when it must (:attr:`needs_spacing`); ``served_at`` is the
    service's own clock when it answered the look (its HTTP ``Date``, as :func:`service_time`
    writes it), when it said.
    """

    status: TableStatus
    table: TableSummary | None
    watch: TableWatch
    seen_at: float = field(default_factory=time.monotonic, compare=False)
    served_at: str | None = field(default=None, compare=False)

    @property
    def needs_spacing(self) -> bool:
        """Whether a replacement must wait :data:`REPLACEMENT_SPACING` after this look (see the module doc).

        Only while the service's clock may still be in the second the last read ended in: once
        its answer to this look is dated a later second, any read that starts after it ends in a
        later second still, and shows a later ``UploadCompletionTime``. Without a date, or a
        completion time, it must. A server's ``Date`` may lag its clock (uvicorn refreshes it once
        a second), never run ahead of it: a late one only makes a replacement wait when it need not.
        """
        completed = None if self.table is None else self.table.completion_time
        if completed is None or self.served_at is None:
            return True
        return not _later(self.served_at, completed)

    @property
    def summary(self) -> dict[str, Any] | None:
        """The table seen as the service wrote it (a copy; ``None`` when it is not there): the public edge."""
        return None if self.table is None else self.table.to_json()

    @property
    def idle_before(self) -> bool:
        """Whether the table is idle but its last read ended before the awaited instant (so "being read" is wrong)."""
        return (
            self.status is TableStatus.BEING_READ
            and self.watch.replaced_after is not None
            and TableStatus.of(self.table) is not TableStatus.BEING_READ
        )

    @property
    def message(self) -> str:
        """What the look saw; a table idle since a read before the awaited instant is not "being read"."""
        if self.idle_before:
            return f"table {self.watch.card_id} has not finished a read after {self.watch.replaced_after} yet"
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

    def observe(self, table: TableSummary | None) -> Look:
        """Decide the table's status from one look at it (``None``: not in the department)."""
        seen = TableStatus.of(table)
        if table is None or self.replaced_after is None:
            return Look(seen, table, self)
        if seen is TableStatus.BEING_READ:
            return Look(seen, table, replace(self, replaced_after=None))  # the new file is being read
        if not _later(table.completion_time, self.replaced_after):
            return Look(TableStatus.BEING_READ, table, self)  # the previous file's "processed"
        return Look(seen, table, replace(self, replaced_after=None))


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

    def observe(self, table: TableSummary | None) -> tuple[RefreshWatch, bool]:
        """The watch to carry on, and whether this look shows a refresh."""
        if table is None:
            return self, False
        if table.processed is False:
            return replace(self, reading=True), False
        completed = table.completion_time
        if table.processed is not True or completed is None:
            return self, False
        ended = replace(self, baseline=completed, reading=False)
        if self.baseline is None and not self.reading:
            return ended, False  # the first look: where watching starts
        succeeded = table.successful_upload is True
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
