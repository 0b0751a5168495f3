"""The HTTP libraries behind the hook: one transport for requests (sync), one for httpx (async).

A transport sends one :class:`~airflow_tables.hooks._connection.Request` and reads its whole
answer within the connection's ``timeout`` and the response cap, then hands it to
:func:`~airflow_tables.hooks._http.interpret`. Each maps its library's exceptions to our
errors in exactly one method (``_fail``); request building, retries and what an answer
means live in :mod:`airflow_tables.hooks._http` and know nothing of either library.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import socket
import ssl
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NoReturn, cast

import requests
import urllib3.exceptions
import urllib3.poolmanager
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from airflow_tables.hooks._connection import ConnectionSettings, Request
from airflow_tables.hooks._http import (
    CHUNK_SIZE,
    Body,
    connection_error,
    deadline_error,
    interpret,
    local_error,
    served_at,
    ssl_context,
    tls_error,
)

if TYPE_CHECKING:
    import httpx

# Errors from requests that mean "no usable answer"; anything else is a bug and propagates as is.
_NO_ANSWER = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError)
# The client refused to build or send the request: a local problem, never retried, never quoted.
_LOCAL = (requests.exceptions.InvalidHeader, requests.exceptions.InvalidURL, requests.exceptions.InvalidSchema)
#: An answer at least this large is parsed on a thread, off the event loop (a triggerer's loop serves every trigger).
PARSE_OFF_LOOP_BYTES = 256 * 1024


# -- requests ---------------------------------------------------------------------------------------


class SyncTransport:
    """requests, with a deadline for the whole answer (requests' ``timeout`` is per socket read).

    :param session: the pooled session for reads and deletes; an upload always gets a fresh
        one, since a stale pooled connection could fail after sending and look ambiguous.
    """

    def __init__(self, settings: ConnectionSettings, session: requests.Session | None = None) -> None:
        self.settings = settings
        self.session = session
        #: The service's clock at its last answer (:func:`~airflow_tables.hooks._http.served_at`).
        self.served_at: str | None = None

    def exchange(self, req: Request, *, upload: Iterable[bytes | memoryview] | None = None) -> dict:
        """Send ``req`` (with ``upload`` as its body) and return the answer's meaning.

        For an upload, the deadline starts once the body has gone out.
        """
        if upload is None and self.session is not None:
            return self._exchange(self.session, req, None)
        with new_session() as session:
            return self._exchange(session, req, upload)

    def _exchange(self, session: requests.Session, req: Request, upload: Any) -> dict:
        settings = self.settings
        deadline = _Deadline(settings.timeout, started=None if upload is not None else time.monotonic())
        token = _DEADLINE.set(deadline)
        resp: requests.Response | None = None
        body: Body | None = None
        try:
            try:
                # verify goes with each request: requests lets REQUESTS_CA_BUNDLE override a Session's verify.
                # stream: the body is read chunk by chunk, so the response cap and the deadline hold while it comes.
                # requests streams any iterable of bytes-likes; its stubs only name bytes and str.
                resp = session.request(
                    req.method,
                    req.url,
                    data=cast(Iterable[bytes], upload),
                    headers=req.headers,
                    timeout=settings.timeout,
                    verify=settings.verify,
                    allow_redirects=False,
                    stream=True,
                )
                body = Body(settings, req, resp.status_code, resp.headers)
                for chunk in resp.iter_content(CHUNK_SIZE):
                    body.add(chunk)
                    if deadline.passed():
                        break
            except OSError as exc:  # requests' errors are OSErrors, and so is its "CA bundle not found"
                self._fail(req, exc, deadline=deadline, answered=resp is not None, body=body)
            if deadline.expired:  # an answer delimited by the connection's end looks complete when cut off
                raise deadline_error(settings, req)
            assert resp is not None and body is not None
            self.served_at = served_at(resp.headers)
            return interpret(settings, req, resp.status_code, resp.headers, body.content)
        finally:
            deadline.close()
            _DEADLINE.reset(token)
            if resp is not None:
                resp.close()  # after a partial read this closes the connection instead of draining it

    def _fail(self, req: Request, exc: OSError, *, deadline: _Deadline, answered: bool, body: Body | None) -> NoReturn:
        """Raise what a failure of requests means: the one place its exceptions are read.

        "Never sent" only when no connection was made (refused, name not found, TLS).
        """
        settings = self.settings
        if isinstance(exc, _LOCAL):
            raise local_error(req, exc) from None
        if isinstance(exc, requests.exceptions.ContentDecodingError) and body is not None:
            raise body.undecodable(exc) from None
        if deadline.expired:
            raise deadline_error(settings, req) from None
        if isinstance(exc, _NO_ANSWER):
            reason = getattr(exc.args[0], "reason", None) if exc.args else None
            cause = reason.args[0] if reason is not None and reason.args else None
            if isinstance(exc, requests.exceptions.SSLError) or isinstance(cause, ssl.SSLError):
                ssl_context(settings)  # a CA bundle that cannot be read says so, rather than "the handshake failed"
                raise tls_error(settings, req, cause if isinstance(cause, ssl.SSLError) else exc) from exc
            never_sent = isinstance(exc, requests.ConnectTimeout) or isinstance(
                reason, urllib3.exceptions.NewConnectionError
            )
            raise connection_error(settings, req, reason or exc, sent=not never_sent) from exc
        if answered:  # the answer broke off while it was being read
            raise connection_error(settings, req, exc, sent=True) from exc
        if not isinstance(exc, requests.RequestException):
            ssl_context(settings)  # requests checks the CA bundle's path before it connects
        raise exc


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


def new_session() -> requests.Session:
    """A requests Session whose connections keep the whole answer's deadline."""
    session = requests.Session()
    adapter = _WatchedAdapter()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


# -- httpx ------------------------------------------------------------------------------------------


class AsyncTransport:
    """httpx, one client reused for every request made inside ``async with`` (a trigger's poll loop).

    Building a client (and its TLS context) costs more than a GET to a nearby server.
    """

    def __init__(self, settings: ConnectionSettings) -> None:
        self.settings = settings
        self._client: httpx.AsyncClient | None = None

    async def __aenter__(self) -> AsyncTransport:
        import httpx

        settings = self.settings
        client = httpx.AsyncClient(verify=ssl_context(settings), timeout=settings.timeout, follow_redirects=False)
        self._client = await client.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.__aexit__(*exc_info)

    async def exchange(self, req: Request) -> dict:
        """Send ``req`` and return the answer's meaning; httpx's timeout too is per read, so the whole
        exchange gets the connection's timeout."""
        try:
            return await asyncio.wait_for(self._exchange(req), self.settings.timeout)
        except TimeoutError:
            raise deadline_error(self.settings, req) from None

    async def _exchange(self, req: Request) -> dict:
        import httpx

        assert self._client is not None, "use the transport inside `async with`"
        body: Body | None = None
        try:
            async with self._client.stream(req.method, req.url, headers=req.headers) as resp:
                body = Body(self.settings, req, resp.status_code, resp.headers)
                async for chunk in resp.aiter_bytes(CHUNK_SIZE):
                    body.add(chunk)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            self._fail(req, exc, body)
        if len(body.content) >= PARSE_OFF_LOOP_BYTES:
            # A department's listing can be tens of MiB: parsed here it would hold the triggerer's loop
            # (and every other trigger on it) for most of a second (benchmarks/NOTES.md).
            return await asyncio.to_thread(interpret, self.settings, req, resp.status_code, resp.headers, body.content)
        return interpret(self.settings, req, resp.status_code, resp.headers, body.content)

    def _fail(self, req: Request, exc: httpx.HTTPError | httpx.InvalidURL, body: Body | None) -> NoReturn:
        """Raise what a failure of httpx means: the one place its exceptions are read."""
        import httpx

        settings = self.settings
        if isinstance(exc, (httpx.LocalProtocolError, httpx.UnsupportedProtocol, httpx.InvalidURL)):
            raise local_error(req, exc) from None
        if isinstance(exc, httpx.DecodingError) and body is not None:
            raise body.undecodable(exc) from None
        if isinstance(exc, httpx.ConnectError):
            cause: BaseException | None = exc
            while cause is not None and not isinstance(cause, ssl.SSLError):  # httpx wraps httpcore's wrapper of it
                cause = cause.__cause__ or cause.__context__
            if cause is not None:
                raise tls_error(settings, req, cause) from None
            raise connection_error(settings, req, exc, sent=False) from exc
        if isinstance(exc, httpx.TransportError):
            raise connection_error(settings, req, exc, sent=not isinstance(exc, httpx.ConnectTimeout)) from exc
        raise exc
