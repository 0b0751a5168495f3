"""What goes on the wire and what an answer means, shared by the sync (requests) and async (httpx) transports.

Four decisions live here and only here: how a request is built (base URL,
percent-encoded id segments, the ``X-API-Key`` header), what a response means
(envelope, status code, typed error, a proxy's HTML page), how much of it is read
(the ``[datatables] max_response_mib`` cap) and when a failure is retried (which
errors are transient, exponential backoff with full jitter, ``Retry-After``). None
of it knows an HTTP library: the transports (:mod:`airflow_tables.hooks._transport`)
only move bytes and say, with the errors built here, why none came. Every text that
came from elsewhere (a service's body, a client library's message) passes through
:func:`scrub` before it is cut or shown.
"""

from __future__ import annotations

import email.utils
import functools
import html
import itertools
import json
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import quote, quote_plus, urlsplit, urlunsplit

from airflow_tables import __version__
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

if TYPE_CHECKING:
    from airflow_tables.hooks._multipart import MultipartFile
    from airflow_tables.sources import Source

T = TypeVar("T")

API_VERSION = "v1.0"
DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 5
DEFAULT_RETRY_BACKOFF = 1.0
DEFAULT_MAX_RESPONSE_MIB = 64.0
# Reads of an answer: the cap is checked after each, so at most this much is read past it.
CHUNK_SIZE = 64 * 1024
# A run of this many characters of the key, in any of its forms, is hidden wherever it appears.
MIN_FRAGMENT = 8
ENVELOPE = ("Msg", "ExecTime")
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})
CARD_ID = re.compile(r"CRD-[0-9A-Za-z][0-9A-Za-z_-]*\Z")
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
USER_AGENT = f"airflow-tables/{__version__}"
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}

log = logging.getLogger(__name__)


class LogLike(Protocol):
    """What the clients need of a logger: ``logging.Logger`` and Airflow's task loggers alike."""

    def info(self, msg: Any, /, *args: Any) -> Any: ...

    def warning(self, msg: Any, /, *args: Any) -> Any: ...


@dataclass(frozen=True)
class Request:
    """One request, ready for either client; its repr leaves the headers (the key) out."""

    method: str
    url: str
    headers: dict[str, str] = field(repr=False)


@dataclass(frozen=True)
class ConnectionSettings:
    """A Data Tables connection, resolved and checked; its repr leaves the API key out."""

    base_url: str
    api_key: str = field(repr=False)
    timeout: float = DEFAULT_TIMEOUT
    verify: bool | str = True
    max_retries: int = DEFAULT_MAX_RETRIES
    retry_backoff: float = DEFAULT_RETRY_BACKOFF
    project_id: str | None = None
    app_url: str | None = None
    conn_id: str = ""
    max_response_bytes: int = int(DEFAULT_MAX_RESPONSE_MIB * 2**20)

    @classmethod
    def from_connection(cls, conn: Any) -> ConnectionSettings:
        """Read an Airflow connection: ``host`` the base URL, ``password`` the key, the rest from extras."""
        raw = conn.extra_dejson or {}
        # Forms of older Airflow versions stored fields as extra__datatables__<name>.
        extra = {k.removeprefix("extra__datatables__"): v for k, v in raw.items()}
        return cls(
            base_url=_base_url(conn.host, conn.port, conn.conn_id),
            api_key=_api_key(conn.password, conn.conn_id),
            timeout=_number(extra.get("timeout"), DEFAULT_TIMEOUT, "timeout", float, minimum=0.001),
            verify=_verify(extra.get("verify")),
            max_retries=_number(extra.get("max_retries"), DEFAULT_MAX_RETRIES, "max_retries", int, minimum=0),
            retry_backoff=_number(extra.get("retry_backoff"), DEFAULT_RETRY_BACKOFF, "retry_backoff", float, minimum=0),
            project_id=_project_extra(extra.get("project_id"), conn.conn_id),
            app_url=extra.get("app_url") or None,
            conn_id=conn.conn_id,
            max_response_bytes=max_response_bytes(),
        )

    def request(self, method: str, *segments: str, content_type: str | None = None) -> Request:
        """Build a request to ``{base_url}/v1.0/{segments}``; each segment is already encoded."""
        headers = {"X-API-Key": self.api_key, "Accept": "application/json", "User-Agent": USER_AGENT}
        if content_type is not None:
            headers["Content-Type"] = content_type
        return Request(method, "/".join([self.base_url, API_VERSION, *segments]), headers)

    def department(self, project_id: str | None) -> str:
        """The department a call names, else the connection's ``project_id`` extra (:func:`checked_project_id`)."""
        if project_id is None and self.project_id is None:
            raise ValueError("No project_id given and the connection has no 'project_id' extra: name a department.")
        return checked_project_id(self.project_id if project_id is None else project_id)

    def cards_request(self, method: str, project_id: str | None, card_id: str | None = None) -> Request:
        """A request to the department's tables, or to one of them (the path of seed sections 4.1 to 4.3)."""
        segments = ["projects", segment(self.department(project_id), "project_id"), "cards"]
        if card_id is not None:
            segments.append(card_segment(card_id))
        return self.request(method, *segments)

    def scrub(self, text: str) -> str:
        """Remove the key, in every form, from text that came from elsewhere (see :func:`scrub`)."""
        return scrub(text, self.api_key)


def __getattr__(name: str) -> Any:
    """``Settings``, the old name of :class:`ConnectionSettings`: kept for one minor release, with a warning."""
    if name == "Settings":
        _deprecated("airflow_tables.hooks._http.Settings", "airflow_tables.hooks._http.ConnectionSettings")
        return ConnectionSettings
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _deprecated(old: str, new: str) -> None:
    import warnings

    from airflow.exceptions import AirflowProviderDeprecationWarning

    warnings.warn(
        f"{old} is deprecated and will be removed in the next minor release of airflow-tables; use {new} instead.",
        AirflowProviderDeprecationWarning,
        stacklevel=3,
    )


def scrub(text: str, secret: str) -> str:
    """Replace with ``***`` every run of ``MIN_FRAGMENT`` or more characters of ``secret`` in ``text``.

    A proxy's error page may echo the request's headers as they are, HTML-escaped,
    JSON-escaped or URL-encoded, and a message is cut to an excerpt: removing only the
    exact key, or removing it after the cut, showed most of a long key. So every form's
    fragments are hidden, and callers scrub before they cut (:func:`excerpt`). A form
    shorter than ``MIN_FRAGMENT`` (a short key) is hidden only whole: its pieces would be
    escape syntax (``amp``) found in any text.

    A hostile answer may also echo the key in a form no list foresees: every character as a
    numeric HTML entity, fully percent-encoded, as ``\\u`` escapes, or upper-cased. So the text
    is also read decoded (:func:`_decoded`: each escape read as the character it stands for,
    letters lower-cased), and a run of the key found there hides the escapes it was read from.
    """
    if not secret or not text:
        return text
    hidden = [False] * len(text)
    for size, grams in _fragments(secret):
        for at in range(len(text) - size + 1):
            if text[at : at + size] in grams:
                hidden[at : at + size] = [True] * size
    plain, spans = _decoded(text)
    key = secret.lower()
    size = min(MIN_FRAGMENT, len(key))
    pieces = frozenset(key[at : at + size] for at in range(len(key) - size + 1))
    for at in range(len(plain) - size + 1):
        if plain[at : at + size] in pieces:
            start, end = spans[at][0], spans[at + size - 1][1]
            hidden[start:end] = [True] * (end - start)
    if not any(hidden):
        return text
    out: list[str] = []
    for at, char in enumerate(text):
        if not hidden[at]:
            out.append(char)
        elif at == 0 or not hidden[at - 1]:
            out.append("***")
    return "".join(out)


#: The escapes a page may write a character as: HTML entities (numeric and named), percent-encoding,
#: and the backslash escapes of JSON, JavaScript and Python.
_ESCAPE = re.compile(
    r"&#[xX][0-9a-fA-F]{1,6};?|&#[0-9]{1,7};?|&[a-zA-Z][a-zA-Z0-9]{1,31};|%[0-9a-fA-F]{2}"
    r"|\\u[0-9a-fA-F]{4}|\\U[0-9a-fA-F]{8}|\\x[0-9a-fA-F]{2}|\\[\\/\"']"
)


def _decoded(text: str) -> tuple[str, list[tuple[int, int]]]:
    """``text`` with each escape read as its character, lower-cased; and where each character came from.

    ``spans[i]`` is the ``(start, end)`` of the text that the decoded character ``i`` was read
    from, so a run found in the decoded text hides exactly those characters of the original.
    """
    chars: list[str] = []
    spans: list[tuple[int, int]] = []
    at = 0
    for match in _ESCAPE.finditer(text):
        for i in range(at, match.start()):
            chars.append(_lower(text[i]))
            spans.append((i, i + 1))
        chars.append(_lower(_unescaped(match.group())))
        spans.append(match.span())
        at = match.end()
    for i in range(at, len(text)):
        chars.append(_lower(text[i]))
        spans.append((i, i + 1))
    return "".join(chars), spans


def _unescaped(escape: str) -> str:
    """The one character an escape stands for (the escape itself where it stands for none, or for more)."""
    try:
        if escape.startswith("&#"):
            digits = escape[2:].rstrip(";")
            return chr(int(digits[1:], 16) if digits[:1] in "xX" else int(digits))
        if escape.startswith("&"):
            text = html.unescape(escape)
            return text if len(text) == 1 else escape
        if escape.startswith("%"):
            return chr(int(escape[1:], 16))
        if escape[:2] in ("\\u", "\\U", "\\x"):
            return chr(int(escape[2:], 16))
        return escape[1]
    except (ValueError, OverflowError):
        return escape


def _lower(char: str) -> str:
    lowered = char.lower()
    return lowered if len(lowered) == 1 else char


@functools.lru_cache(maxsize=8)
def _fragments(secret: str) -> tuple[tuple[int, frozenset[str]], ...]:
    """What :func:`scrub` looks for, by length: the runs of ``MIN_FRAGMENT`` characters of every form
    a page may show ``secret`` in, and the short forms whole."""
    url = {quote(secret, safe=""), quote(secret), quote_plus(secret)}
    forms = {
        secret,
        html.escape(secret),
        html.escape(secret, quote=False),
        html.escape(secret).replace("&#x27;", "&#39;"),
        json.dumps(secret)[1:-1],
        json.dumps(secret)[1:-1].replace("/", "\\/"),
        *url,
        *(re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), form) for form in url),
    }
    by_size: dict[int, set[str]] = {}
    for form in forms:
        size = min(MIN_FRAGMENT, len(form))
        by_size.setdefault(size, set()).update(form[at : at + size] for at in range(len(form) - size + 1))
    return tuple((size, frozenset(grams)) for size, grams in sorted(by_size.items()))


def excerpt(text: str, secret: str, limit: int = 200, *, markup: bool = True) -> str:
    """At most ``limit`` characters of ``text``, the secret scrubbed first; ``markup``: tags and spacing removed.

    Only a window of the text is scrubbed (the excerpt cannot reach past it), so a large
    body costs no more than a small one.
    """
    window = scrub(text[: limit * 8 + 6 * len(secret)], secret)
    if markup:
        window = " ".join(re.sub(r"<[^>]*>", " ", window).split())
    return window if len(window) <= limit else window[: limit - 3] + "..."


def max_response_bytes() -> int:
    """``[datatables] max_response_mib`` in bytes: the largest answer the hook reads."""
    from airflow_tables.version_compat import conf

    value = conf.get("datatables", "max_response_mib", fallback=str(DEFAULT_MAX_RESPONSE_MIB))
    try:
        mib = float(value)
    except (TypeError, ValueError):
        mib = 0.0
    if not mib > 0:
        raise ValueError(
            f"[datatables] max_response_mib must be a number of MiB above 0 (default {DEFAULT_MAX_RESPONSE_MIB:g}), "
            f"not {value!r}: fix it in airflow.cfg or AIRFLOW__DATATABLES__MAX_RESPONSE_MIB."
        )
    return int(mib * 2**20)


def _project_extra(value: Any, conn_id: str) -> str | None:
    """The ``project_id`` extra: a string (or a number written without quotes), never a dict or a list."""
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(
            f"Connection {conn_id!r}: the extra 'project_id' must be a string (a ProjectID from the API access "
            f"page), not {type(value).__name__} {value!r}."
        )
    return str(value)


def _api_key(value: str | None, conn_id: str) -> str:
    """The key as it goes in the header: surrounding whitespace removed, anything but printable ASCII refused.

    Keys never contain whitespace; a pasted key often brings some (a secret file written
    with ``echo``, a copy from a web page), and HTTP clients refuse such a header with the
    value in their message. A non-ASCII character (a look-alike letter from a document)
    made requests and httpx raise a bare ``UnicodeEncodeError`` holding the key, and a
    Latin-1 one worked in one client and not the other. No message here shows the key.
    """
    key = (value or "").strip()
    if not key:
        raise ValueError(f"Connection {conn_id!r} has no API key: put it in the password field.")
    if key != value:
        log.warning("Connection %r: removed whitespace around the API key (was it pasted?)", conn_id)
    at = next((i for i, c in enumerate(key) if not 0x21 <= ord(c) <= 0x7E), None)
    if at is not None:
        bad = key[at]
        what = (
            f"a control character or space (U+{ord(bad):04X})"
            if ord(bad) < 0x80 or bad.isspace()
            else "a character that is not ASCII (a look-alike letter?)"
        )
        raise ValueError(
            f"Connection {conn_id!r}: the API key contains {what} at position {at + 1} of {len(key)}; "
            "keys are printable ASCII only, as HTTP headers carry them: paste the key again."
        )
    return key


def _base_url(host: str | None, port: int | None, conn_id: str) -> str:
    host = (host or "").strip()
    if not host:
        raise ValueError(f"Connection {conn_id!r} has no host: set it to the service's base URL.")
    parts = urlsplit(host if "://" in host else f"https://{host}")
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ValueError(
            f"Connection {conn_id!r}: host must be a base URL such as https://tables.example.com "
            "(http or https, no query)."
        )
    if parts.username or parts.password:
        raise ValueError(f"Connection {conn_id!r}: put no credentials in the host; the key goes in password.")
    path = parts.path.rstrip("/")
    if path.rsplit("/", 1)[-1] == API_VERSION:
        raise ValueError(
            f"Connection {conn_id!r}: drop '/{API_VERSION}' from the host ({host!r}); the hook adds the "
            f"version to every path itself."
        )
    netloc = parts.netloc if port is None or parts.port is not None else f"{parts.netloc}:{port}"
    return urlunsplit((parts.scheme, netloc, path, "", ""))


def _number(value: Any, default: float, name: str, kind: type, *, minimum: float) -> Any:
    if value in (None, ""):
        return kind(default)
    try:
        number = kind(value)
    except (TypeError, ValueError):
        number = None
    if number is None or number < minimum or isinstance(value, bool):
        raise ValueError(f"Connection extra {name!r} must be a {kind.__name__} >= {minimum}, not {value!r}.")
    return number


def _verify(value: Any) -> bool | str:
    """``verify``: true (default), false, or the path of a CA bundle."""
    if value in (None, ""):
        return True
    if isinstance(value, bool):
        return value
    text = str(value).strip()
    if text.lower() in _TRUE | _FALSE:
        return text.lower() in _TRUE
    return text


def segment(value: str, name: str) -> str:
    """Percent-encode an id as one path segment, so ``/``, ``?``, ``#``, ``%2F`` cannot change the URL."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string (an id), not {type(value).__name__} {value!r}.")
    if not value.strip() or value in (".", ".."):
        raise ValueError(f"{name} must be a non-empty id, not {value!r}.")
    return quote(value, safe="")


def card_id_problem(card_id: object) -> str | None:
    """What is wrong with a CardID's shape (``CRD-`` and a UUID-like token), or ``None``: no request needed."""
    if card_id is None or card_id == "":
        return "card_id is empty: name the table to use (a CardID such as 'CRD-...')"
    if not isinstance(card_id, str):
        return f"card_id must be a CardID string such as 'CRD-...', not {type(card_id).__name__} {card_id!r}"
    if card_id.strip() in ("None", "null"):
        return (
            f"card_id is {card_id!r}, not a CardID: the value it was rendered from was empty "
            "(an XCom or param with no value?)"
        )
    if card_id != card_id.strip():
        return f"card_id {card_id!r} has white space around it (a CardID has none)"
    if card_id[:4].upper() == "CRD-" and card_id[:4] != "CRD-":
        return f"card_id {card_id!r} must start with upper-case 'CRD-' (CardIDs are case-sensitive)"
    if not CARD_ID.match(card_id):
        return f"card_id {card_id!r} is not a CardID: the service's ids are 'CRD-' followed by a UUID"
    return None


def project_id_problem(project_id: object) -> str | None:
    """What is wrong with a ``project_id`` given explicitly (not left out), or ``None``.

    The one check of a department's id, for the hook, the tasks and the triggers alike. An
    empty value, white space or the text ``"None"`` is what a template that found nothing
    renders: it is refused, never read as "the connection's default" (that would import into
    another department) nor sent as a department called ``None``.
    """
    if isinstance(project_id, bool) or not isinstance(project_id, (str, int)):
        return f"project_id must be a string (a department's ProjectID), not {type(project_id).__name__} {project_id!r}"
    text = str(project_id).strip()
    if not text or text == "None":
        return (
            f"project_id is {project_id!r}, which names no department (a template that rendered nothing?): name a "
            "department, or leave project_id out to use the connection's project_id extra"
        )
    if text in (".", ".."):
        return f"project_id is {project_id!r}, not a department's ProjectID"
    return None


def checked_project_id(project_id: object) -> str:
    """``project_id`` as the department's id (surrounding white space removed), or ``ValueError`` naming the problem."""
    problem = project_id_problem(project_id)
    if problem is not None:
        raise ValueError(problem)
    return str(project_id).strip()


def card_segment(card_id: str) -> str:
    """Check the shape the service gives CardIDs, then encode it as a path segment."""
    problem = card_id_problem(card_id)
    if problem is not None:
        raise ValueError(problem)
    return segment(card_id, "card_id")


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
