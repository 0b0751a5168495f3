"""The API key taken out of text that came from elsewhere, before it is cut or shown.

A service's body, a proxy's error page or a client library's message may carry the key,
as it is or in any escaped form; every such text passes through :func:`scrub` (or
:func:`excerpt`, which scrubs and then cuts) before it goes into an error, a log line or
a page. Kept apart from the wire rules (:mod:`airflow_tables.hooks._http`) because it is
one job with its own hazards, read by the connection's settings, the answers' errors and
the tests that try to make the key leak.
"""

from __future__ import annotations

import functools
import html
import json
import re
from urllib.parse import quote, quote_plus

# A run of this many characters of the key, in any of its forms, is hidden wherever it appears.
MIN_FRAGMENT = 8


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
