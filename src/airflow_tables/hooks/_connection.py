"""A Data Tables connection, read from Airflow and checked: where the service is, the key, the extras.

:class:`ConnectionSettings` is what every request starts from: it turns the connection's
``host`` into the base URL, its ``password`` into the ``X-API-Key`` header (refusing a key
no HTTP client can send, without showing it), its extras into typed knobs, and builds each
:class:`Request` (the base URL, the API version, the ids as path segments, the headers).
What an answer means and when a request is tried again are :mod:`airflow_tables.hooks._http`'s.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from airflow_tables import __version__
from airflow_tables.hooks._ids import card_segment, checked_project_id, segment
from airflow_tables.hooks._scrub import scrub

API_VERSION = "v1.0"
DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 5
DEFAULT_RETRY_BACKOFF = 1.0
DEFAULT_MAX_RESPONSE_MIB = 64.0
USER_AGENT = f"airflow-tables/{__version__}"
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}

log = logging.getLogger(__name__)


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
