"""The Data Tables Service client: every endpoint, the waits built on them, and the connection form.

What a request and an answer are (a call per endpoint, interpretation, the response cap,
the retry policy) live in :mod:`airflow_tables.hooks._http`, the connection a request
starts from in :mod:`airflow_tables.hooks._connection`; moving bytes
with requests (sync) or httpx (async) in :mod:`airflow_tables.hooks._transport`; what a
table's fields mean in :mod:`airflow_tables.model`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from airflow.sdk import BaseHook

from airflow_tables import metrics
from airflow_tables.evidence import named_after, upload_name
from airflow_tables.exceptions import (
    DataTablesAuthenticationError,
    DataTablesBusyError,
    DataTablesConflictError,
    DataTablesError,
    DataTablesLockedError,
    DataTablesNotFoundError,
    DataTablesPermissionError,
)
from airflow_tables.hooks._budget import credit_claimed
from airflow_tables.hooks._connection import ConnectionSettings
from airflow_tables.hooks._deprecated import DeprecatedMethods
from airflow_tables.hooks._form import ConnectionForm
from airflow_tables.hooks._http import (
    Call,
    RetryPolicy,
    arun_call,
    delete_table,
    fetch_table,
    import_file,
    list_tables,
    run_call,
    uncertain_import,
)
from airflow_tables.hooks._ids import CARD_ID, card_segment
from airflow_tables.hooks._sendable import refused_before_sending, sendable
from airflow_tables.hooks._transport import AsyncTransport, SyncTransport, new_session
from airflow_tables.hooks.waits import TableWaits
from airflow_tables.model import (
    TableDetail,
    TableStatus,
    TableSummary,
    by_card_id,
    card_id_of,
    cards_of,
    missing_from,
)
from airflow_tables.sources import Source, open_source
from airflow_tables.tracing import span

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


class DataTablesHook(TableWaits, ConnectionForm, DeprecatedMethods, BaseHook):
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
    # Airflow 3.1's ProvidersManager looks for the form in the class's own ``__dict__``, not its bases'.
    get_ui_field_behaviour = vars(ConnectionForm)["get_ui_field_behaviour"]
    get_connection_form_widgets = vars(ConnectionForm)["get_connection_form_widgets"]

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
        self.served_at: str | None = None  # the service's clock (HTTP Date) at its last answer, when it said

    def __repr__(self) -> str:
        return f"{type(self).__name__}(datatables_conn_id={self.datatables_conn_id!r})"

    # -- connection -------------------------------------------------------------------------

    @property
    def known_settings(self) -> ConnectionSettings | None:
        """The connection if resolved already, else ``None``: never a lookup (lineage reads it in a forked child)."""
        return self._settings

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
        try:
            return run_call(self._policy(settings, retries), call, send)
        finally:
            self.served_at = transport.served_at  # what a look carries (TableWaits.look)

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
    #
    # The typed methods (tables, table, find_tables, find_table and their async twins) are what
    # the code inside uses; the dict-returning methods of the contract (list_cards, get_card,
    # find_cards, find_card, wait_for_processed) are their edges: ``to_json()`` gives back the
    # service's objects exactly as they came.

    @staticmethod
    def _cards_of(body: dict) -> list[dict]:
        cards = cards_of(body)
        if cards is None:  # every caller reads each entry's CardID: a malformed answer now, not a KeyError later
            raise DataTablesError(200, "malformed list of tables: no 'Cards' array of objects with a CardID")
        return cards

    @staticmethod
    def _detail(body: dict) -> TableDetail:
        try:
            return TableDetail.from_json(body)
        except ValueError:
            raise DataTablesError(200, f"malformed table: no CardID string among {sorted(body)[:20]}") from None

    def tables(self, project_id: str | None = None) -> list[TableSummary]:
        """The department's tables (summaries) the key can see; no credit is used."""
        return [TableSummary.from_json(card) for card in self._cards_of(self._call(list_tables, project_id))]

    async def a_tables(self, project_id: str | None = None) -> list[TableSummary]:
        """:meth:`tables` without blocking the event loop."""
        return [TableSummary.from_json(card) for card in self._cards_of(await self._acall(list_tables, project_id))]

    def table(self, project_id: str | None, card_id: str) -> TableDetail:
        """One table fetched: its summary, ``Description`` and ``Columns``; no credit is used."""
        return self._detail(self._call(fetch_table, project_id, card_id))

    async def a_table(self, project_id: str | None, card_id: str) -> TableDetail:
        """:meth:`table` without blocking the event loop."""
        return self._detail(await self._acall(fetch_table, project_id, card_id))

    def find_tables(self, project_id: str | None, card_ids: Iterable[str]) -> dict[str, TableSummary]:
        """The department's tables by CardID, by the seed's polling rule (list, find the CardID).

        A wanted table missing from the list is fetched once before it counts as gone (a list
        may lag behind a fresh import); one that is not there either is left out. Every value
        is a summary, as the list shows it (:attr:`TableDetail.summary` of one fetched).
        """
        tables = by_card_id(self.tables(project_id))
        for card_id in missing_from(tables, card_ids):
            with contextlib.suppress(DataTablesNotFoundError):
                tables[card_id] = self.table(project_id, card_id).summary
        return tables

    def find_table(self, project_id: str | None, card_id: str) -> TableSummary | None:
        """The table's summary, as the list shows it (see :meth:`find_tables`), ``None`` if it is gone."""
        card_segment(card_id)
        return self.find_tables(project_id, [card_id]).get(card_id)

    def list_cards(self, project_id: str | None = None) -> list[dict]:
        """List the department's tables (summaries) the key can see; no credit is used."""
        return [table.to_json() for table in self.tables(project_id)]

    async def a_list_cards(self, project_id: str | None = None) -> list[dict]:
        """:meth:`list_cards` without blocking the event loop."""
        return [table.to_json() for table in await self.a_tables(project_id)]

    def get_card(self, project_id: str | None, card_id: str) -> dict:
        """Fetch one table's detail (summary, ``Description``, ``Columns``) without the envelope."""
        return self.table(project_id, card_id).to_json()

    async def a_get_card(self, project_id: str | None, card_id: str) -> dict:
        """:meth:`get_card` without blocking the event loop."""
        return (await self.a_table(project_id, card_id)).to_json()

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
        table = look.table
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
        *,
        on_bad_rows: str = "fail",
        max_bad_rows: int | None = None,
        max_bad_fraction: float | None = None,
        rejects_path: str | None = None,
        column_types: dict[str, str] | None = None,
        input_format: str | None = None,
    ) -> str:
        """Upload a CSV as a new table, or as ``card_id``'s new data; return the CardID. Costs one credit.

        ``file_path`` is a local path, an ``airflow.sdk.ObjectStoragePath`` or a URI
        (``s3://aws_conn@bucket/key.csv``). ``table_name`` is the name people see: the file
        part is sent as ``<table_name>.csv``; by default the file's base name is sent, and the
        service names the table after it (without ``.csv``).
        ``encoding`` declares the file's encoding (a Python codec name): it is converted
        to UTF-8 while it is sent, after a first pass that counts its UTF-8 length and
        refuses a byte not valid in it. A file that cannot be read fails before any request.

        The file is streamed (never held in memory) and sent at most once (:meth:`send_import`).
        Called inside a running task (a ``@task``), the import is also sent once per task
        instance across its tries (:mod:`airflow_tables.hooks.send_once`): when an earlier
        try's answer was lost, the table the service made is adopted on evidence instead of
        paying again, and when the evidence is not conclusive
        :class:`DataTablesImportUncertainError` names the candidates and nothing is sent.
        A task the user cleared starts afresh.

        ``on_bad_rows="quarantine"`` (with ``max_bad_rows``, ``max_bad_fraction``, ``rejects_path``) and
        ``column_types`` judge the file's rows one by one first, as the import operators do
        (docs/operators/import.md, "Bad rows"): the good rows are sent, the bad ones written to the
        rejects file; a refused file raises :class:`CsvValidationError` before any request.

        A compressed file (gzip, bzip2, xz, zstandard, a zip of one CSV) is sent decompressed;
        Parquet and JSON Lines (``input_format``, or told by the file's first bytes and suffix)
        converted to CSV (docs/sources.md).
        """
        from airflow_tables.hooks._rows import rows_to_send
        from airflow_tables.hooks.send_once import import_in_task
        from airflow_tables.validation.quarantine import RowCheck

        check = RowCheck.of(on_bad_rows, max_bad_rows, max_bad_fraction, rejects_path, column_types)
        if input_format is not None:
            with refused_before_sending():
                file_path = open_source(file_path, encoding=encoding, input_format=input_format)
        context = _task_context()
        if not check.sorts:
            if context is None:
                return self.send_import(project_id, file_path, card_id, encoding, table_name)
            return import_in_task(self, context, project_id, file_path, card_id, encoding, table_name)
        with rows_to_send(file_path, encoding, check, self.log) as (sent, facts):
            if context is None:
                return self.send_import(project_id, sent, card_id, None, table_name)
            return import_in_task(
                self, context, project_id, file_path, card_id, encoding, table_name, sent=sent, facts=facts
            )

    def send_import(
        self,
        project_id: str | None,
        file_path: str | os.PathLike | Any,
        card_id: str | None = None,
        encoding: str | None = None,
        table_name: str | None = None,
    ) -> str:
        """One import request, with no note of its own; return the CardID. Costs one credit.

        The file is re-sent only when the connection was refused, so the service cannot have
        seen it; any other failure after sending raises :class:`DataTablesImportUncertainError`.
        A task calls :meth:`import_csv` or the operators instead, which send once across tries
        (:class:`~airflow_tables.hooks.send_once.SendOnce`).
        """
        with sendable(file_path, encoding) as source:
            return self._send_import(project_id, source, card_id, table_name)

    def _send_import(self, project_id: str | None, source: Source, card_id: str | None, table_name: str | None) -> str:
        """:meth:`send_import` of a source ready to send (:func:`~airflow_tables.hooks._sendable.sendable`)."""
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

        with credit_claimed(self.settings, self.datatables_conn_id, project, self.log):  # [datatables] credit_budget
            started = time.monotonic()
            try:
                with span("send", project_id=project, card_id=card_id, file=name, bytes=body.size):
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
        """:meth:`find_tables` as plain dicts: the department's summaries by CardID (``get_card`` has the detail)."""
        return {card_id: table.to_json() for card_id, table in self.find_tables(project_id, card_ids).items()}

    def find_card(self, project_id: str | None, card_id: str) -> dict | None:
        """:meth:`find_table` as a plain dict: the table's summary, ``None`` if it is gone."""
        table = self.find_table(project_id, card_id)
        return None if table is None else table.to_json()

    def tables_named_after(self, project_id: str | None, file_name: str) -> list[str]:
        """The CardIDs of the department's tables that an upload of ``file_name`` could have created.

        The service names an uploaded table after its file (:func:`~airflow_tables.evidence.named_after`).
        """
        return [table.card_id for table in self.tables(project_id) if named_after(table, file_name)]

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
