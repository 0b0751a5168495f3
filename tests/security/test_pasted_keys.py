"""A key pasted with whitespace works and never shows; a key with a control character is refused unseen.

Issue 11, defect 1: HTTP clients refuse a header value with a line break and quote the
value in their error (requests' ``InvalidHeader``, httpx's ``LocalProtocolError``), which
then reached ``test_connection()``, logs and trigger events, and was retried as if the
network had failed.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from tests.hooks.conftest import make_hook  # noqa: F401  (the fixture, reused)

from airflow_tables import exceptions as ex


def posts_and_gets(emulator) -> int:
    return len(emulator.stats()["requests"])


@pytest.mark.parametrize("pasted", [" {k}", "{k}\n", "{k}\r\n", "\t{k} \n"], ids=["space", "lf", "crlf", "both"])
def test_surrounding_whitespace_is_removed_with_a_warning_naming_the_connection(
    emulator,
    make_hook,  # noqa: F811
    caplog,
    pasted,
):
    hook = make_hook(emulator.base_url, pasted.format(k=emulator.api_key), conn_id="pasted_key")
    with caplog.at_level(logging.WARNING):
        cards = hook.list_cards(emulator.project_id)
        acards = asyncio.run(hook.a_list_cards(emulator.project_id))
    assert {c["CardID"] for c in cards} == {c["CardID"] for c in acards}
    assert hook.test_connection()[0] is True
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("'pasted_key'" in w and "whitespace" in w for w in warnings), warnings
    assert not any(emulator.api_key in w for w in warnings)


@pytest.mark.parametrize("inside", ["\n", "\x00", "\x1b", "\x7f", " "], ids=["lf", "nul", "esc", "del", "space"])
def test_a_key_with_a_control_character_inside_is_refused_before_any_request(
    emulator,
    make_hook,  # noqa: F811
    capfd,
    caplog,
    inside,
):
    key = emulator.api_key[:4] + inside + emulator.api_key[4:]
    hook = make_hook(emulator.base_url, key, conn_id="broken_key")
    emulator.reset_stats()
    texts = []
    with pytest.raises(ValueError, match="control character") as sync_error:
        hook.list_cards(emulator.project_id)
    texts.append(str(sync_error.value))
    hook._settings = None
    with pytest.raises(ValueError, match="control character") as async_error:
        asyncio.run(hook.a_list_cards(emulator.project_id))
    texts.append(str(async_error.value))
    ok, message = hook.test_connection()
    texts.append(message)

    assert ok is False
    assert all("'broken_key'" in t and "control character" in t for t in texts), texts
    assert posts_and_gets(emulator) == 0
    out, err = capfd.readouterr()
    shown = "\n".join([*texts, out, err, *(r.getMessage() for r in caplog.records)])
    for secret in (key, repr(key)[1:-1], emulator.api_key, emulator.api_key[4:]):
        assert secret not in shown


def test_a_request_the_client_refuses_is_never_retried_nor_quoted(emulator, make_hook, caplog):  # noqa: F811
    """A header value the HTTP client refuses (here forced past the key check) is a local failure."""
    from dataclasses import replace

    hook = make_hook(emulator.base_url, emulator.api_key, max_retries=5)
    secret = "sekrit-value-123"
    hook._settings = replace(hook.settings, api_key=f"{secret}\n")  # what the key check now prevents
    emulator.reset_stats()
    with caplog.at_level(logging.INFO):
        with pytest.raises(ex.DataTablesConnectionError) as sync_error:
            hook.list_cards(emulator.project_id)
        with pytest.raises(ex.DataTablesConnectionError) as async_error:
            asyncio.run(hook.a_list_cards(emulator.project_id))
    for error in (sync_error.value, async_error.value):
        assert error.request_sent is False and error.retryable is False
        assert secret not in str(error) and "refused it before sending" in str(error)
        assert error.__cause__ is None and error.__suppress_context__  # the client's message is not chained
    assert not [r for r in caplog.records if "retry" in r.getMessage()]
    assert posts_and_gets(emulator) == 0


@pytest.mark.parametrize(
    "key", ["ключ-{k}", "clé-{k}", "{k}\u00a0x", "{k}\u200b"], ids=["cyrillic", "latin-1", "nbsp", "zwsp"]
)
def test_a_key_that_is_not_printable_ascii_is_refused_unseen_sync_and_async(
    emulator,
    make_hook,  # noqa: F811
    caplog,
    key,
):
    key = key.format(k=emulator.api_key)
    hook = make_hook(emulator.base_url, key, conn_id="foreign_key")
    emulator.reset_stats()
    texts = []
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(ValueError, match="printable ASCII") as sync_error:
            hook.list_cards(emulator.project_id)
        hook._settings = None
        with pytest.raises(ValueError, match="printable ASCII") as async_error:
            asyncio.run(hook.a_list_cards(emulator.project_id))
        ok, message = hook.test_connection()
    texts += [str(sync_error.value), repr(sync_error.value), str(async_error.value), message]
    assert ok is False
    assert all("'foreign_key'" in t for t in texts), texts
    assert posts_and_gets(emulator) == 0
    shown = "\n".join([*texts, caplog.text])
    for secret in (key, emulator.api_key, key[:6], emulator.api_key[:8], key.encode("utf-8", "replace").hex()):
        assert secret not in shown
