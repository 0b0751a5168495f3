"""What a request and an answer are, shared by the sync (requests) and async (httpx) transports.

Three decisions live here and only here: which request each endpoint is (a :class:`Call`
per endpoint: its method and path, whether it may be sent again), what a response means
(envelope, status code, typed error, a proxy's HTML page, the ``[datatables]
max_response_mib`` cap while it is read) and when a failure is retried (which errors are
transient, exponential backoff with full jitter, ``Retry-After``). None of it knows an HTTP
library: the transports (:mod:`airflow_tables.hooks._transport`) only move bytes and say,
with the errors built here, why none came. The connection a request starts from is
:mod:`airflow_tables.hooks._connection`'s, the ids' shape :mod:`airflow_tables.hooks._ids`';
every text that came from elsewhere (a service's body, a client library's message) passes
through :func:`airflow_tables.hooks._scrub.scrub` before it is cut or shown.
"""

from __future__ import annotations

import email.utils
import itertools
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

from airflow_tables.exceptions import (
    DataTablesAuthenticationError,
    DataTablesBadRequestError,
    DataTablesConflictError,
    DataTablesConnectionError,
    DataTablesCreditsError,
    DataTablesError,
    DataTablesImportUncertainError,
    DataTablesNotFoundError,
    DataTablesPermissionError,
    DataTablesRateLimitedError,
    DataTablesRejectedFileError,
    DataTablesServerError,
)
from airflow_tables.hooks._connection import ConnectionSettings, Request
from airflow_tables.hooks._ids import card_segment
from airflow_tables.hooks._scrub import excerpt

if TYPE_CHECKING:
    from airflow_tables.hooks._multipart import MultipartFile
    from airflow_tables.sources import Source

T = TypeVar("T")

# Reads of an answer: the cap is checked after each, so at most this much is read past it.
CHUNK_SIZE = 64 * 1024
ENVELOPE = ("Msg", "ExecTime")
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
ERRORS: dict[int, type[DataTablesError]] = {
    400: DataTablesBadRequestError,
    401: DataTablesAuthenticationError,
    402: DataTablesCreditsError,
    403: DataTablesPermissionError,
    404: DataTablesNotFoundError,
    409: DataTablesConflictError,
    413: DataTablesRejectedFileError,
    415: DataTablesRejectedFileError,
    422: DataTablesRejectedFileError,
    429: DataTablesRateLimitedError,
}

log = logging.getLogger(__name__)


class LogLike(Protocol):
    """What the clients need of a logger: ``logging.Logger`` and Airflow's task loggers alike."""

    def info(self, msg: Any, /, *args: Any) -> Any: ...

    def warning(self, msg: Any, /, *args: Any) -> Any: ...


def __getattr__(name: str) -> Any:
    """``Settings``, the old name of :class:`ConnectionSettings`: kept for one minor release, with a warning."""
    if name == "Settings":
        from airflow_tables.hooks._deprecated import warn_deprecated

        warn_deprecated("airflow_tables.hooks._http.Settings", "airflow_tables.hooks._connection.ConnectionSettings")
        return ConnectionSettings
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def interpret(
    settings: ConnectionSettings, req: Request, status: int, headers: Mapping[str, str], content: bytes
) -> dict:
    """Decide what a response means: the body without its envelope, or a typed :class:`DataTablesError`."""
    body = _json_object(content)
    if 200 <= status < 300 and body is not None and body.get("Msg") == "OK" and body.get("Success") is not False:
        return {k: v for k, v in body.items() if k not in ENVELOPE}
    key = settings.api_key
    if 300 <= status < 400:
        msg = (
            f"unexpected redirect to {excerpt(headers.get('Location') or '(no Location)', key, 300)}; "
            "set the connection's host to the service's final base URL"
        )
    elif body is not None and isinstance(body.get("Msg"), str):
        msg = excerpt(body["Msg"], key, 2000, markup=False)
    else:
        kind = "non-JSON" if body is None else "malformed"
        text = content[: 1600 + 6 * len(key)].decode("utf-8", errors="replace")
        msg = f"{kind} response ({headers.get('Content-Type') or 'no content type'}): {excerpt(text, key)!r}"
    cls = ERRORS.get(status) or (DataTablesServerError if status >= 500 else DataTablesError)
    error = cls(status, settings.scrub(msg), method=req.method, url=req.url)
    if isinstance(error, (DataTablesRateLimitedError, DataTablesServerError)):
        error.retry_after = parse_retry_after(headers.get("Retry-After"))
    raise error


def served_at(headers: Mapping[str, str]) -> str | None:
    """The service's clock when it answered (its HTTP ``Date``), as :func:`~airflow_tables.model.service_time` has it.

    ``None`` when the answer has no ``Date``, or one that is not an HTTP date.
    """
    from airflow_tables.model import service_time

    value = headers.get("Date")
    if not value:
        return None
    try:
        return service_time(email.utils.parsedate_to_datetime(value))
    except (TypeError, ValueError, IndexError):
        return None


def connection_error(
    settings: ConnectionSettings, req: Request, exc: BaseException, *, sent: bool
) -> DataTablesConnectionError:
    """No answer came: say why, without the key, and whether the request may have reached the service."""
    what = "could not connect" if not sent else "no answer (the request may have reached the service)"
    error = DataTablesConnectionError(
        None,
        f"{what}: {type(exc).__name__}: {excerpt(str(exc), settings.api_key, 300)}",
        method=req.method,
        url=req.url,
    )
    error.request_sent = sent
    return error


def tls_error(settings: ConnectionSettings, req: Request, exc: BaseException) -> DataTablesConnectionError:
    """The TLS handshake failed: nothing was sent, and trying again will not help.

    ``WRONG_VERSION_NUMBER`` is what a client reads when the port answers plain HTTP, the
    usual cause being a host written without its scheme (which means https).
    """
    reason = excerpt(str(getattr(exc, "reason", None) or type(exc).__name__), settings.api_key, 300)
    hint = ""
    if "WRONG_VERSION_NUMBER" in str(exc) or "wrong version number" in str(exc).lower():
        # The connection's base URL (its path prefix kept), not the request's: that one names an endpoint.
        plain = urlunsplit(("http", *urlsplit(settings.base_url)[1:3], "", ""))
        hint = f" The port seems to answer plain HTTP: if the service has no TLS, set the host to {plain}."
    error = DataTablesConnectionError(
        None,
        f"the TLS handshake with {urlsplit(req.url).netloc} failed ({reason}), so nothing was sent.{hint}",
        method=req.method,
        url=req.url,
    )
    error.request_sent = False
    error.retryable = False
    return error


def local_error(req: Request, exc: BaseException) -> DataTablesError:
    """The HTTP client refused to build or send the request: nothing was sent, and a retry would fail the same.

    The client's own message is left out on purpose: it may quote a header value.
    """
    error = DataTablesConnectionError(
        None,
        f"the request could not be sent ({type(exc).__name__}: the HTTP client refused it before sending); "
        "check the connection's host and key",
        method=req.method,
        url=req.url,
    )
    error.request_sent = False
    error.retryable = False
    return error


def ssl_context(settings: ConnectionSettings) -> Any:
    """``verify`` as an ``ssl.SSLContext`` for a CA bundle's path (as httpx wants it), else the flag.

    A bundle that is missing, unreadable or holds no certificate raises
    :func:`ca_bundle_error` (the sync client asks this after its TLS set-up failed).
    """
    if not isinstance(settings.verify, str):
        return settings.verify
    import ssl

    try:
        return ssl.create_default_context(cafile=settings.verify)
    except OSError as exc:  # ssl.SSLError is one: a file that holds no certificate
        raise ca_bundle_error(settings, exc) from None


def ca_bundle_error(settings: ConnectionSettings, exc: OSError) -> DataTablesConnectionError:
    """The CA bundle the ``verify`` extra names cannot be used: nothing was sent, and a retry cannot help."""
    reason = exc.strerror or getattr(exc, "reason", None) or type(exc).__name__
    error = DataTablesConnectionError(
        None,
        f"connection {settings.conn_id!r}: the CA bundle {settings.verify} named by its 'verify' extra cannot "
        f"be used ({reason}), so nothing was sent; make the file readable (on the workers and the triggerer), "
        "or set verify to true to use the system's certificate authorities",
    )
    error.request_sent = False
    error.retryable = False
    return error


def deadline_error(settings: ConnectionSettings, req: Request) -> DataTablesConnectionError:
    """The whole answer did not come within the connection's ``timeout``: the request may have been served."""
    return connection_error(
        settings,
        req,
        TimeoutError(
            f"no complete answer within {settings.timeout:g} s (the connection's timeout covers the whole answer, "
            "not each read); the service or a proxy in front of it is answering too slowly"
        ),
        sent=True,
    )


class Body:
    """An answer's body, collected up to ``[datatables] max_response_mib``; past it, a clear error.

    A declared ``Content-Length`` over the cap fails before anything is read; otherwise
    the clients add what they read chunk by chunk, so at most one chunk past the cap is
    ever held, whatever the service sends.
    """

    def __init__(self, settings: ConnectionSettings, req: Request, status: int, headers: Mapping[str, str]) -> None:
        self.settings, self.req, self.status, self.headers = settings, req, status, headers
        self.size = 0
        self._chunks: list[bytes] = []
        declared = str(headers.get("Content-Length") or "").strip()
        if declared.isdigit() and int(declared) > settings.max_response_bytes:
            raise self._too_large(f"it declares {int(declared) / 2**20:,.1f} MiB")

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self.size > self.settings.max_response_bytes:
            self._chunks.clear()
            raise self._too_large("reading stopped there")
        self._chunks.append(chunk)

    @property
    def content(self) -> bytes:
        return b"".join(self._chunks)

    def undecodable(self, exc: BaseException) -> DataTablesError:
        """The body does not match its ``Content-Encoding`` (bytes that are not gzip, say)."""
        encoding = self.headers.get("Content-Encoding") or "none"
        return DataTablesError(
            self.status,
            f"the answer could not be decoded (Content-Encoding: {excerpt(encoding, self.settings.api_key, 40)}: "
            f"{excerpt(str(exc), self.settings.api_key, 200)}); the service or a proxy sent a body that does not "
            "match its encoding",
            method=self.req.method,
            url=self.req.url,
        )

    def _too_large(self, how: str) -> DataTablesError:
        cap = self.settings.max_response_bytes / 2**20
        return DataTablesError(
            self.status,
            f"the answer is larger than {cap:g} MiB, the most the hook reads ({how}); nothing of it was kept. "
            "If the service really answers this much, raise [datatables] max_response_mib "
            "(AIRFLOW__DATATABLES__MAX_RESPONSE_MIB) on the workers and the triggerer",
            method=self.req.method,
            url=self.req.url,
        )


def _json_object(content: bytes) -> dict | None:
    try:
        body = json.loads(content)
    except (ValueError, RecursionError):  # RecursionError: JSON nested deeper than the interpreter's stack
        return None
    return body if isinstance(body, dict) else None


def parse_retry_after(value: str | None) -> float | None:
    """``Retry-After`` in seconds: a number of seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def may_have_landed(error: DataTablesError) -> bool:
    """Whether the request that failed so may have been carried out by the service all the same.

    No answer after the request was sent, a server error, or a success that could not be
    read: the service may have done it. A refusal (4xx) or a connection never made: it did not.
    """
    if isinstance(error, DataTablesConnectionError):
        return error.request_sent
    return error.status_code is None or error.status_code >= 500 or error.status_code < 300


def uncertain_import(error: DataTablesError, name: str, project_id: str, card_id: str | None) -> DataTablesError:
    """The import's failure as the caller must see it: uncertain when the file may have landed, else as it is."""
    if not may_have_landed(error):
        return error
    check = (
        f"get_card({project_id!r}, {card_id!r}) for a new UploadCompletionTime"
        if card_id
        else f"list_cards({project_id!r}) for a new table named after {name!r}"
    )
    return DataTablesImportUncertainError(
        error.status_code,
        f"the import of {name} may have happened ({error.msg}); it was not re-sent because each import "
        f"costs a credit. Inside a task (the import and replace operators, or import_csv in a @task), the "
        f"next try looks for what this import did and sends the file again only when the service shows it "
        f"never arrived; outside a task, check {check} before trying again.",
        method="POST",
        url=error.url,
    )


def is_transient(error: DataTablesError, *, idempotent: bool = True) -> bool:
    """Whether trying the same request again later may succeed (and, for a paid one, may be done).

    The retry policy asks this after each attempt, and a trigger's poller after the policy
    gave up on one listing: what is not transient (a refused key, a missing department, a
    local problem with the request, a failed TLS handshake) ends a wait at once.
    """
    if isinstance(error, DataTablesConnectionError):
        return error.retryable and (idempotent or not error.request_sent)
    return idempotent and error.status_code in TRANSIENT_STATUSES


@dataclass(frozen=True)
class RetryPolicy:
    """When to try again: transient failures only, exponential backoff with full jitter, ``Retry-After``.

    ``idempotent`` requests (GET, DELETE) are retried on 429, 500, 502, 503, 504 and on
    connection failures; the paid import only when the connection was never made.
    """

    max_retries: int
    backoff_base: float = 1.0
    backoff_max: float = 60.0
    max_retry_after: float = 300.0
    logger: LogLike = field(default=log, repr=False, compare=False)

    def wait(self, attempt: int, error: DataTablesError, *, idempotent: bool) -> float | None:
        """Seconds to wait before retry number ``attempt + 1``, or ``None`` to give up and raise."""
        if attempt >= self.max_retries or not is_transient(error, idempotent=idempotent):
            return None
        retry_after = getattr(error, "retry_after", None)
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after else None
        return random.uniform(0, min(self.backoff_max, self.backoff_base * 2**attempt))

    def _next(self, attempt: int, error: DataTablesError, idempotent: bool) -> float | None:
        wait = self.wait(attempt, error, idempotent=idempotent)
        if wait is not None:
            self.logger.warning("%s; retry %d of %d in %.2f s", error, attempt + 1, self.max_retries, wait)
        return wait

    def run(self, send: Callable[[], T], *, idempotent: bool) -> T:
        """Call ``send`` until it returns, or fails in a way that must not be retried."""
        for attempt in itertools.count():
            try:
                return send()
            except DataTablesError as error:
                wait = self._next(attempt, error, idempotent)
                if wait is None:
                    raise
            time.sleep(wait)
        raise AssertionError("unreachable")

    async def arun(self, send: Callable[[], Awaitable[T]], *, idempotent: bool) -> T:
        """:meth:`run` for coroutines: the same decisions, sleeping without blocking the event loop."""
        import asyncio

        for attempt in itertools.count():
            try:
                return await send()
            except DataTablesError as error:
                wait = self._next(attempt, error, idempotent)
                if wait is None:
                    raise
            await asyncio.sleep(wait)
        raise AssertionError("unreachable")


# -- the endpoints, and the one way every call of them goes ----------------------------------------


@dataclass(frozen=True)
class Call:
    """One call of an endpoint, described: its request, and how the call path reads its failures.

    Each endpoint of the service (the seed's section 4) has one builder below, and every call,
    sync or async, goes through :func:`run_call` or :func:`arun_call`: a new endpoint is one
    builder and one call of the hook's ``_call``/``_acall``.

    :param idempotent: sending it again cannot do it twice (a GET, a DELETE), so a transient
        failure is tried again; the paid import is sent again only when the connection was refused.
    :param gone_means_done: a 404 after an attempt that may have landed (no answer, a 5xx)
        means that attempt did it: a DELETE whose answer was lost deleted the table.
    :param upload: the request's body (the import's form), sent from its start by each attempt.
    """

    request: Request
    idempotent: bool = True
    gone_means_done: bool = False
    upload: MultipartFile | None = field(default=None, repr=False)


def list_tables(settings: ConnectionSettings, project_id: str | None) -> Call:
    """The department's tables (seed 4.1); free."""
    return Call(settings.cards_request("GET", project_id))


def fetch_table(settings: ConnectionSettings, project_id: str | None, card_id: str) -> Call:
    """One table with its description and columns (seed 4.2); free."""
    return Call(settings.cards_request("GET", project_id, card_id))


def delete_table(settings: ConnectionSettings, project_id: str | None, card_id: str) -> Call:
    """Delete a table for good (seed 4.3): gone after an attempt that may have landed means deleted."""
    return Call(settings.cards_request("DELETE", project_id, card_id), gone_means_done=True)


def import_file(
    settings: ConnectionSettings,
    project_id: str | None,
    source: Source,
    *,
    filename: str,
    card_id: str | None = None,
    logger: LogLike | None = None,
) -> Call:
    """The paid import (seed 4.4): ``source`` as a new table, or as ``card_id``'s new data; never idempotent.

    The form's fields are the seed's: ``ProjectID``, ``CardID`` for a replacement (its shape
    checked first), and the file part ``File`` named ``filename``, streamed from ``source``.
    """
    from airflow_tables.hooks._multipart import MultipartFile

    fields = {"ProjectID": settings.department(project_id)}
    if card_id is not None:
        card_segment(card_id)
        fields["CardID"] = card_id
    body = MultipartFile(fields, "File", source, filename=filename, logger=logger)
    request = settings.request("POST", "data", "import", content_type=body.content_type)
    return Call(request, idempotent=False, upload=body)


@dataclass
class _Attempts:
    """What the attempts of one call have shown: whether one of them may have landed."""

    call: Call
    logger: LogLike
    landed: bool = False

    def failed(self, error: DataTablesError) -> dict:
        """The answer a failed attempt stands for (a 404 read as done: :attr:`Call.gone_means_done`), else raise."""
        if self.call.gone_means_done and self.landed and isinstance(error, DataTablesNotFoundError):
            req = self.call.request
            self.logger.info("%s %s: gone now, so the earlier attempt did it", req.method, req.url)
            return {}
        self.landed |= may_have_landed(error)
        raise error


def run_call(policy: RetryPolicy, call: Call, send: Callable[[], dict]) -> dict:
    """Make ``call``, ``send`` being one attempt of it (a transport's exchange), retried as ``policy`` says."""
    attempts = _Attempts(call, policy.logger)

    def attempt() -> dict:
        try:
            return send()
        except DataTablesError as error:
            return attempts.failed(error)

    return policy.run(attempt, idempotent=call.idempotent)


async def arun_call(policy: RetryPolicy, call: Call, send: Callable[[], Awaitable[dict]]) -> dict:
    """:func:`run_call` for an async transport: the same attempts, retries and reading of failures."""
    attempts = _Attempts(call, policy.logger)

    async def attempt() -> dict:
        try:
            return await send()
        except DataTablesError as error:
            return attempts.failed(error)

    return await policy.arun(attempt, idempotent=call.idempotent)
