"""The Data Tables Service client: auth, retries and every endpoint, sync (requests) and async (httpx).

Request building, response interpretation, the response cap and the retry policy live
in :mod:`airflow_tables.hooks._http`, shared by both clients; this module only moves
bytes (within the connection's ``timeout`` for the whole answer) and knows the endpoints.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import requests
import urllib3.poolmanager
from airflow.sdk import BaseHook
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from airflow_tables import metrics
from airflow_tables.exceptions import (
    DataTablesAuthenticationError,
    DataTablesBusyError,
    DataTablesConflictError,
    DataTablesConnectionError,
    DataTablesError,
    DataTablesImportUncertainError,
    DataTablesLockedError,
    DataTablesNotFoundError,
    DataTablesPermissionError,
    DataTablesServerError,
    DataTablesTimeoutError,
    DataTablesUploadFailedError,
)
from airflow_tables.hooks._http import (
    CARD_ID,
    CHUNK_SIZE,
    Body,
    Request,
    RetryPolicy,
    Settings,
    card_segment,
    connection_error,
    deadline_error,
    interpret,
    local_error,
    segment,
    ssl_context,
    tls_error,
)
from airflow_tables.hooks._multipart import MultipartFile
from airflow_tables.model import Look, TableStatus, TableWatch, check_wait, missing_from
from airflow_tables.sources import SourceError, open_source

if TYPE_CHECKING:
    import pandas as pd

T = TypeVar("T")

# Errors from requests that mean "no usable answer"; anything else is a bug and propagates as is.
_NO_ANSWER = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError)
# The client refused to build or send the request: a local problem, never retried, never quoted.
_LOCAL = (requests.exceptions.InvalidHeader, requests.exceptions.InvalidURL, requests.exceptions.InvalidSchema)
_PROBE_PROJECT = "airflow-connection-test"


def _no_answer(settings: Settings, req: Request, exc: requests.RequestException) -> DataTablesConnectionError:
    """Say why no answer came; "never sent" only when no connection was made (refused, name, TLS)."""
    import ssl

    import urllib3.exceptions

    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    cause = reason.args[0] if reason is not None and reason.args else None
    if isinstance(exc, requests.exceptions.SSLError) or isinstance(cause, ssl.SSLError):
        ssl_context(settings)  # a CA bundle that cannot be read says so, rather than "the handshake failed"
        return tls_error(settings, req, cause if isinstance(cause, ssl.SSLError) else exc)  # before any HTTP
    never_sent = isinstance(exc, requests.ConnectTimeout) or isinstance(reason, urllib3.exceptions.NewConnectionError)
    return connection_error(settings, req, reason or exc, sent=not never_sent)


async def _aexchange(settings: Settings, client: Any, req: Request) -> dict:
    """:func:`_exchange` for httpx: one request, its answer read in chunks up to the response cap."""
    import ssl

    import httpx

    try:
        async with client.stream(req.method, req.url, headers=req.headers) as resp:
            body = Body(settings, req, resp.status_code, resp.headers)
            async for chunk in resp.aiter_bytes(CHUNK_SIZE):
                body.add(chunk)
    except (httpx.LocalProtocolError, httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        raise local_error(req, exc) from None
    except httpx.DecodingError as exc:
        raise body.undecodable(exc) from None
    except httpx.ConnectError as exc:
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, ssl.SSLError):  # httpx wraps httpcore's wrapper of it
            cause = cause.__cause__ or cause.__context__
        if cause is not None:
            raise tls_error(settings, req, cause) from None
        raise connection_error(settings, req, exc, sent=False) from exc
    except httpx.TransportError as exc:
        raise connection_error(settings, req, exc, sent=not isinstance(exc, httpx.ConnectTimeout)) from exc
    return interpret(settings, req, resp.status_code, resp.headers, body.content)


def named_after(card: dict, file_name: str) -> bool:
    """Whether a table's CardName is the file's name (with or without ``.csv``): how the service names uploads."""
    name = (card.get("CardName") or "").casefold()
    return name in (file_name.casefold(), os.path.splitext(file_name)[0].casefold())


def _options(settings: Settings, req: Request) -> dict[str, Any]:
    # verify goes with each request: requests lets REQUESTS_CA_BUNDLE override a Session's verify.
    # stream: the body is read chunk by chunk, so the response cap and the deadline hold while it comes.
    return {
        "headers": req.headers,
        "timeout": settings.timeout,
        "verify": settings.verify,
        "allow_redirects": False,
        "stream": True,
    }


# -- a deadline for the whole answer (requests' timeout is per socket read) ------------------------


class _Deadline:
    """The whole answer's deadline for one sync request: at expiry, shut the socket it is read from.

    requests' ``timeout`` bounds each socket read, so a server dripping a byte a second
    never trips it. The watch starts when urllib3 starts waiting for the answer (for an
    upload, once its body is sent, which may rightly take longer than the timeout); a read
    request counts from the start. Shutting the socket ends a blocked read at once, in
    whichever thread it is, and the reader then reports the deadline, not a broken connection.
    """

    def __init__(self, seconds: float, *, started: float | None) -> None:
        self.seconds = seconds
        self.started = started
        self.expired = False
        self._done = False
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            if self.started is None:
                self.started = time.monotonic()
            wait = max(0.0, self.started + self.seconds - time.monotonic())
            self._timer = threading.Timer(wait, self._expire, (sock,))
            self._timer.daemon = True
            self._timer.start()

    def passed(self) -> bool:
        """Whether the deadline has passed, for a connection that was not watched (through a SOCKS proxy)."""
        if self.started is not None and time.monotonic() > self.started + self.seconds:
            self.expired = True
        return self.expired

    def _expire(self, sock: socket.socket) -> None:
        with self._lock:
            if self._done:
                return
            self.expired = True
        with contextlib.suppress(OSError):
            # The plain socket's shutdown, under TLS too: SSLSocket.shutdown would unwrap it under a reader.
            socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def close(self) -> None:
        with self._lock:
            self._done = True
            if self._timer is not None:
                self._timer.cancel()


_DEADLINE: contextvars.ContextVar[_Deadline | None] = contextvars.ContextVar("datatables_deadline", default=None)


class _Watched:
    """A urllib3 connection that hands its socket to the request's :class:`_Deadline` as the wait begins."""

    sock: socket.socket | None

    def getresponse(self, *args: Any, **kwargs: Any) -> Any:
        deadline = _DEADLINE.get()
        if deadline is not None and self.sock is not None:
            deadline.watch(self.sock)
        return super().getresponse(*args, **kwargs)  # type: ignore[misc]


class _WatchedHTTPConnection(_Watched, HTTPConnection):
    """urllib3's plain connection, watched."""


class _WatchedHTTPSConnection(_Watched, HTTPSConnection):
    """urllib3's TLS connection, watched."""


class _WatchedPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


_WATCHED_POOLS = {"http": _WatchedPool, "https": _WatchedHTTPSPool}


class _WatchedAdapter(HTTPAdapter):
    """requests' adapter, with connections that start the request's :class:`_Deadline` when the answer is awaited."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _WATCHED_POOLS

    def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **kwargs)
        if manager.pool_classes_by_scheme is urllib3.poolmanager.pool_classes_by_scheme:  # not SOCKS's own pools
            manager.pool_classes_by_scheme = _WATCHED_POOLS
        return manager


def _session() -> requests.Session:
    session = requests.Session()
    adapter = _WatchedAdapter()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def _exchange(
    settings: Settings, session: requests.Session, req: Request, *, upload: Any = None, headers: Any = None
) -> dict:
    """Send one request and read its whole answer within ``settings.timeout`` and the response cap.

    ``upload``: a body to send first; the deadline then starts once it has gone out.
    """
    deadline = _Deadline(settings.timeout, started=None if upload is not None else time.monotonic())
    token = _DEADLINE.set(deadline)
    resp: requests.Response | None = None
    try:
        try:
            options = {**_options(settings, req), **({"headers": headers} if headers else {})}
            resp = session.request(req.method, req.url, data=upload, **options)
            body = Body(settings, req, resp.status_code, resp.headers)
            for chunk in resp.iter_content(CHUNK_SIZE):
                body.add(chunk)
                if deadline.passed():
                    break
        except _LOCAL as exc:
            raise local_error(req, exc) from None
        except requests.exceptions.ContentDecodingError as exc:
            raise body.undecodable(exc) from None
        except OSError as exc:  # requests' errors are OSErrors, and so is its "CA bundle not found"
            if deadline.expired:
                raise deadline_error(settings, req) from None
            if isinstance(exc, _NO_ANSWER):
                raise _no_answer(settings, req, exc) from exc
            if resp is not None:  # the answer broke off while it was being read
                raise connection_error(settings, req, exc, sent=True) from exc
            if not isinstance(exc, requests.RequestException):
                ssl_context(settings)  # requests checks the CA bundle's path before it connects
            raise
        if deadline.expired:  # an answer delimited by the connection's end looks complete when cut off
            raise deadline_error(settings, req)
        return interpret(settings, req, resp.status_code, resp.headers, body.content)
    finally:
        deadline.close()
        _DEADLINE.reset(token)
        if resp is not None:
            resp.close()  # after a partial read this closes the connection instead of draining it


class DataTablesHook(BaseHook):
    """Talk to the Data Tables Service with the API key of an Airflow connection.

    :param datatables_conn_id: a ``datatables`` connection: ``host`` the base URL, ``password``
        the API key, extras ``timeout``, ``verify``, ``max_retries``, ``project_id``, ``app_url``.
    :param backoff_base: seconds (default: the connection's ``retry_backoff`` extra, else 1);
        retry *n* waits a random time up to ``backoff_base * 2**n``
        (capped at ``backoff_max``) unless the service sends ``Retry-After``.
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
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.datatables_conn_id = datatables_conn_id
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self._settings: Settings | None = None
        self._session: requests.Session | None = None
        self._aclient: Any = None  # an httpx.AsyncClient inside async_client()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(datatables_conn_id={self.datatables_conn_id!r})"

    # -- connection -------------------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        """The connection, resolved once (blocking: do not use on an event loop, see :meth:`asettings`)."""
        if self._settings is None:
            self._settings = Settings.from_connection(self.get_connection(self.datatables_conn_id))
        return self._settings

    async def asettings(self) -> Settings:
        """The connection, resolved without blocking the event loop (for triggers)."""
        if self._settings is None:
            aget = getattr(self, "aget_connection", None)
            if aget is not None:
                conn = await aget(self.datatables_conn_id)
            else:  # Airflow before aget_connection: run the blocking lookup in a thread
                from asgiref.sync import sync_to_async

                conn = await sync_to_async(self.get_connection)(self.datatables_conn_id)
            self._settings = Settings.from_connection(conn)
        return self._settings

    def get_conn(self) -> requests.Session:
        """The requests Session for reads and deletes (key and TLS options go with each request)."""
        if self._session is None:
            self._session = _session()
        return self._session

    def _policy(self, settings: Settings, retries: int | None = None) -> RetryPolicy:
        return RetryPolicy(
            settings.max_retries if retries is None else retries,
            backoff_base=settings.retry_backoff if self.backoff_base is None else self.backoff_base,
            backoff_max=self.backoff_max,
            logger=self.log,
        )

    @staticmethod
    def _project(settings: Settings, project_id: str | None) -> str:
        if project_id is not None and not str(project_id).strip():
            # An explicit empty value (a template that rendered "") is a mistake, not "the default".
            raise ValueError("project_id is empty: name a department, or leave project_id out to use the connection's.")
        project = project_id if project_id is not None else settings.project_id
        if project is None:
            raise ValueError("No project_id given and the connection has no 'project_id' extra: name a department.")
        segment(project, "project_id")  # the same check for the form field as for a path
        return str(project)

    def _cards_request(
        self, settings: Settings, method: str, project_id: str | None, card_id: str | None = None
    ) -> Request:
        segments = ["projects", segment(self._project(settings, project_id), "project_id"), "cards"]
        if card_id is not None:
            segments.append(card_segment(card_id))
        return settings.request(method, *segments)

    # -- sync transport ---------------------------------------------------------------------

    def _call(
        self, method: str, project_id: str | None, card_id: str | None = None, *, retries: int | None = None
    ) -> dict:
        """Send a GET or DELETE with retries; a 404 after a DELETE that may have landed means it did."""
        settings, session = self.settings, self.get_conn()
        req = self._cards_request(settings, method, project_id, card_id)
        may_have_landed = False

        def send() -> dict:
            nonlocal may_have_landed
            try:
                return _exchange(settings, session, req)
            except DataTablesConnectionError as error:
                may_have_landed |= error.request_sent
                raise
            except DataTablesServerError:
                may_have_landed = True
                raise
            except DataTablesNotFoundError:
                if req.method == "DELETE" and may_have_landed:
                    self.log.info("%s %s: gone now, so the earlier attempt deleted it", req.method, req.url)
                    return {}
                raise

        return self._policy(settings, retries).run(send, idempotent=True)

    # -- async transport (the trigger) ------------------------------------------------------

    @contextlib.asynccontextmanager
    async def async_client(self) -> AsyncIterator[None]:
        """Reuse one httpx client for the async calls made inside the block (a trigger's poll loop).

        Building a client (and its TLS context) costs more than a GET to a nearby server.
        """
        import httpx

        settings = await self.asettings()
        async with httpx.AsyncClient(
            verify=ssl_context(settings), timeout=settings.timeout, follow_redirects=False
        ) as client:
            self._aclient = client
            try:
                yield
            finally:
                self._aclient = None

    async def _acall(self, method: str, project_id: str | None, card_id: str | None = None) -> dict:
        if self._aclient is None:
            async with self.async_client():
                return await self._acall(method, project_id, card_id)
        import asyncio

        settings = await self.asettings()
        req = self._cards_request(settings, method, project_id, card_id)
        client = self._aclient

        async def send() -> dict:
            try:
                # httpx's timeout too is per read: the whole exchange gets the connection's timeout.
                return await asyncio.wait_for(_aexchange(settings, client, req), settings.timeout)
            except asyncio.TimeoutError:
                raise deadline_error(settings, req) from None

        return await self._policy(settings).arun(send, idempotent=True)

    # -- endpoints --------------------------------------------------------------------------

    @staticmethod
    def _cards_of(body: dict) -> list[dict]:
        cards = body.get("Cards")
        # Every caller reads c["CardID"]: an entry without one is a malformed answer, not a KeyError later.
        if not isinstance(cards, list) or not all(
            isinstance(c, dict) and isinstance(c.get("CardID"), str) for c in cards
        ):
            raise DataTablesError(200, "malformed list of tables: no 'Cards' array of objects with a CardID")
        return cards

    def list_cards(self, project_id: str | None = None) -> list[dict]:
        """List the department's tables (summaries) the key can see; no credit is used."""
        return self._cards_of(self._call("GET", project_id))

    async def a_list_cards(self, project_id: str | None = None) -> list[dict]:
        """:meth:`list_cards` without blocking the event loop."""
        return self._cards_of(await self._acall("GET", project_id))

    def get_card(self, project_id: str | None, card_id: str) -> dict:
        """Fetch one table's detail (summary, ``Description``, ``Columns``) without the envelope."""
        return self._call("GET", project_id, card_id)

    async def a_get_card(self, project_id: str | None, card_id: str) -> dict:
        """:meth:`get_card` without blocking the event loop."""
        return await self._acall("GET", project_id, card_id)

    def delete_card(self, project_id: str | None, card_id: str) -> None:
        """Delete a table for good.

        A refusal (409) is told apart by a look at the table, deciding from ``Processed``
        first: :class:`DataTablesBusyError` while it is being read (whatever
        ``LockedFromDelete`` says: wait, then try again), :class:`DataTablesLockedError` when
        it is processed and locked (a live connection feeds it).
        """
        try:
            self._call("DELETE", project_id, card_id)
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
        fields = {"method": conflict.method, "url": conflict.url}
        if look.status is TableStatus.BEING_READ:
            return DataTablesBusyError(409, f"{conflict.msg} ({look.message})", **fields)
        if action == "delete" and (look.summary or {}).get("LockedFromDelete") is True:
            return DataTablesLockedError(
                409, f"{conflict.msg} (LockedFromDelete is true: a live connection feeds this table)", **fields
            )
        source = (look.summary or {}).get("ConnectorSource")
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
    ) -> str:
        """Upload a CSV as a new table, or as ``card_id``'s new data; return the CardID. Costs one credit.

        ``file_path`` is a local path, an ``airflow.sdk.ObjectStoragePath`` or a URI
        (``s3://aws_conn@bucket/key.csv``); the table is named after its base name.
        ``encoding`` declares the file's encoding (a Python codec name): it is converted
        to UTF-8 while it is sent, after a first pass that counts its UTF-8 length and
        refuses a byte not valid in it. A file that cannot be read fails before any request.

        The file is streamed (never held in memory) and sent at most once: it is re-sent
        only when the connection was refused, so the service cannot have seen it. Any
        other failure after sending raises :class:`DataTablesImportUncertainError`.
        """
        try:
            source = open_source(file_path, encoding=encoding)
            source.utf8_size()  # a converted file is read once to count: a byte not valid in it stops here
        except SourceError as err:
            raise type(err)(err.label, f"{err.reason}; nothing was sent to the Data Tables Service.") from None
        settings = self.settings
        project = self._project(settings, project_id)
        fields = {"ProjectID": project}
        if card_id is not None:
            card_segment(card_id)
            fields["CardID"] = card_id
        body = MultipartFile(fields, "File", source, logger=self.log)
        req = settings.request("POST", "data", "import")
        headers = {**req.headers, "Content-Type": body.content_type}
        name = source.name
        self.log.info(
            "Importing %s (%.1f MiB) into department %s%s",
            name,
            body.size / 2**20,
            project,
            f" to replace {card_id}" if card_id else "",
        )

        def send() -> dict:
            # A fresh connection: a stale pooled one could fail after sending and look ambiguous.
            with _session() as session:
                # requests streams any iterable of bytes-likes; its stubs only name bytes and str.
                return _exchange(settings, session, req, upload=cast(Iterable[bytes], body), headers=headers)

        started = time.monotonic()
        try:
            result = self._policy(settings).run(send, idempotent=False)
        except DataTablesConflictError as conflict:
            if card_id is None:
                raise
            raise self._conflict(project, card_id, conflict, "replace") from None
        except DataTablesError as exc:
            if body.changed_size:  # the closing boundary was never sent: no service can parse that form
                raise DataTablesError(
                    None,
                    f"{name} changed size while it was being uploaded ({body.changed_size}); the upload was "
                    "cut off before its end, so nothing was imported. Write the file completely, then import it.",
                    method="POST",
                    url=req.url,
                ) from exc
            if body.read_error:  # likewise: a storage error mid-way leaves a form no service can parse
                raise DataTablesError(
                    None,
                    f"{name} could not be read to its end while it was being uploaded ({body.read_error}); the "
                    "upload was cut off before its end, so nothing was imported.",
                    method="POST",
                    url=req.url,
                ) from exc
            uncertain = exc.status_code is None or exc.status_code >= 500 or exc.status_code < 300
            if uncertain and not (isinstance(exc, DataTablesConnectionError) and not exc.request_sent):
                raise self._uncertain(exc, name, fields) from exc
            raise
        new_id = result.get("CardID")
        if new_id is None and card_id is not None:
            new_id = card_id  # a replacement keeps its id; the seed only implies that the answer repeats it
        if not isinstance(new_id, str) or not CARD_ID.match(new_id):
            raise self._uncertain(DataTablesError(200, f"answer without a CardID: {sorted(result)}"), name, fields)
        self.log.info("Imported %s as %s in %.1f s", name, new_id, time.monotonic() - started)
        metrics.incr("imports", project_id=project)
        metrics.incr("credits_spent", project_id=project)
        metrics.incr("bytes_uploaded", body.size, project_id=project)
        return new_id

    @staticmethod
    def _uncertain(exc: DataTablesError, name: str, fields: dict) -> DataTablesImportUncertainError:
        project, card_id = fields["ProjectID"], fields.get("CardID")
        check = (
            f"get_card({project!r}, {card_id!r}) for a new UploadCompletionTime"
            if card_id
            else f"list_cards({project!r}) for a new table named after {name!r}"
        )
        return DataTablesImportUncertainError(
            exc.status_code,
            f"the import of {name} may have happened ({exc.msg}); it was not re-sent because each import "
            f"costs a credit. An import or replace task's next try finds what this import did and does not "
            f"send the file again; outside a task, check {check} before trying again.",
            method="POST",
            url=exc.url,
        )

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
        may lag behind a fresh import); one that is not there either is left out.
        """
        cards = {card["CardID"]: card for card in self.list_cards(project_id)}
        for card_id in missing_from(cards, card_ids):
            with contextlib.suppress(DataTablesNotFoundError):
                cards[card_id] = self.get_card(project_id, card_id)
        return cards

    async def a_find_cards(self, project_id: str | None, card_ids: Iterable[str]) -> dict[str, dict]:
        """:meth:`find_cards` without blocking the event loop (the trigger's department poller)."""
        cards = {card["CardID"]: card for card in await self.a_list_cards(project_id)}
        for card_id in missing_from(cards, card_ids):
            with contextlib.suppress(DataTablesNotFoundError):
                cards[card_id] = await self.a_get_card(project_id, card_id)
        return cards

    def find_card(self, project_id: str | None, card_id: str) -> dict | None:
        """The table's summary (see :meth:`find_cards`), ``None`` if it is gone."""
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
                raise DataTablesTimeoutError(None, f"{look.message} after {waited}")
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

        Raises :class:`DataTablesUploadFailedError` when ``SuccessfulUpload`` is false,
        :class:`DataTablesNotFoundError` when the table is gone and
        :class:`DataTablesTimeoutError` after ``timeout`` seconds (wall clock).

        :param replaced_after: after a replacement, the table's previous ``UploadCompletionTime``
            (see :class:`~airflow_tables.model.TableWatch`).
        """
        look = self.wait_for_table(
            project_id, TableWatch(card_id, replaced_after), poll_interval=poll_interval, timeout=timeout
        )
        if look.status is TableStatus.FAILED:
            raise DataTablesUploadFailedError(None, look.message)
        if look.status is TableStatus.GONE:
            raise DataTablesNotFoundError(None, look.message)
        return look.summary or {}

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
    ) -> T:
        """Call ``send`` (a replacement or a delete) once the table is not being read.

        The service refuses both with 409 while the table is being read. ``send`` receives the
        look that found the table idle (ready, failed or gone: it decides). When the service
        refuses it because a read started meanwhile (:class:`DataTablesBusyError`), this waits
        again and sends again, at most ``attempts`` more times; any other refusal is raised
        at once, so a table that can never be replaced is never sent the file twice.

        :param wait: ``False`` raises :class:`DataTablesBusyError` at once for a table being read.
        """
        for attempt in itertools.count():
            if wait:
                look = self.wait_for_table(project_id, card_id, poll_interval=poll_interval, timeout=timeout)
            else:
                look = self.look(project_id, card_id)
                if look.status is TableStatus.BEING_READ:
                    raise DataTablesBusyError(None, look.message)
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

        The service names an uploaded table after its file; a retry whose earlier import lost
        its answer compares this before and after to find the table that import made.
        """
        return [card["CardID"] for card in self.list_cards(project_id) if named_after(card, file_name)]

    def find_lost_import(self, project_id: str | None, file_name: str, before: Collection[str]) -> list[str]:
        """The tables named after ``file_name`` that are new since ``before`` (see :meth:`tables_named_after`)."""
        return [card_id for card_id in self.tables_named_after(project_id, file_name) if card_id not in before]

    def test_connection(self) -> tuple[bool, str]:
        """One cheap GET, not retried: does the service accept the key (and see the ``project_id`` extra)?"""
        try:
            settings = self.settings
            project = settings.project_id
            try:
                cards = self._cards_of(self._call("GET", project or _PROBE_PROJECT, retries=0))
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
