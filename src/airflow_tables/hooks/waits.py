"""The waits built on the hook's endpoints: a look at a table, a wait until it is read, a send once it is idle.

What a table's fields say of its state lives in :mod:`airflow_tables.model`
(:class:`~airflow_tables.model.TableWatch`, :class:`~airflow_tables.model.Look`); this mixin of
:class:`~airflow_tables.hooks.tables.DataTablesHook` repeats looks on a clock and decides nothing of
its own. A look at one table is one fetch of it (the seed's 4.2: a fetched table's head is the
summary the list shows, ``Processed`` included), not a list of its department: a list costs as
much as the department is large, for every look of every task (a thousand mapped imports into a
department of ten thousand tables read ten million summaries). The deferred waits share one list
per department and interval instead (:mod:`airflow_tables.triggers`).
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from airflow_tables.exceptions import (
    DataTablesBusyError,
    DataTablesError,
    DataTablesNotFoundError,
    DataTablesTimeoutError,
    DataTablesUploadFailedError,
)
from airflow_tables.model import (
    REPLACEMENT_SPACING,
    Look,
    TableDetail,
    TableStatus,
    TableSummary,
    TableWatch,
    check_wait,
)
from airflow_tables.tracing import span

if TYPE_CHECKING:
    from airflow_tables.hooks._connection import ConnectionSettings

T = TypeVar("T")


class TableWaits:
    """Looks and waits on one table, for :class:`~airflow_tables.hooks.tables.DataTablesHook`."""

    if TYPE_CHECKING:  # what the hook provides
        log: Any
        #: The service's clock at its last answer (:func:`~airflow_tables.hooks._http.served_at`).
        served_at: str | None

        @property
        def settings(self) -> ConnectionSettings: ...

        def table(self, project_id: str | None, card_id: str) -> TableDetail: ...

    def look(self, project_id: str | None, watch: TableWatch | str) -> Look:
        """One look at a table (one fetch; a table not found is gone): its status, the table seen, the next watch."""
        watch = TableWatch(watch) if isinstance(watch, str) else watch
        try:
            seen: TableSummary | None = self.table(project_id, watch.card_id).summary
        except DataTablesNotFoundError:
            seen = None
        return dataclasses.replace(watch.observe(seen), served_at=self.served_at)

    def wait_for_table(
        self,
        project_id: str | None,
        watch: TableWatch | str,
        *,
        poll_interval: float = 30.0,
        timeout: float | None = 3600.0,
    ) -> Look:
        """Look at the table every ``poll_interval`` seconds until it is not being read; return that look.

        Returns ready, failed and gone alike (the caller decides what each means); raises
        only :class:`DataTablesTimeoutError` after ``timeout`` seconds of wall clock
        (``None``: no deadline) and the errors of the requests themselves.
        """
        check_wait(poll_interval, timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        card_id = watch if isinstance(watch, str) else watch.card_id
        with span("wait", project_id=project_id, card_id=card_id):
            look = self.look(project_id, watch)
            while not look.status.is_terminal:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    waited = f"{timeout:g} s" if timeout else "the deadline"
                    raise DataTablesTimeoutError(None, f"{look.message} after {waited}", seen=True)
                pause = poll_interval if remaining is None else min(poll_interval, remaining)
                self.log.info("%s; next look in %g s", look.message, pause)
                time.sleep(pause)
                look = self.look(project_id, look.watch)
            return look

    def wait_for_processed(
        self,
        project_id: str | None,
        card_id: str,
        *,
        poll_interval: float = 30.0,
        timeout: float | None = 3600.0,
        replaced_after: str | None = None,
    ) -> dict:
        """Poll until ``card_id`` is processed; return its summary.

        Raises :class:`DataTablesUploadFailedError` when ``SuccessfulUpload`` is false, quoting the
        service's reason (the table's ``Description``, :meth:`failed_read_reason`),
        :class:`DataTablesNotFoundError` when the table is gone and
        :class:`DataTablesTimeoutError` after ``timeout`` seconds (wall clock).

        :param replaced_after: after a replacement, the table's previous ``UploadCompletionTime``
            (see :class:`~airflow_tables.model.TableWatch`).
        """
        look = self.wait_for_table(
            project_id, TableWatch(card_id, replaced_after), poll_interval=poll_interval, timeout=timeout
        )
        if look.status is TableStatus.FAILED:
            raise DataTablesUploadFailedError(None, self.failed_read_reason(project_id, card_id), seen=True)
        if look.status is TableStatus.GONE:
            raise DataTablesNotFoundError(None, look.message, seen=True)
        assert look.table is not None  # a ready table was seen
        return look.table.to_json()

    def failed_read_reason(self, project_id: str | None, card_id: str) -> str:
        """What to say of a table the service read badly, with its reason: its ``Description`` (a free fetch)."""
        project = self.settings.department(project_id)
        try:
            detail: TableDetail | None = self.table(project, card_id)
        except DataTablesError:
            detail = None
        why = f': "{detail.description}"' if detail is not None and detail.description else " (it gave no explanation)"
        return (
            f"the service could not read the file of table {card_id} in department {project} "
            f"(SuccessfulUpload is false); its explanation{why}"
        )

    def send_when_idle(
        self,
        project_id: str | None,
        card_id: str,
        send: Callable[[Look], T],
        *,
        attempts: int = 3,
        poll_interval: float = 30.0,
        timeout: float | None = 3600.0,
        wait: bool = True,
        spacing: float = REPLACEMENT_SPACING,
    ) -> T:
        """Call ``send`` (a replacement or a delete) once the table is not being read.

        The service refuses both with 409 while the table is being read. ``send`` receives the
        look that found the table idle (ready, failed or gone: it decides). When the look
        shows a finished read, ``send`` is called no earlier than ``spacing`` seconds after it
        (the replacement rule of :mod:`airflow_tables.model`), so callers need not wait.
        When the service refuses it because a read started meanwhile
        (:class:`DataTablesBusyError`), this waits again and sends again, at most ``attempts``
        more times; any other refusal is raised at once, so a table that can never be
        replaced is never sent the file twice.

        :param wait: ``False`` raises :class:`DataTablesBusyError` at once for a table being read.
        :param spacing: seconds between the look that saw a read end and ``send``; 0 for a
            ``send`` that starts no read (a delete).
        """
        for attempt in itertools.count():
            if wait:
                look = self.wait_for_table(project_id, card_id, poll_interval=poll_interval, timeout=timeout)
            else:
                look = self.look(project_id, card_id)
                if look.status is TableStatus.BEING_READ:
                    raise DataTablesBusyError(None, look.message)
            if spacing and look.status in (TableStatus.READY, TableStatus.FAILED) and look.needs_spacing:
                pause = max(0.0, look.seen_at + spacing - time.monotonic())
                self.log.info("Waiting %.1f s: %s's last read ended in the service's current second", pause, card_id)
                time.sleep(pause)
            try:
                return send(look)
            except DataTablesBusyError as busy:
                if attempt >= attempts or not wait:
                    raise DataTablesBusyError(
                        409, f"{busy.msg}; still busy after {attempts + 1} tries", method=busy.method, url=busy.url
                    ) from None
                self.log.info("Refused because a read started meanwhile (%s); waiting, then trying again", busy.msg)
        raise AssertionError("unreachable")
