"""The transports against a hostile server (what the emulator cannot do): whole-answer deadlines,
the response cap, bodies that do not match their encoding; and each library's errors mapped once."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import threading
import time

import pytest

from airflow_tables import exceptions as ex
from airflow_tables.hooks._connection import ConnectionSettings
from airflow_tables.hooks._transport import AsyncTransport, SyncTransport

# -- a hostile server: what the emulator cannot do ------------------------------------------------


class _Hostile(threading.Thread):
    """A raw HTTP/1.1 server on 127.0.0.1 whose every connection is handled by ``answer(conn, request)``.

    ``request`` is the head of the request (bytes up to the blank line), its body read off the
    socket when it declares a Content-Length; ``sent`` counts the body bytes ``answer`` got out
    before the client hung up, so a test can tell the client stopped reading.
    """

    def __init__(self, answer) -> None:
        super().__init__(daemon=True)
        self.answer = answer
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.sent = 0
        self.requests: list[bytes] = []

    def run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                data = conn.recv(65536)
                if not data:
                    return
                head += data
            head, _, body = head.partition(b"\r\n\r\n")
            length = re.search(rb"(?i)content-length: *(\d+)", head)
            remaining = int(length.group(1)) - len(body) if length else 0
            while remaining > 0:
                data = conn.recv(min(remaining, 1 << 20))
                if not data:
                    return
                remaining -= len(data)
            self.requests.append(head)
            with contextlib.suppress(OSError):  # the client hung up: what several tests expect
                self.answer(self, conn, head)

    def write(self, conn: socket.socket, data: bytes) -> None:
        conn.sendall(data)
        self.sent += len(data)


@pytest.fixture
def hostile():
    """Start a hostile server with ``hostile(answer)``; it stops with the test."""
    servers: list[_Hostile] = []

    def start(answer) -> _Hostile:
        server = _Hostile(answer)
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.sock.close()


def _drip(where: str, every: float = 0.2, for_at_most: float = 20.0):
    """An answer that comes one byte at a time, each in time for a per-read timeout, never complete."""

    def answer(server, conn, head) -> None:
        body = b'{"Msg": "OK", "Cards": []}' + b" " * 1000
        whole = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: " + b"s" * 1000 + b"\r\n"
        whole += b"Content-Length: %d\r\n\r\n" % len(body) + body
        start = whole.index(b"X-Slow") if where == "head" else whole.index(b"\r\n\r\n") + 4
        server.write(conn, whole[:start])
        end = time.monotonic() + for_at_most
        for byte in whole[start:]:
            if time.monotonic() > end:
                return
            time.sleep(every)  # the server's pace, not a wait in the test
            server.write(conn, bytes([byte]))

    return answer


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("where", ["head", "body"])
def test_a_dripping_answer_ends_at_the_timeout(make_hook, hostile, mode, where):
    server = hostile(_drip(where))
    hook = make_hook(server.url, "k-0123456789", project_id="P", timeout=1, max_retries=0)
    started = time.monotonic()
    with pytest.raises(ex.DataTablesConnectionError) as info:
        hook.list_cards() if mode == "sync" else asyncio.run(hook.a_list_cards())
    elapsed = time.monotonic() - started
    assert elapsed < 1.8, f"the call took {elapsed:.1f} s with timeout 1"
    assert "1 s" in str(info.value) and "whole answer" in str(info.value)
    assert info.value.request_sent is True


def test_an_upload_whose_answer_drips_ends_at_the_timeout_and_is_not_resent(make_hook, hostile, csv_path):
    server = hostile(_drip("body"))
    hook = make_hook(server.url, "k-0123456789", project_id="P", timeout=1, max_retries=3)
    started = time.monotonic()
    with pytest.raises(ex.DataTablesImportUncertainError) as info:
        hook.import_csv(None, csv_path)
    assert time.monotonic() - started < 1.8
    assert "whole answer" in str(info.value)
    assert len(server.requests) == 1  # sent once: a paid request whose answer was lost is not sent again


def _too_large(declared: bool):
    def answer(server, conn, head) -> None:
        length = b"Content-Length: %d\r\n" % (64 << 20) if declared else b"Connection: close\r\n"
        server.write(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + length + b"\r\n")
        server.write(conn, b'{"Msg": "OK", "Cards": [')
        chunk = b'{"CardID": "CRD-0", "CardName": "' + b"x" * 65000 + b'"},'
        while server.sent < 64 << 20:
            server.write(conn, chunk)

    return answer


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "until-close"])
def test_an_answer_larger_than_the_cap_fails_without_being_held(make_hook, hostile, monkeypatch, mode, declared):
    import tracemalloc

    monkeypatch.setenv("AIRFLOW__DATATABLES__MAX_RESPONSE_MIB", "2")
    server = hostile(_too_large(declared))
    hook = make_hook(server.url, "k-0123456789", project_id="P", timeout=20, max_retries=2)
    tracemalloc.start()
    try:
        with pytest.raises(ex.DataTablesError) as info:
            hook.list_cards() if mode == "sync" else asyncio.run(hook.a_list_cards())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    text = str(info.value)
    assert "2 MiB" in text and "max_response_mib" in text and "AIRFLOW__DATATABLES__MAX_RESPONSE_MIB" in text
    assert f"GET {server.url}/v1.0/projects/P/cards" in text
    assert len(server.requests) == 1  # a refusal that would come again is not retried
    assert peak < 12 << 20, f"peak {peak / 2**20:.1f} MiB while reading a 64 MiB answer capped at 2 MiB"
    deadline = time.monotonic() + 10
    while server.sent < 64 << 20 and time.monotonic() < deadline and not _stopped(server):
        time.sleep(0.05)
    assert server.sent < 24 << 20, f"the client read {server.sent / 2**20:.0f} MiB of it"


def _stopped(server) -> bool:
    """Whether the server's writer has stopped (the client hung up): its count no longer moves."""
    before = server.sent
    time.sleep(0.2)
    return server.sent == before


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_junk_gzip_body_is_a_typed_error(make_hook, hostile, mode):
    def answer(server, conn, head) -> None:
        body = b"this is not gzip at all" * 10
        server.write(
            conn,
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body,
        )

    server = hostile(answer)
    hook = make_hook(server.url, "k-0123456789", project_id="P", max_retries=0)
    with pytest.raises(ex.DataTablesError) as info:
        hook.list_cards() if mode == "sync" else asyncio.run(hook.a_list_cards())
    assert "gzip" in str(info.value) and "could not be decoded" in str(info.value)
    assert info.value.status_code == 200


def test_a_large_listing_is_parsed_off_the_event_loop(make_hook, hostile, monkeypatch):
    """Issue 36 point 15: a 55 MiB listing held the triggerer's loop for up to 0.78 s a poll."""
    import threading

    from airflow_tables.hooks import _transport

    cards = [{"CardID": f"CRD-{i:08d}", "CardName": f"table {i}", "Rows": i, "Processed": True} for i in range(20_000)]
    body = json.dumps({"Msg": "OK", "ExecTime": 0.1, "Cards": cards}).encode()
    assert len(body) > _transport.PARSE_OFF_LOOP_BYTES

    def answer(server, conn, head) -> None:
        server.write(
            conn,
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body,
        )

    parsed_on: list[int] = []
    interpret = _transport.interpret

    def noting(*args, **kwargs):  # a spy: the real parse, and the thread it ran on
        parsed_on.append(threading.get_ident())
        return interpret(*args, **kwargs)

    monkeypatch.setattr(_transport, "interpret", noting)
    hook = make_hook(hostile(answer).url, "k-0123456789", project_id="P", max_retries=0)

    async def listed() -> tuple[int, list]:
        return threading.get_ident(), await hook.a_list_cards()

    loop_thread, listing = asyncio.run(listed())
    assert len(listing) == 20_000 and listing[-1]["CardID"] == "CRD-00019999"
    assert parsed_on and loop_thread not in parsed_on


# -- each library's errors, mapped once: the same answer from both transports ---------------------

KEY = "k-0123456789abcdef"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _both(settings: ConnectionSettings, path: str = "projects/P/cards") -> list[BaseException]:
    """The error each transport raises for one GET, sync first."""
    req = settings.request("GET", *path.split("/"))
    errors: list[BaseException] = []
    try:
        SyncTransport(settings).exchange(req)
    except Exception as err:
        errors.append(err)

    async def run() -> None:
        async with AsyncTransport(settings) as transport:
            await transport.exchange(req)

    try:
        asyncio.run(run())
    except Exception as err:
        errors.append(err)
    assert len(errors) == 2, errors
    return errors


def test_a_refused_connection_was_never_sent_in_both():
    settings = ConnectionSettings(f"http://127.0.0.1:{_closed_port()}", KEY, timeout=5)
    for error in _both(settings):
        assert isinstance(error, ex.DataTablesConnectionError)
        assert error.request_sent is False and error.retryable
        assert "could not connect" in str(error) and KEY not in str(error)


def test_a_hang_up_after_the_request_may_have_been_served_in_both(hostile):
    server = hostile(lambda server, conn, head: conn.shutdown(socket.SHUT_RDWR))
    for error in _both(ConnectionSettings(server.url, KEY, timeout=5)):
        assert isinstance(error, ex.DataTablesConnectionError)
        assert error.request_sent is True and error.retryable


@pytest.fixture
def plain_http_port():
    """A port that answers plain HTTP at once, before any request: what an https client's handshake meets."""
    sock = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            with conn, contextlib.suppress(OSError):
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                time.sleep(0.2)

    threading.Thread(target=serve, daemon=True).start()
    yield sock.getsockname()[1]
    sock.close()


def test_a_request_the_library_refuses_is_local_in_both(plain_http_port):
    """A header value the library refuses (forced past the key check): never sent, never retried, not quoted."""
    settings = ConnectionSettings(f"http://127.0.0.1:{plain_http_port}", f"{KEY}\n", timeout=5)
    for error in _both(settings):
        assert isinstance(error, ex.DataTablesConnectionError), error
        assert error.request_sent is False and not error.retryable
        assert "refused it before sending" in str(error) and KEY not in str(error)
        assert error.__cause__ is None and error.__suppress_context__


def test_the_tls_failure_is_found_under_each_library_s_wrapping(plain_http_port):
    """https to a plain-HTTP port: both say the handshake failed, nothing was sent, and how to fix the host."""
    settings = ConnectionSettings(f"https://127.0.0.1:{plain_http_port}", KEY, timeout=5)
    for error in _both(settings):
        assert isinstance(error, ex.DataTablesConnectionError), error
        assert error.request_sent is False and not error.retryable
        assert "TLS handshake" in str(error) and f"http://127.0.0.1:{plain_http_port}" in str(error)


def test_the_async_transport_is_used_inside_its_block():
    settings = ConnectionSettings("http://127.0.0.1:1", KEY)
    with pytest.raises(AssertionError, match="async with"):
        asyncio.run(AsyncTransport(settings).exchange(settings.request("GET", "projects")))
