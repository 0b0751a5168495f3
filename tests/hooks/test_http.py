"""The shared request building, response interpretation and retry policy, without a network."""

from __future__ import annotations

import json
import pickle
import random
import re
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from airflow.sdk.definitions.connection import Connection

from airflow_tables import exceptions as ex
from airflow_tables.hooks._connection import ConnectionSettings
from airflow_tables.hooks._http import RetryPolicy, connection_error, interpret, parse_retry_after, tls_error
from airflow_tables.hooks._ids import card_segment, segment
from airflow_tables.hooks._scrub import scrub

KEY = "k3y-0123456789abcdef"
CARD = "CRD-0b6f3c1e-5d2a-4c1b-9a8e-1f2d3c4b5a69"


def settings(host="http://127.0.0.1:8765", key=KEY, port=None, **extra) -> ConnectionSettings:
    conn = Connection(conn_id="dt", conn_type="datatables", host=host, port=port, password=key, extra=json.dumps(extra))
    return ConnectionSettings.from_connection(conn)


@pytest.mark.parametrize(
    ("host", "port", "base_url"),
    [
        ("http://127.0.0.1:8765", None, "http://127.0.0.1:8765"),
        ("https://tables.example.com/", None, "https://tables.example.com"),
        ("tables.example.com", None, "https://tables.example.com"),
        ("tables.example.com", 8443, "https://tables.example.com:8443"),
        ("https://gw.example.com/data-tables/", None, "https://gw.example.com/data-tables"),
        ("http://127.0.0.1:8765", 9999, "http://127.0.0.1:8765"),
    ],
)
def test_base_url_keeps_scheme_and_prefix(host, port, base_url):
    s = settings(host, port=port)
    assert s.base_url == base_url
    assert s.request("GET", "projects", "P", "cards").url == f"{base_url}/v1.0/projects/P/cards"


@pytest.mark.parametrize("host", ["", "ftp://x.example.com", "https://x.example.com/?a=1", "https://u:p@x.example.com"])
def test_bad_host_is_refused_clearly(host):
    with pytest.raises(ValueError, match="dt") as info:
        settings(host)
    assert "u:p" not in str(info.value)


def test_defaults_and_extras():
    s = settings()
    assert (s.timeout, s.verify, s.max_retries, s.project_id, s.app_url) == (60.0, True, 5, None, None)
    s = settings(timeout="2.5", verify="false", max_retries=0, project_id=42, app_url="https://app")
    assert (s.timeout, s.verify, s.max_retries, s.project_id, s.app_url) == (
        2.5,
        False,
        0,
        "42",
        "https://app",
    )
    assert settings(verify="/etc/ssl/ca.pem").verify == "/etc/ssl/ca.pem"
    assert settings(verify=True).verify is True
    # Fields saved by the connection forms of older Airflow versions carry a prefix.
    assert settings(extra__datatables__timeout=7).timeout == 7.0


@pytest.mark.parametrize(
    ("name", "value"), [("timeout", 0), ("timeout", "soon"), ("max_retries", -1), ("max_retries", True)]
)
def test_bad_extras_are_refused(name, value):
    with pytest.raises(ValueError, match=name):
        settings(**{name: value})


def test_missing_key_is_refused():
    with pytest.raises(ValueError, match="password"):
        settings(key="")


def test_repr_and_request_repr_leave_the_key_out():
    s = settings(key="abc")
    req = s.request("GET", "projects", "P", "cards")
    assert req.headers["X-API-Key"] == "abc"
    assert "abc" not in repr(s)
    assert "abc" not in repr(req)
    assert "abc" not in req.url


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ("P1", "P1"),
        ("a/b", "a%2Fb"),
        ("../cards", "..%2Fcards"),
        ("x?y=1", "x%3Fy%3D1"),
        ("x#frag", "x%23frag"),
        ("a%2Fb", "a%252Fb"),
        ("a b", "a%20b"),
        (7, "7"),
    ],
)
def test_segment_is_one_path_segment(value, encoded):
    assert segment(value, "project_id") == encoded
    assert "/" not in encoded
    assert "?" not in encoded
    assert "#" not in encoded


@pytest.mark.parametrize("value", ["", "  ", ".", "..", None, True, ["P"]])
def test_segment_refuses_non_ids(value):
    with pytest.raises(ValueError, match="project_id"):
        segment(value, "project_id")


@pytest.mark.parametrize("card_id", ["", "CRD-", "crd-123", "CRD-../x", "CRD-a/b", "CRD-a?b", "x CRD-1", 5, None])
def test_card_id_shape_is_checked(card_id):
    with pytest.raises(ValueError, match="CardID"):
        card_segment(card_id)


def test_card_id_of_the_service_shape_passes():
    assert card_segment(CARD) == CARD


def answer(status, body, headers=None, s=None):
    s = s or settings()
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return interpret(s, s.request("GET", "projects", "P", "cards"), status, headers or {}, content)


def test_success_drops_the_envelope():
    assert answer(200, {"Msg": "OK", "ExecTime": 0.2, "Cards": []}) == {"Cards": []}
    assert answer(200, {"Msg": "OK", "ExecTime": 1, "CardID": CARD, "Rows": 3}) == {"CardID": CARD, "Rows": 3}


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, ex.DataTablesBadRequestError),
        (401, ex.DataTablesAuthenticationError),
        (402, ex.DataTablesCreditsError),
        (403, ex.DataTablesPermissionError),
        (404, ex.DataTablesNotFoundError),
        (409, ex.DataTablesConflictError),
        (413, ex.DataTablesRejectedFileError),
        (415, ex.DataTablesRejectedFileError),
        (422, ex.DataTablesRejectedFileError),
        (429, ex.DataTablesRateLimitedError),
        (500, ex.DataTablesServerError),
        (503, ex.DataTablesServerError),
        (418, ex.DataTablesError),
    ],
)
def test_status_codes_become_typed_errors(status, cls):
    with pytest.raises(cls) as info:
        answer(status, {"Msg": "nope", "ExecTime": 1})
    assert type(info.value) is cls
    assert (info.value.status_code, info.value.msg) == (status, "nope")
    assert f"HTTP {status}" in str(info.value)
    assert "nope" in str(info.value)


def test_401_is_a_permission_error_too():
    assert issubclass(ex.DataTablesAuthenticationError, ex.DataTablesPermissionError)


def test_proxy_html_page_becomes_a_short_key_free_error():
    page = f"<html><body><h1>502 Bad Gateway</h1><p>upstream said X-API-Key: {KEY}</p>{'x' * 5000}</body></html>"
    with pytest.raises(ex.DataTablesServerError) as info:
        answer(502, page.encode(), {"Content-Type": "text/html"})
    text = str(info.value)
    assert info.value.status_code == 502
    assert "502 Bad Gateway" in text
    assert "text/html" in text
    assert KEY not in text
    assert len(text) < 400


@pytest.mark.parametrize(
    "body", [b"", b"not json", b"[1, 2]", b'{"Cards": []}', b'{"Msg": "OK", "Success": false}', b'{"Msg": 3}']
)
def test_malformed_success_is_an_error(body):
    with pytest.raises(ex.DataTablesError) as info:
        answer(200, body)
    assert info.value.status_code == 200


def test_a_service_message_echoing_the_key_is_scrubbed():
    with pytest.raises(ex.DataTablesAuthenticationError) as info:
        answer(401, {"Msg": f"unknown key {KEY}"})
    assert KEY not in str(info.value)
    assert KEY not in info.value.msg


def test_redirect_is_not_followed_and_says_where():
    with pytest.raises(ex.DataTablesError, match="redirect to https://elsewhere"):
        answer(301, b"", {"Location": "https://elsewhere/v1.0"})


def test_retry_after_is_read_from_429_and_503():
    with pytest.raises(ex.DataTablesRateLimitedError) as info:
        answer(429, {"Msg": "slow down"}, {"Retry-After": "3"})
    assert info.value.retry_after == 3.0
    with pytest.raises(ex.DataTablesServerError) as info:
        answer(503, {"Msg": "busy"})
    assert info.value.retry_after is None


def test_parse_retry_after():
    assert parse_retry_after("0") == 0.0
    assert parse_retry_after("2.5") == 2.5
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 < parse_retry_after(later) <= 30
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0


def error(status=None, *, sent=True, retry_after=None):
    s = settings()
    if status is None:
        return connection_error(s, s.request("GET", "x"), OSError("boom"), sent=sent)
    try:
        answer(status, {"Msg": "m"}, {"Retry-After": str(retry_after)} if retry_after is not None else {})
    except ex.DataTablesError as exc:
        return exc
    raise AssertionError


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_transient_statuses_are_retried_only_when_idempotent(status):
    policy = RetryPolicy(3)
    assert policy.wait(0, error(status), idempotent=True) is not None
    assert policy.wait(0, error(status), idempotent=False) is None


@pytest.mark.parametrize("status", [400, 401, 402, 403, 404, 409, 413, 415, 422, 501])
def test_refusals_are_never_retried(status):
    assert RetryPolicy(3).wait(0, error(status), idempotent=True) is None


def test_connection_errors_retried_for_reads_and_for_imports_only_if_never_sent():
    policy = RetryPolicy(3)
    assert policy.wait(0, error(sent=True), idempotent=True) is not None
    assert policy.wait(0, error(sent=False), idempotent=True) is not None
    assert policy.wait(0, error(sent=False), idempotent=False) is not None
    assert policy.wait(0, error(sent=True), idempotent=False) is None


def test_backoff_is_exponential_with_full_jitter_and_stops_at_max_retries():
    random.seed(1)
    policy = RetryPolicy(4, backoff_base=1.0, backoff_max=5.0)
    for attempt, cap in enumerate([1, 2, 4, 5]):
        waits = [policy.wait(attempt, error(500), idempotent=True) for _ in range(300)]
        assert all(0 <= w <= cap for w in waits)
        assert max(waits) > 0.8 * cap
        assert min(waits) < 0.2 * cap
    assert policy.wait(4, error(500), idempotent=True) is None
    assert RetryPolicy(0).wait(0, error(500), idempotent=True) is None


def test_retry_after_is_honoured_but_not_beyond_the_limit():
    policy = RetryPolicy(3, backoff_base=100.0, max_retry_after=60)
    assert policy.wait(0, error(429, retry_after=2), idempotent=True) == 2.0
    assert policy.wait(0, error(503, retry_after=0), idempotent=True) == 0.0
    assert policy.wait(0, error(429, retry_after=3600), idempotent=True) is None


def test_errors_keep_status_and_message_across_pickle():
    exc = ex.DataTablesNotFoundError(404, "no such table", method="GET", url="http://x/v1.0")
    back = pickle.loads(pickle.dumps(exc))
    assert (type(back), back.status_code, back.msg, str(back)) == (type(exc), 404, "no such table", str(exc))


def test_error_is_built_status_first():
    error = ex.DataTablesError(409, "busy")
    assert (error.status_code, error.msg, str(error)) == (409, "busy", "failed (HTTP 409): busy")
    assert str(ex.DataTablesError(None, "no answer")) == "failed (no response): no answer"


# -- the key in every form a page may echo it ---------------------------------------------------------

# 481 printable characters, with every one that HTML, JSON and URLs escape.
LONG_KEY = ("Zk9&<x>\"q'%+/\\=?#;" + "".join(chr(33 + (i * 7) % 94) for i in range(470)))[:481]
assert len(LONG_KEY) == 481


def key_forms(key: str) -> dict[str, str]:
    import html
    from urllib.parse import quote, quote_plus

    return {
        "exact": key,
        "html": html.escape(key),
        "html-no-quotes": html.escape(key, quote=False),
        "json": json.dumps(key)[1:-1],
        "url": quote(key, safe=""),
        "url-plus": quote_plus(key),
        "url-lower-hex": re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), quote(key, safe="")),
    }


def leaked(text: str, key: str, n: int = 8) -> list[str]:
    """The pieces of ``n`` characters or more of any form of ``key`` that ``text`` shows."""
    return [
        f"{name}: {form[i : i + n]!r}"
        for name, form in key_forms(key).items()
        for i in range(len(form) - n + 1)
        if form[i : i + n] in text
    ]


@pytest.mark.parametrize("form", list(key_forms(LONG_KEY)))
def test_scrub_removes_every_form_and_any_long_fragment(form):
    shown = key_forms(LONG_KEY)[form]
    text = f"before {shown} middle {shown[100:140]} and {shown[-9:]} after"
    scrubbed = scrub(text, LONG_KEY)
    assert leaked(scrubbed, LONG_KEY) == []
    assert scrubbed.startswith("before ") and scrubbed.endswith(" after") and " middle " in scrubbed


def hostile_forms(key: str) -> dict[str, str]:
    """What a hostile answer may echo the key as, beyond the forms a proxy page uses (issue 36 point 14)."""
    return {
        "decimal-entities": "".join(f"&#{ord(c)};" for c in key),
        "hex-entities": "".join(f"&#x{ord(c):X};" for c in key),
        "fully-percent-encoded": "".join(f"%{ord(c):02X}" for c in key),
        "u-escapes": "".join(f"\\u{ord(c):04x}" for c in key),
        "upper-cased": key.upper(),
        "mixed": "".join(
            f"&#{ord(c)};" if i % 3 == 0 else f"%{ord(c):02x}" if i % 3 == 1 else c.upper() for i, c in enumerate(key)
        ),
    }


ALL_FORMS = {**key_forms(LONG_KEY), **hostile_forms(LONG_KEY)}


@pytest.mark.parametrize("form", list(ALL_FORMS))
def test_a_page_echoing_the_key_in_any_form_shows_no_piece_of_it(form):
    from airflow_tables.hooks._scrub import _decoded

    page = f"<html><body><h1>502 Bad Gateway</h1><pre>X-API-Key: {ALL_FORMS[form]}\nAccept: */*</pre></body></html>"
    s = settings(key=LONG_KEY)
    with pytest.raises(ex.DataTablesServerError) as info:
        answer(502, page.encode(), {"Content-Type": "text/html"}, s=s)
    text = str(info.value) + repr(info.value)
    assert "502 Bad Gateway" in text and "X-API-Key" in text
    assert leaked(text, LONG_KEY) == []
    plain, key = _decoded(text)[0], LONG_KEY.lower()  # read as a browser would show it, in any case
    assert not [key[i : i + 8] for i in range(len(key) - 7) if key[i : i + 8] in plain], text[:300]


def test_the_decoded_scan_leaves_ordinary_escapes_alone():
    text = "a &amp; b, 50% off, %20 and \\n, &#65;BC, caf\\u00e9"
    assert scrub(text, "dtk_" + "q" * 40) == text


def test_client_messages_are_scrubbed_before_they_are_cut():
    s = settings(key=LONG_KEY)
    req = s.request("GET", "projects", "P", "cards")
    error = connection_error(s, req, OSError(f"proxy said {json.dumps(LONG_KEY)}"), sent=True)
    assert "proxy said" in str(error) and leaked(str(error), LONG_KEY) == []
    exc = OSError(f"handshake: peer echoed {LONG_KEY[50:200]}")
    exc.reason = f"reason {LONG_KEY[:100]}"
    error = tls_error(s, req, exc)
    assert "TLS handshake" in str(error) and leaked(str(error), LONG_KEY) == []


def test_a_short_key_is_hidden_whole_and_its_escapes_do_not_eat_other_words():
    short = "a&b"
    assert scrub(f"key {short} or a&amp;b; for example a map", short) == "key *** or ***; for example a map"


def test_the_old_names_still_work_for_one_release_and_say_what_replaces_them():
    import importlib
    import sys

    from airflow.exceptions import AirflowProviderDeprecationWarning

    from airflow_tables.hooks import _http
    from airflow_tables.model import TableStatus

    with pytest.warns(
        AirflowProviderDeprecationWarning, match="use airflow_tables.hooks._connection.ConnectionSettings"
    ):
        assert _http.Settings is ConnectionSettings
    sys.modules.pop("airflow_tables.hooks.status", None)
    with pytest.warns(AirflowProviderDeprecationWarning, match="use airflow_tables.model instead"):
        status = importlib.import_module("airflow_tables.hooks.status")
    assert status.TableStatus is TableStatus
