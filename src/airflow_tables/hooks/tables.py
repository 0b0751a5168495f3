"""The Data Tables Service client: every endpoint, the waits built on them, and the connection form.

What goes on the wire and what an answer means (request building, interpretation, the
response cap, the retry policy) live in :mod:`airflow_tables.hooks._http`; moving bytes
with requests (sync) or httpx (async) in :mod:`airflow_tables.hooks._transport`; what a
table's fields mean in :mod:`airflow_tables.model`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import itertools
import os
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from airflow.sdk import BaseHook

from airflow_tables import metrics
from airflow_tables.evidence import SUFFIX, FileFacts, stored_names, unlike
from airflow_tables.exceptions import (
    DataTablesAuthenticationError,
    DataTablesBusyError,
    DataTablesConflictError,
    DataTablesError,
    DataTablesImportUncertainError,
    DataTablesLockedError,
    DataTablesNotFoundError,
    DataTablesPermissionError,
    DataTablesTimeoutError,
    DataTablesUploadFailedError,
)
from airflow_tables.hooks._http import (
    CARD_ID,
    Call,
    ConnectionSettings,
    RetryPolicy,
    arun_call,
    card_segment,
    delete_table,
    fetch_table,
    import_file,
    list_tables,
    run_call,
    uncertain_import,
)
from airflow_tables.hooks._multipart import _quote
from airflow_tables.hooks._transport import AsyncTransport, SyncTransport, new_session
from airflow_tables.model import (
    REPLACEMENT_SPACING,
    Look,
    TableDetail,
    TableStatus,
    TableSummary,
    TableWatch,
    by_card_id,
    card_id_of,
    cards_of,
    check_wait,
    missing_from,
    summary_of,
)
from airflow_tables.sources import SourceError, open_source

if TYPE_CHECKING:
    import pandas as pd
    import requests

T = TypeVar("T")


def _task_context() -> Any:
    """The running task's context, or ``None`` outside a task (a script, a test, the triggerer)."""
    try:
        from airflow.sdk import get_current_context

        return get_current_context()
    except Exception:  # no task is running here
        return None


_PROBE_PROJECT = "airflow-connection-test"


#: The durable note of an import sent from a task (``import_csv`` in a ``@task``), keyed per upload.
HOOK_NOTE_PREFIX = "datatables_hook_import."


def upload_name(file_name: str, table_name: str | None = None) -> str:
    """The name of the file part: ``<table_name>.csv`` when a table name is given, else the file's base name.

    A ``table_name`` that would name the table otherwise than it reads is refused, before
    anything is sent: ``"None"`` (a template that rendered nothing), a name ending in ``.csv``
    (the service takes one ``.csv`` off, so ``orders.csv`` would be the table's name), and a
    ``"`` (the part's header carries it as ``%22``, which people would see).
    """
    if table_name is None:
        return file_name
    if not isinstance(table_name, str) or not table_name.strip() or table_name != table_name.strip():
        raise ValueError(f"table_name {table_name!r} must be a name without surrounding blanks, or None")
    if any(c in table_name for c in "/\\\r\n"):
        raise ValueError(f"table_name {table_name!r} may not hold a slash, a backslash or a line break")
    if table_name == "None":
        raise ValueError(
            "table_name rendered as 'None': its template found nothing (a missing param or XCom); give a name, "
            "or leave table_name out to name the table after the file"
        )
    if table_name.lower().endswith(SUFFIX):
        raise ValueError(
            f"table_name {table_name!r} ends in {SUFFIX}: the table would be named {table_name!r} (the service takes "
            f"off only the {SUFFIX} the file part is sent with); give {table_name[: -len(SUFFIX)]!r}"
        )
    if '"' in table_name:
        raise ValueError(
            f"table_name {table_name!r} may not hold a double quote: the file part's header carries it as %22, "
            "and the table would be named so"
        )
    return f"{table_name}{SUFFIX}"


def stored_name(upload: str) -> str:
    """The name the service gives a table made from a file part called ``upload``, as the emulator stores it.

    The service names a table after the file name it receives, without ``.csv`` (seed 4.4; the
    emulator's ``api._accept``). The name goes in the part's ``Content-Disposition`` escaped as
    browsers do (:func:`~airflow_tables.evidence.part_name`: ``"`` as ``%22``), which the
    emulator keeps as it comes. A service may as well undo the escape: adoption takes every
    spelling of :func:`~airflow_tables.evidence.stored_names`, never this one alone.
    """
    sent = _quote(upload)
    return sent[: -len(".csv")] if sent.lower().endswith(".csv") else sent


def _loose(name: str) -> str:
    """A name with case, Unicode form (NFKC) and percent-escapes set aside, for finding candidates."""
    import unicodedata
    from urllib.parse import unquote

    return unicodedata.normalize("NFKC", unquote(name)).casefold()


def named_after(table: TableSummary, file_name: str) -> bool:
    """Whether a table may be an upload of ``file_name``: its name is the stored name, loosely compared.

    Used to list the candidates, broadly (a service could change the case, the Unicode form of
    ``données``, or undo the ``%22`` of a quote): a table missed here would be paid for twice.
    Adopting one needs the exact stored name (:meth:`DataTablesHook._claim_lost_table`).
    """
    name = _loose(table.name or "")
    spellings = {*stored_names(file_name), os.path.splitext(file_name)[0], file_name}
    return name in {_loose(spelling) for spelling in spellings}


def now_in_service_time() -> str:
    """Now as the service writes ``UploadCompletionTime`` (``YYYY-MM-DDTHH:MM:SS``, UTC, no offset)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _before(completion_time: str | None, sent_at: str) -> bool | None:
    """Whether a read ended before the import was sent; ``None`` when a time cannot be read."""
    if not completion_time:
        return None
    try:
        return datetime.fromisoformat(completion_time) < datetime.fromisoformat(sent_at)
    except ValueError:
        return None


def _described(table: TableSummary) -> str:
    return f"{table.card_id} (named {table.name!r}, read at {table.completion_time or 'not yet'}, {table.rows} rows)"


def file_facts(file_path: str | os.PathLike | Any, encoding: str | None = None) -> FileFacts | None:
    """What validation finds in a file to compare with a table (rows, column names, types); ``None`` if it cannot."""
    from airflow_tables.validation import validate_source

    try:
        report = validate_source(open_source(file_path, encoding=encoding), column_types=True)
    except Exception:  # a file that cannot be read now gives no evidence
        return None
    return FileFacts.of(report)


class DataTablesHook(BaseHook):
    """Talk to the Data Tables Service with the API key of an Airflow connection.

    :param datatables_conn_id: a ``datatables`` connection: ``host`` the base URL, ``password``
        the API key, extras ``timeout``, ``verify``, ``max_retries``, ``project_id``, ``app_url``.
    :param backoff_base: seconds (default: the connection's ``retry_backoff`` extra, else 1);
        retry *n* waits a random time up to ``backoff_base * 2**n``
        (capped at ``backoff_max``) unless the service sends ``Retry-After``.
    :param timeout: at most this many seconds per answer, whatever the connection's ``timeout``
        extra says (the lower of the two applies): for a caller that must answer quickly itself,
        such as a web page.
    :param max_retries: retries of a failed request, instead of the connection's ``max_retries``
        extra (``0``: one attempt, for a caller whose next refresh is its retry).
    """

    conn_name_attr = "datatables_conn_id"
    default_conn_name = "datatables_default"
    conn_type = "datatables"
    hook_name = "Data Tables"

    def __init__(
        self,
        datatables_conn_id: str = default_conn_name,
        *,
        backoff_base: float | None = None,
        backoff_max: float = 60.0,
        timeout: float | None = None,
        max_retries: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.datatables_conn_id = datatables_conn_id
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.timeout = timeout
        self.max_retries = max_retries
        self._settings: ConnectionSettings | None = None
        self._session: requests.Session | None = None
        self._atransport: AsyncTransport | None = None  # inside async_client()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(datatables_conn_id={self.datatables_conn_id!r})"

    # -- connection -------------------------------------------------------------------------

    @property
    def settings(self) -> ConnectionSettings:
        """The connection, resolved once (blocking: do not use on an event loop, see :meth:`asettings`)."""
        if self._settings is None:
            self._settings = self._bounded(
                ConnectionSettings.from_connection(self.get_connection(self.datatables_conn_id))
            )
        return self._settings

    async def asettings(self) -> ConnectionSettings:
        """The connection, resolved without blocking the event loop (for triggers)."""
        if self._settings is None:
            aget = getattr(self, "aget_connection", None)
            if aget is not None:
                conn = await aget(self.datatables_conn_id)
            else:  # Airflow before aget_connection: run the blocking lookup in a thread
                from asgiref.sync import sync_to_async

                conn = await sync_to_async(self.get_connection)(self.datatables_conn_id)
            self._settings = self._bounded(ConnectionSettings.from_connection(conn))
        return self._settings

    def _bounded(self, settings: ConnectionSettings) -> ConnectionSettings:
        """The connection's settings with this hook's own ``timeout`` bound and ``max_retries``, if given."""
        changes: dict[str, Any] = {}
        if self.timeout is not None:
            changes["timeout"] = min(settings.timeout, self.timeout)
        if self.max_retries is not None:
            changes["max_retries"] = self.max_retries
        return dataclasses.replace(settings, **changes) if changes else settings

    def get_conn(self) -> requests.Session:
        """The requests Session for reads and deletes (key and TLS options go with each request)."""
        if self._session is None:
            self._session = new_session()
        return self._session

    @contextlib.asynccontextmanager
    async def async_client(self) -> AsyncIterator[None]:
        """Reuse one httpx client for the async calls made inside the block (a trigger's poll loop)."""
        async with AsyncTransport(await self.asettings()) as transport:
            self._atransport = transport
            try:
                yield
            finally:
                self._atransport = None

    def _policy(self, settings: ConnectionSettings, retries: int | None = None) -> RetryPolicy:
        return RetryPolicy(
            settings.max_retries if retries is None else retries,
            backoff_base=settings.retry_backoff if self.backoff_base is None else self.backoff_base,
            backoff_max=self.backoff_max,
            logger=self.log,
        )

    def _call(self, endpoint: Callable[..., Call], *args: Any, retries: int | None = None) -> dict:
        """Build ``endpoint``'s call (a builder of :mod:`~airflow_tables.hooks._http`) with ``args``; make it."""
        return self._send(endpoint(self.settings, *args), retries)

    def _send(self, call: Call, retries: int | None = None) -> dict:
        """Make ``call`` with requests (an upload on a fresh connection: see :class:`SyncTransport`)."""
        settings = self.settings
        transport = SyncTransport(settings, self.get_conn())
        send = functools.partial(transport.exchange, call.request, upload=call.upload)
        return run_call(self._policy(settings, retries), call, send)

    async def _acall(self, endpoint: Callable[..., Call], *args: Any) -> dict:
        """:meth:`_call` with httpx, in :meth:`async_client`'s client (one of its own outside the block)."""
        if self._atransport is None:
            async with self.async_client():
                return await self._acall(endpoint, *args)
        transport = self._atransport
        call = endpoint(transport.settings, *args)
        send = functools.partial(transport.exchange, call.request)
        return await arun_call(self._policy(transport.settings), call, send)

    # -- endpoints --------------------------------------------------------------------------

    @staticmethod
    def _cards_of(body: dict) -> list[dict]:
        cards = cards_of(body)
        if cards is None:  # every caller reads each entry's CardID: a malformed answer now, not a KeyError later
            raise DataTablesError(200, "malformed list of tables: no 'Cards' array of objects with a CardID")
        return cards

    def list_cards(self, project_id: str | None = None) -> list[dict]:
        """List the department's tables (summaries) the key can see; no credit is used."""
        return self._cards_of(self._call(list_tables, project_id))

    async def a_list_cards(self, project_id: str | None = None) -> list[dict]:
        """:meth:`list_cards` without blocking the event loop."""
        return self._cards_of(await self._acall(list_tables, project_id))

    def get_card(self, project_id: str | None, card_id: str) -> dict:
        """Fetch one table's detail (summary, ``Description``, ``Columns``) without the envelope."""
        return self._call(fetch_table, project_id, card_id)

    async def a_get_card(self, project_id: str | None, card_id: str) -> dict:
        """:meth:`get_card` without blocking the event loop."""
        return await self._acall(fetch_table, project_id, card_id)

    def delete_card(self, project_id: str | None, card_id: str) -> None:
        """Delete a table for good.

        A refusal (409) is told apart by a look at the table, deciding from ``Processed``
        first: :class:`DataTablesBusyError` while it is being read (whatever
        ``LockedFromDelete`` says: wait, then try again), :class:`DataTablesLockedError` when
        it is processed and locked (a live connection feeds it).
        """
        try:
            self._call(delete_table, project_id, card_id)
        except DataTablesConflictError as conflict:
            raise self._conflict(project_id, card_id, conflict, "delete") from None

    def _conflict(
        self, project_id: str | None, card_id: str, conflict: DataTablesConflictError, action: str
    ) -> DataTablesConflictError:
        """Why the service refused ``action`` with 409: the table is being read, or it is locked."""
        try:
            look = self.look(project_id, card_id)
        except DataTablesError:
            return conflict
        fields: dict[str, Any] = {"method": conflict.method, "url": conflict.url}
        if look.status is TableStatus.BEING_READ:
            return DataTablesBusyError(409, f"{conflict.msg} ({look.message})", **fields)
        try:
            table = TableSummary.from_json(look.summary) if look.summary is not None else None
        except ValueError:  # a fetched table's answer that does not name it: nothing to tell
            table = None
        if action == "delete" and table is not None and table.locked_from_delete is True:
            return DataTablesLockedError(
                409, f"{conflict.msg} (LockedFromDelete is true: a live connection feeds this table)", **fields
            )
        source = table.connector_source if table is not None else None
        why = f"it is fed by a connection to {source}" if source else "it is not being read"
        return DataTablesConflictError(
            409,
            f"{conflict.msg} (the service refuses to {action} table {card_id} although {why}; "
            "sending it again will not help: check the table in the application)",
            **fields,
        )

    def import_csv(
        self,
        project_id: str | None,
        file_path: str | os.PathLike | Any,
        card_id: str | None = None,
        encoding: str | None = None,
        table_name: str | None = None,
    ) -> str:
        """Upload a CSV as a new table, or as ``card_id``'s new data; return the CardID. Costs one credit.

        ``file_path`` is a local path, an ``airflow.sdk.ObjectStoragePath`` or a URI
        (``s3://aws_conn@bucket/key.csv``). ``table_name`` is the name people see: the file
        part is sent as ``<table_name>.csv``; by default the file's base name is sent, and the
        service names the table after it (without ``.csv``).
        ``encoding`` declares the file's encoding (a Python codec name): it is converted
        to UTF-8 while it is sent, after a first pass that counts its UTF-8 length and
        refuses a byte not valid in it. A file that cannot be read fails before any request.

        The file is streamed (never held in memory) and sent at most once: it is re-sent
        only when the connection was refused, so the service cannot have seen it. Any
        other failure after sending raises :class:`DataTablesImportUncertainError`.

        Called inside a running task (a ``@task``), the import is also sent once per task
        instance across its tries: a note of it goes to the task's durable store before the
        file is sent (one free look at the department first), and when the answer was lost the
        next try's call with the same department, file name and ``card_id`` adopts the table the
        service made, on the evidence :meth:`_claim_lost_table` requires, instead of paying
        again; when the evidence is not conclusive it raises
        :class:`DataTablesImportUncertainError` naming the candidates, and sends nothing.
        A task the user cleared starts afresh.
        """
        context = _task_context()
        if context is None:
            return self._send_csv(project_id, file_path, card_id, encoding, table_name)
        return self._import_once_per_task(context, project_id, file_path, card_id, encoding, table_name)

    def _import_once_per_task(
        self,
        context: Any,
        project_id: str | None,
        file_path: str | os.PathLike | Any,
        card_id: str | None,
        encoding: str | None,
        table_name: str | None,
    ) -> str:
        """:meth:`import_csv` inside a task: sent once per task instance, whatever fails after it.

        The note is keyed by the department, the source's identity (its location and content:
        :func:`~airflow_tables.sources.identity`), the upload's name and ``card_id``: two files
        called ``orders.csv`` in one task are two imports, and the same file imported again by a
        later try is one. It is written before the file is sent (what to look for if the answer
        is lost) and, once answered, holds the CardID until the task instance ends, so that a try
        failing on a later step is followed by one that returns that CardID instead of paying
        again. It is signed (:func:`~airflow_tables._durable.durable_store`): a note that does not
        verify is ignored with a warning.
        """
        from airflow_tables._durable import durable_store, kept_until_the_end, task_series
        from airflow_tables.sources import identity

        try:
            source = open_source(file_path, encoding=encoding)
            name = upload_name(source.name, table_name)
            where = identity(source)
        except (SourceError, OSError) as err:
            label, reason = (err.label, err.reason) if isinstance(err, SourceError) else (str(file_path), str(err))
            raise SourceError(label, f"{reason}; nothing was sent to the Data Tables Service.") from None
        settings = self.settings
        project = settings.department(project_id)
        store, series = durable_store(context, settings.api_key, self.log), task_series(context)
        key = HOOK_NOTE_PREFIX + hashlib.sha256(f"{project}\0{where}\0{name}\0{card_id}".encode()).hexdigest()[:24]
        kept_until_the_end(context, key)  # below 3.3 a Variable: deleted when the task instance ends
        note = store.get(key)
        if isinstance(note, dict) and note.get("series") == series:
            answered = note.get("card_id") if card_id is None else note.get("replaced")
            if isinstance(answered, str) and answered:
                self.log.info("%s was imported as %s by an earlier try of this task; not sent again", name, answered)
                return answered
            adopted = self._adopt(project, name, card_id, note, file_facts(source))
            if adopted is not None:
                store.set(key, {**note, "card_id" if card_id is None else "replaced": adopted})
                return adopted
        sent: dict[str, Any]
        if card_id is None:
            sent = {"before": self.tables_named_after(project, name)}
        else:
            summary = self.find_card(project, card_id)
            sent = {"replaced_after": TableSummary.from_json(summary).completion_time if summary else None}
        note = {**sent, "sent_at": now_in_service_time(), "series": series}
        store.set(key, note)
        result = self._send_csv(project, source, card_id, encoding, table_name)
        store.set(key, {**note, "card_id" if card_id is None else "replaced": result})
        return result

    def _adopt(
        self, project: str, name: str, card_id: str | None, note: dict[str, Any], facts: FileFacts | None
    ) -> str | None:
        """The table an earlier try's import (or replacement) made when its answer was lost, proven; else ``None``."""
        sent_at = note.get("sent_at")
        if not isinstance(sent_at, str):
            return None
        if card_id is None:
            before = note.get("before")
            known = [b for b in before if isinstance(b, str)] if isinstance(before, list) else []
            return self._claim_lost_table(project, name, before=known, sent_at=sent_at, facts=facts)
        after = note.get("replaced_after")
        after = after if isinstance(after, str) else None
        landed = self._claim_lost_replacement(project, card_id, replaced_after=after, sent_at=sent_at, facts=facts)
        return card_id if landed else None

    def _send_csv(
        self,
        project_id: str | None,
        file_path: str | os.PathLike | Any,
        card_id: str | None = None,
        encoding: str | None = None,
        table_name: str | None = None,
    ) -> str:
        """Send the import once (see :meth:`import_csv`), with no note: the operators keep their own."""
        try:
            source = open_source(file_path, encoding=encoding)
            source.utf8_size()  # a converted file is read once to count: a byte not valid in it stops here
        except SourceError as err:
            raise type(err)(err.label, f"{err.reason}; nothing was sent to the Data Tables Service.") from None
        project = self.settings.department(project_id)
        name = upload_name(source.name, table_name)
        call = import_file(self.settings, project, source, filename=name, card_id=card_id, logger=self.log)
        body = call.upload
        assert body is not None
        self.log.info(
            "Importing %s (%.1f MiB) into department %s%s",
            name,
            body.size / 2**20,
            project,
            f" to replace {card_id}" if card_id else "",
        )

        started = time.monotonic()
        try:
            result = self._send(call)
        except DataTablesConflictError as conflict:
            if card_id is None:
                raise
            raise self._conflict(project, card_id, conflict, "replace") from None
        except DataTablesError as exc:
            failure = body.cut_off(call.request.url) or uncertain_import(exc, name, project, card_id)
            if failure is exc:
                raise
            raise failure from exc
        # A replacement keeps its id; the seed only implies that the answer repeats it.
        new_id = card_id_of(result) or card_id
        if new_id is None or not CARD_ID.match(new_id):
            answer = DataTablesError(200, f"answer without a CardID: {sorted(result)}")
            raise uncertain_import(answer, name, project, card_id)
        self.log.info("Imported %s as %s in %.1f s", name, new_id, time.monotonic() - started)
        metrics.incr("imports", project_id=project)
        metrics.incr("credits_spent", project_id=project)
        metrics.incr("bytes_uploaded", body.size, project_id=project)
        return new_id

    def import_dataframe(
        self,
        project_id: str | None,
        df: pd.DataFrame,
        name: str,
        card_id: str | None = None,
        encoding: str | None = None,
    ) -> str:
        """Upload ``df`` as a table named ``name`` (or as ``card_id``'s new data); return the CardID. One credit.

        Named index levels become columns, MultiIndex columns are joined with ``_``, and a
        frame the service would reshape or rename is refused before any request: the rules
        are in :mod:`airflow_tables.hooks._dataframe` (docs/hook.md, "DataFrames"). With
        ``encoding``, the CSV is written and checked in that encoding and sent as UTF-8: a way
        to make sure the table holds only what a system reading that encoding can take.
        """
        from airflow_tables.hooks._dataframe import written_csv

        with written_csv(df, name, self.log, encoding=encoding) as path:
            return self.import_csv(project_id, path, card_id, encoding=encoding)

    def find_cards(self, project_id: str | None, card_ids: Iterable[str]) -> dict[str, dict]:
        """The department's summaries by CardID, by the seed's polling rule (list, find the CardID).

        A wanted table missing from the list is fetched once before it counts as gone (a list
        may lag behind a fresh import); one that is not there either is left out. Every value
        is a summary, as the list shows it: a fetched table's ``Description`` and ``Columns``
        are left out (:meth:`get_card` returns them).
        """
        cards = by_card_id(self.list_cards(project_id))
        for card_id in missing_from(cards, card_ids):
            with contextlib.suppress(DataTablesNotFoundError):
                cards[card_id] = summary_of(self.get_card(project_id, card_id))
        return cards

    async def a_find_cards(self, project_id: str | None, card_ids: Iterable[str]) -> dict[str, dict]:
        """:meth:`find_cards` without blocking the event loop."""
        cards = by_card_id(await self.a_list_cards(project_id))
        for card_id in missing_from(cards, card_ids):
            with contextlib.suppress(DataTablesNotFoundError):
                cards[card_id] = summary_of(await self.a_get_card(project_id, card_id))
        return cards

    def find_card(self, project_id: str | None, card_id: str) -> dict | None:
        """The table's summary, as the list shows it (see :meth:`find_cards`), ``None`` if it is gone."""
        card_segment(card_id)
        return self.find_cards(project_id, [card_id]).get(card_id)

    def look(self, project_id: str | None, watch: TableWatch | str) -> Look:
        """One look at a table: its status, summary, and the watch to carry to the next look."""
        watch = TableWatch(watch) if isinstance(watch, str) else watch
        return watch.observe(self.find_card(project_id, watch.card_id))

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
        return look.summary or {}

    def failed_read_reason(self, project_id: str | None, card_id: str) -> str:
        """What to say of a table the service read badly, with its reason: its ``Description`` (a free fetch)."""
        project = self.settings.department(project_id)
        try:
            detail: TableDetail | None = TableDetail.from_json(self.get_card(project, card_id))
        except (DataTablesError, ValueError):
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
            if look.status in (TableStatus.READY, TableStatus.FAILED):
                time.sleep(max(0.0, look.seen_at + spacing - time.monotonic()))
            try:
                return send(look)
            except DataTablesBusyError as busy:
                if attempt >= attempts or not wait:
                    raise DataTablesBusyError(
                        409, f"{busy.msg}; still busy after {attempts + 1} tries", method=busy.method, url=busy.url
                    ) from None
                self.log.info("Refused because a read started meanwhile (%s); waiting, then trying again", busy.msg)
        raise AssertionError("unreachable")

    def tables_named_after(self, project_id: str | None, file_name: str) -> list[str]:
        """The CardIDs of the department's tables that an upload of ``file_name`` could have created.

        The service names an uploaded table after its file (:func:`stored_name`); a retry whose
        earlier import lost its answer compares this before and after to find the table that
        import made.
        """
        tables = map(TableSummary.from_json, self.list_cards(project_id))
        return [table.card_id for table in tables if named_after(table, file_name)]

    def find_lost_import(self, project_id: str | None, file_name: str, before: Collection[str]) -> list[str]:
        """The tables named after ``file_name`` that are new since ``before`` (see :meth:`tables_named_after`)."""
        return [card_id for card_id in self.tables_named_after(project_id, file_name) if card_id not in before]

    def _claim_lost_table(
        self,
        project_id: str | None,
        file_name: str,
        *,
        before: Collection[str],
        sent_at: str,
        facts: FileFacts | None,
        poll_interval: float = 5.0,
        timeout: float | None = 3600.0,
    ) -> str | None:
        """The table an import of ``file_name`` whose answer was lost made, proven; ``None`` when it made none.

        A new table (not in ``before``, the department's tables named after the file just
        before sending) is this import's only on evidence: named as the service may name this
        upload (:func:`~airflow_tables.evidence.stored_names`), read after ``sent_at`` (the time
        the note was written, just before the file was sent, as the service writes times), read
        well, and holding what validation found in the file: its rows, and its columns by name
        and type (``facts``, :func:`~airflow_tables.evidence.unlike`). A candidate still
        being read is waited for first (``poll_interval``, ``timeout``). When no new table may
        be it, ``None``: the service did not receive the file, and it may be sent again. When
        candidates are there but not exactly one is proven, :class:`DataTablesImportUncertainError`
        names each and why, and nothing is sent: paying twice, or claiming another import's
        table (another file of the same name), are both worse than asking a person.
        """
        project = self.settings.department(project_id)
        stored = stored_names(file_name)
        known = set(before)
        tables = [TableSummary.from_json(c) for c in self.list_cards(project)]
        candidates = [t for t in tables if t.card_id not in known and named_after(t, file_name)]
        if not candidates:
            return None
        verdicts: list[tuple[TableSummary, str | None]] = []
        for table in candidates:
            if table.name not in stored:
                names = " or ".join(repr(n) for n in sorted(stored))
                verdicts.append((table, f"its name is not {names}, the name the service gives this upload"))
                continue
            read = self._read(project, table, poll_interval, timeout)
            verdicts.append((read, self._not_proven(project, read, sent_at, facts)))
        proven = [t for t, why in verdicts if why is None]
        if len(proven) == 1:
            assert facts is not None  # nothing is proven without them
            self.log.info(
                "The lost import of %s reached the service as %s: named %r, read at %s (after the import was sent "
                "at %s) with the %s rows and the columns (%s) the file has",
                file_name, proven[0].card_id, proven[0].name, proven[0].completion_time, sent_at, facts.rows,
                ", ".join(facts.columns),
            )  # fmt: skip
            return proven[0].card_id
        raise DataTablesImportUncertainError(
            None,
            f"the import of {file_name} into department {project} lost its answer, and the evidence does not show "
            f"which table, if any, it made: "
            + "; ".join(f"{_described(t)}: {why or 'matches, but so does another'}" for t, why in verdicts)
            + ". Nothing was imported again (no credit spent). Look at these tables: if one is this file's, use "
            "its CardID (card_id=...); if none is, clear the task to import the file again.",
            seen=True,
        )

    def _claim_lost_replacement(
        self,
        project_id: str | None,
        card_id: str,
        *,
        replaced_after: str | None,
        sent_at: str,
        facts: FileFacts | None,
        poll_interval: float = 5.0,
        timeout: float | None = 3600.0,
    ) -> bool:
        """Whether a replacement of ``card_id`` whose answer was lost did replace it, proven.

        ``False`` when the table shows no read since ``replaced_after`` (its read before the
        replacement was sent): the service did not take it, and it may be sent again. ``True``
        when a read since then ended after ``sent_at``, well, holding what validation found in
        the file (``facts``: rows, column names and types). Anything else (another client's
        refresh, a failed or short read) raises :class:`DataTablesImportUncertainError`
        describing the table, and nothing is sent.
        """
        project = self.settings.department(project_id)
        look = self.look(project, card_id)
        if look.status is TableStatus.GONE:
            return False
        table = TableSummary.from_json(look.summary or {"CardID": card_id})
        if look.status is not TableStatus.BEING_READ and table.completion_time == replaced_after:
            return False
        table = self._read(project, table, poll_interval, timeout)
        why = self._not_proven(project, table, sent_at, facts)
        if why is None:
            self.log.info("The lost replacement of %s reached the service: read at %s", card_id, table.completion_time)
            return True
        raise DataTablesImportUncertainError(
            None,
            f"the replacement of {card_id} in department {project} lost its answer, and the table was read since "
            f"(it was last read at {replaced_after} before), but the evidence does not show that read was this "
            f"file's: {_described(table)}: {why}. Nothing was sent again (no credit spent). Look at the table: if "
            "it holds this file's data, nothing is left to do; if not, clear the task to send the file again.",
            seen=True,
        )

    def _read(self, project: str, table: TableSummary, poll_interval: float, timeout: float | None) -> TableSummary:
        """``table`` once it is not being read (waiting for it), as the last look saw it."""
        if table.status is not TableStatus.BEING_READ:
            return table
        look = self.wait_for_table(project, table.card_id, poll_interval=poll_interval, timeout=timeout)
        return TableSummary.from_json(look.summary) if look.summary else table

    def _not_proven(self, project: str, table: TableSummary, sent_at: str, facts: FileFacts | None) -> str | None:
        """Why a read table is not shown to be an import sent at ``sent_at`` of the file of ``facts``, or ``None``."""
        if table.status is TableStatus.BEING_READ:
            return "it is still being read"
        if table.status is TableStatus.FAILED:
            return "its reading failed (SuccessfulUpload is false), so its rows cannot be compared"
        before = _before(table.completion_time, sent_at)
        if before is None:
            return f"its UploadCompletionTime {table.completion_time!r} cannot be compared with {sent_at}"
        if before:
            return f"it was read at {table.completion_time}, before this import was sent at {sent_at}"
        if facts is None:
            return unlike(TableDetail.from_json({}), None)
        if table.rows != facts.rows:
            return f"it has {table.rows} rows, the file {facts.rows}"
        return unlike(TableDetail.from_json(self.get_card(project, table.card_id)), facts)

    def test_connection(self) -> tuple[bool, str]:
        """One cheap GET, not retried: does the service accept the key (and see the ``project_id`` extra)?"""
        try:
            settings = self.settings
            project = settings.project_id
            try:
                cards = self._cards_of(self._call(list_tables, project or _PROBE_PROJECT, retries=0))
            except (DataTablesPermissionError, DataTablesNotFoundError) as exc:
                if project or isinstance(exc, DataTablesAuthenticationError):
                    raise
                # Refused for that made-up department, not for the key: the key is good.
                return (
                    True,
                    "Connected: the service accepts the API key (set project_id to check a department).",
                )
            if project is None:
                return True, "Connected: the service accepts the API key."
            return True, f"Connected: the key sees {len(cards)} table(s) in department {project!r}."
        except DataTablesAuthenticationError as exc:
            return False, f"The service refused the API key (HTTP 401): {exc.msg}"
        except (DataTablesError, ValueError) as exc:
            return False, str(exc)

    # -- connection form (Airflow before 3.2; later versions read conn-fields from the provider info) --

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        behaviour = cls._connection_type()["ui-field-behaviour"]
        return {
            "hidden_fields": behaviour["hidden-fields"],
            "relabeling": behaviour["relabeling"],
            "placeholders": behaviour["placeholders"],
        }

    @classmethod
    def get_connection_form_widgets(cls) -> dict[str, Any]:
        from flask_appbuilder.fieldwidgets import BS3TextFieldWidget
        from wtforms import StringField

        fields = cls._connection_type()["conn-fields"]
        return {
            name: StringField(f["label"], widget=BS3TextFieldWidget(), description=f.get("description"))
            for name, f in fields.items()
        }

    @classmethod
    def _connection_type(cls) -> dict:
        from airflow_tables import get_provider_info

        return next(c for c in get_provider_info()["connection-types"] if c["connection-type"] == cls.conn_type)
