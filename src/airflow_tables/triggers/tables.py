"""Triggers: the one behind every deferred wait, and the one that turns refreshes into asset events.

:class:`DataTablesProcessedTrigger` serves the import and replace operators and the sensor.
:class:`DataTablesTableRefreshedTrigger` is an event trigger for ``AssetWatcher``: it fires
each time a table finishes a successful read, whoever refreshed it. Both share the
department poller: one listing per department per interval, however many of either wait.

It only reads (GET requests); the paid import always happens on the worker, so a
triggerer restart that re-runs :meth:`run` can never import twice. Its kwargs are
plain JSON, it never calls the synchronous ``get_connection`` on the event loop (the
hook resolves the connection asynchronously), and its deadline is wall-clock: it
ends in a ``timeout`` event rather than relying on ``defer(timeout=)``, which skips
clean-up and is not enforced by ``dag.test()``. (The task passes the same deadline to
``defer(timeout=)`` as well, for the case where no triggerer runs the trigger at all.)

Arguments are checked when a trigger is built, in the task before it defers: a wait
that could never succeed fails there, not in the triggerer's shared poller.

The serialized arguments carry a ``version`` (:data:`ARGS_VERSION`): a task deferred by an
older release resumes after an upgrade, since a trigger built from older arguments gets
defaults for what they lack and ignores, with a warning, what it does not know
(:func:`_check_version`). The refresh watch keeps its baseline durably and claims each
refresh before reporting it, so restarts and a second triggerer neither repeat nor miss one:
where it keeps it on each Airflow minor, and why, is in :mod:`airflow_tables.triggers._ledger`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseEventTrigger, BaseTrigger, TriggerEvent

from airflow_tables.model import RefreshWatch, TableSummary, TableWatch
from airflow_tables.triggers._department_poller import watch
from airflow_tables.triggers._ledger import Entry, Ledger, opened, state_key

log = logging.getLogger(__name__)

#: Event statuses besides the table statuses ("ready", "failed", "gone").
TIMEOUT = "timeout"
ERROR = "error"
#: The version of the triggers' serialized arguments (``version`` in :meth:`serialize`). 1: the
#: releases that wrote none; 2: ``version`` written. Raise it when an argument is added or its
#: meaning changes, and keep building triggers from every older version's arguments.
ARGS_VERSION = 2


class DataTablesProcessedTrigger(BaseTrigger):
    """Wait until a table's ``Processed`` is true, sharing the department's polling with other waits.

    :param project_id: the department (ProjectID).
    :param card_id: the table (CardID).
    :param datatables_conn_id: the ``datatables`` connection.
    :param poll_interval: seconds between listings of the department (> 0); the shared poller
        lists no more often than ``[datatables] min_poll_interval`` (1 s by default), whoever asks.
    :param deadline: wall-clock end of the wait (Unix time); ``None`` waits for ever.
    :param replaced_after: for a replacement, the table's ``UploadCompletionTime`` before it,
        so that the previous file's "ready" is not taken for the new one's.
    :param version: the version of these arguments (:data:`ARGS_VERSION`; see :func:`_check_version`).
    """

    def __init__(
        self,
        *,
        project_id: str,
        card_id: str,
        datatables_conn_id: str = "datatables_default",
        poll_interval: float = 30.0,
        deadline: float | None = None,
        replaced_after: str | None = None,
        version: int | None = None,
        **unknown: Any,
    ) -> None:
        super().__init__()
        _check_version(self, version, unknown)
        self.project_id, self.card_id, self.poll_interval = _checked(project_id, card_id, poll_interval)
        if deadline is not None and (
            isinstance(deadline, bool) or not isinstance(deadline, (int, float)) or math.isnan(deadline)
        ):
            raise ValueError(f"deadline must be a Unix time (a number) or None, not {deadline!r}")
        self.datatables_conn_id = datatables_conn_id
        self.deadline = deadline
        self.replaced_after = replaced_after

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return _serialized(
            self, "project_id", "card_id", "datatables_conn_id", "poll_interval", "deadline", "replaced_after"
        )

    def _event(self, status: str, summary: dict | None = None, message: str = "") -> TriggerEvent:
        return TriggerEvent(
            {
                "status": status,
                "project_id": self.project_id,
                "card_id": self.card_id,
                "summary": summary,
                "message": message,
                # What the wait began with, for a resume that gets the event alone (Airflow 3.2's dag.test()
                # drops the deferral's kwargs): a wait deferred again keeps its instant and its deadline.
                "replaced_after": self.replaced_after,
                "deadline": self.deadline,
            }
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        table = TableWatch(self.card_id, self.replaced_after)
        async with watch(self.datatables_conn_id, self.project_id, self.card_id, self.poll_interval) as subscription:
            while True:
                left = None if self.deadline is None else self.deadline - time.time()
                snapshot = None if left is not None and left <= 0 else await subscription.next(timeout=left)
                if snapshot is None:
                    yield self._event(TIMEOUT, message=_timed_out(table))
                    return
                error = snapshot.error_for(self.card_id)
                if error is not None:
                    yield self._event(ERROR, message=error)
                    return
                if snapshot.stale_for(self.card_id):
                    continue  # the look failed for now: nothing new about this table
                look = table.observe(snapshot.cards.get(self.card_id))
                if look.status.is_terminal:
                    message = look.status.describe(self.card_id, self.project_id)
                    yield self._event(look.status.value, look.summary, message)
                    return
                table = look.watch  # a replacement seen being read: its next "processed" is the new file's
                self.log.info("%s; next look in %g s", look.message, self.poll_interval)


def _timed_out(table: TableWatch) -> str:
    """Why the wait ended at its deadline: a read still going, or none finished after the awaited instant."""
    if table.replaced_after is not None:
        return f"no read of table {table.card_id} finished after {table.replaced_after} by the deadline"
    return f"table {table.card_id} was still being read at the deadline"


class DataTablesTableRefreshedTrigger(BaseEventTrigger):
    """Fire an event each time a table finishes a successful read after watching started, exactly once.

    For ``Asset(..., watchers=[AssetWatcher(name=..., trigger=DataTablesTableRefreshedTrigger(...))])``:
    whoever refreshed the table (an Airflow task, a person in the application, a connector),
    a DAG scheduled on that asset runs. What counts as a refresh is decided by
    :class:`~airflow_tables.model.RefreshWatch`. The event's payload carries
    ``card_id``, ``project_id``, ``completion_time``, ``rows`` and the table's ``summary``.
    Errors (a refused key, a department gone, a connection missing on the triggerer, an
    answer no one can read) fire nothing: they are logged and the watch goes on, since an
    event would start the DAG for nothing and the watch has no task to fail.

    "After watching started" survives the triggerer: the last read reported is kept in the
    asset's state store (a Variable below Airflow 3.3; see :mod:`~airflow_tables.triggers._ledger`),
    so a restarted watch reports a refresh made while it was down once and an earlier one
    never again, and of two triggerers running the watch only one reports a refresh.

    :param project_id: the department (ProjectID).
    :param card_id: the table (CardID).
    :param datatables_conn_id: the ``datatables`` connection.
    :param poll_interval: seconds between listings of the department (shared with other waits).
    :param version: the version of these arguments (:data:`ARGS_VERSION`; see :func:`_check_version`).
    """

    def __init__(
        self,
        *,
        project_id: str,
        card_id: str,
        datatables_conn_id: str = "datatables_default",
        poll_interval: float = 60.0,
        version: int | None = None,
        **unknown: Any,
    ) -> None:
        super().__init__()
        _check_version(self, version, unknown)
        self.project_id, self.card_id, self.poll_interval = _checked(project_id, card_id, poll_interval)
        self.datatables_conn_id = datatables_conn_id

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return _serialized(self, "project_id", "card_id", "datatables_conn_id", "poll_interval")

    async def run(self) -> AsyncIterator[TriggerEvent]:
        key = state_key(self.datatables_conn_id, self.project_id, self.card_id)
        ledger: Ledger | None = None
        table = RefreshWatch(self.card_id)  # what this watch last knew; the store's copy is the one that counts
        unconfirmed: RefreshWatch | None = None  # a refresh fired whose report could not be recorded yet
        first = True  # until the first look that reached the store
        async with watch(self.datatables_conn_id, self.project_id, self.card_id, self.poll_interval) as subscription:
            while True:
                snapshot = await subscription.next()
                if snapshot is None:
                    continue
                error = snapshot.error_for(self.card_id)
                if error is not None:  # the poller goes on, and so does the watch: the asset has no one else
                    self.log.warning("watching %s: %s; still watching", self.card_id, error)
                    continue
                if snapshot.stale_for(self.card_id):
                    continue
                summary = snapshot.cards.get(self.card_id)
                try:
                    if unconfirmed is not None:
                        await _confirmed(ledger, unconfirmed)
                        unconfirmed = None
                    if ledger is None:
                        from airflow_tables.hooks.tables import DataTablesHook

                        secret = (await DataTablesHook(self.datatables_conn_id).asettings()).api_key
                        ledger, entry = await opened(self, key, self.card_id, secret)
                        entry = self._sane(entry, summary)
                        table = entry.watch if entry is not None else table
                    event, table = await self._look(ledger, table, summary, first=first)
                    first = False
                except Exception as err:  # the store cannot be reached now: no event without a claim; next look
                    self.log.warning(
                        "watching %s: its stored state could not be read or written (%s: %s); trying again next look",
                        self.card_id,
                        type(err).__name__,
                        err,
                    )
                    continue
                if event is None:
                    continue
                yield event
                try:  # handed to the triggerer: the claim is reported
                    await _confirmed(ledger, table)
                except Exception as err:
                    self.log.warning("watching %s: could not record the report (%s); next look", self.card_id, err)
                    unconfirmed = table

    def _sane(self, entry: Entry | None, seen: TableSummary | None) -> Entry | None:
        """The stored entry, unless its baseline is later than the table's last read (it would silence the watch)."""
        if entry is None or entry.watch.baseline is None or seen is None:
            return entry
        last = seen.completion_time
        if last is not None and entry.watch.baseline > last:
            log.warning(  # beside the store's own warnings (triggers/_ledger.py), in the triggerer's log
                "the stored baseline of the watch of %s (%s) is later than the table's last read (%s): it is ignored",
                self.card_id,
                entry.watch.baseline,
                last,
            )
            return None
        return entry

    async def _look(
        self, ledger: Ledger, table: RefreshWatch, summary: TableSummary | None, *, first: bool = False
    ) -> tuple[TriggerEvent | None, RefreshWatch]:
        """One look at the table: the event to fire (at most one, claimed in the store) and the watch to carry on.

        ``first``: the watch's first look since it started; a refresh claimed by a triggerer that
        stopped before firing its event (an abandoned claim) is fired now, if it is still the last read.
        """
        seen, refreshed = table.observe(summary)
        if seen == table and not first:
            return None, table
        entry = await ledger.load()  # another triggerer may have moved it on: the store decides
        if first:
            entry = self._sane(entry, summary)
        if first and entry is not None and entry.abandoned:
            last, succeeded = RefreshWatch(self.card_id, reading=True).observe(summary)
            if succeeded and summary is not None and last.baseline == entry.watch.baseline:
                if await ledger.claim(entry, entry.watch):
                    self.log.info("table %s: firing the refresh a stopped triggerer claimed", self.card_id)
                    return self._refreshed(entry.watch, summary), entry.watch
            else:
                self.log.warning(
                    "table %s: the read at %s was claimed by a triggerer that stopped before firing its event,"
                    " and a later read has replaced it: that refresh is not reported",
                    self.card_id,
                    entry.watch.baseline,
                )
            entry = await ledger.load()
        before = entry.watch if entry is not None else table
        seen, refreshed = before.observe(summary)
        if seen == before:
            return None, before
        if not refreshed or summary is None:
            await ledger.save(seen)  # a read under way, a failed read, the first look: nothing to report
            return None, seen
        if not await ledger.claim(entry, seen):
            self.log.info("the refresh of %s read at %s is reported by another watch", self.card_id, seen.baseline)
            entry = await ledger.load()
            return None, entry.watch if entry is not None else seen
        return self._refreshed(seen, summary), seen

    def _refreshed(self, watch: RefreshWatch, summary: TableSummary) -> TriggerEvent:
        self.log.info("table %s was refreshed (read at %s)", self.card_id, watch.baseline)
        payload = {
            "card_id": self.card_id,
            "project_id": self.project_id,
            "completion_time": watch.baseline,
            "rows": summary.rows,
            "summary": summary.to_json(),
        }
        return TriggerEvent(payload)


async def _confirmed(ledger: Ledger | None, watch: RefreshWatch) -> None:
    """Record that the claimed refresh ``watch`` was fired (unless the store has moved on since)."""
    if ledger is None:
        return
    entry = await ledger.load()
    if entry is not None and entry.watch == watch and not entry.reported:
        await ledger.save(watch)


def _checked(project_id: object, card_id: object, poll_interval: object) -> tuple[str, str, float]:
    """The arguments every wait shares, checked where the trigger is built (in the task, before it defers).

    A trigger that could never look (a malformed CardID, no department, an interval of 0)
    fails its task at once, instead of becoming a waiter that no listing answers.
    """
    from airflow_tables.hooks._ids import card_id_problem, checked_project_id

    problem = card_id_problem(card_id)
    if problem is not None:
        raise ValueError(problem)
    project_id = checked_project_id(project_id)
    try:
        interval = float(poll_interval)  # type: ignore[arg-type]  # anything else is what the check refuses
    except (TypeError, ValueError):
        interval = math.nan
    if isinstance(poll_interval, bool) or not 0 < interval < math.inf:
        raise ValueError(f"poll_interval must be a number of seconds greater than 0, not {poll_interval!r}")
    return project_id, card_id, interval  # type: ignore[return-value]  # card_id_problem checked it is a str


def _check_version(trigger: BaseTrigger, version: object, unknown: dict[str, Any]) -> None:
    """Accept arguments serialized by any release: older ones lack ``version``, newer ones may bring more.

    A deferred task outlives an upgrade of the provider: the triggerer that resumes it builds
    the trigger from the arguments the previous release wrote. Arguments it lacks take their
    defaults (every argument added after the first release has one); arguments this release
    does not know (a newer release's, after a downgrade) are ignored, and said so.
    """
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 1):
        raise ValueError(f"version must be the version of the trigger's arguments (an integer >= 1), not {version!r}")
    name = type(trigger).__name__
    if unknown:
        log.warning(
            "%s: ignoring arguments this release does not know: %s (written by a newer release, version %s;"
            " this release writes version %d)",
            name,
            ", ".join(sorted(unknown)),
            version,
            ARGS_VERSION,
        )
    elif version is not None and version > ARGS_VERSION:
        log.warning("%s: arguments of version %d, newer than this release's %d", name, version, ARGS_VERSION)


def _serialized(trigger: BaseTrigger, *names: str) -> tuple[str, dict[str, Any]]:
    """A trigger's class path and its kwargs: plain JSON, the constructor's own names, and their version."""
    kwargs = {name: getattr(trigger, name) for name in names}
    return f"{type(trigger).__module__}.{type(trigger).__qualname__}", {**kwargs, "version": ARGS_VERSION}
