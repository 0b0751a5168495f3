"""Bad input: fuzzed CSV bytes, malformed answers from the service, and awkward files.

* **Fuzzing.** Hypothesis draws CSV-ish bytes: tables written by :mod:`csv` in random
  dialects (separators, quoting, escapes, line breaks, ragged rows, BOM, Latin-1) and raw
  byte soup (quotes, separators, CR/LF, NUL, invalid UTF-8, byte-order marks). Every
  example is checked against the validator *and* uploaded over HTTP to an emulator (with
  the hook): the emulator must accept exactly the files the validator passes (422 and no
  credit otherwise) and read them into the same ``Rows`` and column names. Every example
  goes over HTTP (about 10 ms each). The emulator is this module's own, with credits to
  spare, so that the fuzzing cannot starve the session's shared one.
* **Malformed answers.** A stdlib HTTP server on 127.0.0.1 answers every request with a
  canned body (HTML pages, truncated or deeply nested JSON, wrong shapes and types, an
  empty or huge body, a body shorter than its Content-Length, no HTTP at all). Every
  public hook method, sync and async, must raise a :class:`DataTablesError` (never
  ``KeyError``, ``TypeError``, ``RecursionError``...) naming the status, with a short
  excerpt, and never the key, even when the answer echoes it.
* **Files.** A 1 MiB heading, 10,000 columns, an empty file, a directory, a missing file,
  and a file deleted or truncated while it is being uploaded.
"""

from __future__ import annotations

import asyncio
import codecs
import csv
import io
import json
import os
import sys
import tempfile
import threading
import time
import tracemalloc
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, reject, settings
from hypothesis import strategies as st
from tests.hooks.conftest import make_hook  # noqa: F401  (the fixture, reused)
from tests.operators._runs import run, state

from airflow_tables import exceptions as ex
from airflow_tables.emulator.testing import EmulatorProcess, make_test_config
from airflow_tables.validation import validate_csv

LONG_KEY = "L" * 25 + "-0123456789abcdefghijklmnopqrstuvwxyz-Z"  # 64 characters
SHORT_KEY = "K~q"
CARD = "CRD-00000000-0000-4000-8000-0000000000aa"


@pytest.fixture(scope="module")
def own_emulator():
    """An emulator for this module only, with credits for every accepted fuzz example."""
    process = EmulatorProcess(config=make_test_config(credits=100_000)).start()
    yield process
    process.stop()


@pytest.fixture
def own_hook(own_emulator, make_hook):  # noqa: F811
    return make_hook(own_emulator.base_url, own_emulator.api_key, project_id=own_emulator.project_id, max_retries=0)


# -- fuzzing: the validator and the emulator agree -------------------------------------------------

CELL = st.lists(st.sampled_from([*"ab1 \"',;|\t\n\r\\é€", "\r\n", ""]), max_size=6).map("".join)


@st.composite
def written_tables(draw) -> bytes:
    """A table written by Python's csv module in a random dialect, sometimes ragged, sometimes not UTF-8."""
    width = draw(st.integers(min_value=1, max_value=6))
    header = draw(st.lists(CELL, min_size=width, max_size=width))
    ragged = draw(st.booleans())
    row = st.lists(CELL, min_size=1 if ragged else width, max_size=width + 2 if ragged else width)
    rows = draw(st.lists(row, max_size=12))
    quoting = draw(st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL, csv.QUOTE_NONNUMERIC, csv.QUOTE_NONE]))
    dialect = {
        "delimiter": draw(st.sampled_from([",", ";", "\t", "|"])),
        "lineterminator": draw(st.sampled_from(["\n", "\r\n", "\r"])),
        "quoting": quoting,
        "doublequote": draw(st.booleans()),
        "escapechar": "\\",
    }
    buf = io.StringIO()
    writer = csv.writer(buf, **dialect)
    try:
        writer.writerow(header)
        writer.writerows(rows)
    except csv.Error:  # QUOTE_NONE cannot write a record of one empty field
        reject()
    encoding = draw(st.sampled_from(["utf-8", "utf-8", "utf-8-sig", "cp1252"]))
    return buf.getvalue().encode(encoding, errors="replace")


SOUP = [b'"', b'""', b",", b";", b"\t", b"|", b"\r", b"\n", b"\r\n", b"\x00", b"\xff", b"\xe9", b"\xc3\xa9"]
SOUP += [b"\xe2\x82", codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, b"a", b"b1", b" ", b"\\", b"x,y\n"]
CSV_BYTES = st.one_of(
    written_tables(),
    st.lists(st.sampled_from(SOUP), max_size=60).map(b"".join),
    st.binary(max_size=200),
)


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=CSV_BYTES)
def test_validator_and_emulator_agree_on_any_bytes(own_emulator, own_hook, data):
    emu = own_emulator
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.csv"
        path.write_bytes(data)
        report = validate_csv(path)  # nothing escapes the validator
        try:
            report.raise_for_errors()
        except ex.CsvValidationError as err:
            assert not report.ok
            assert str(path) in str(err)
        else:
            assert report.ok
        emu.reset_stats()
        credits = emu.credits()
        try:
            card_id = own_hook.import_csv(None, path)
        except ex.DataTablesRejectedFileError as err:
            assert not report.ok, f"the emulator refused a file the validator passes: {err}"
            assert err.status_code == 422
            stats = emu.stats()
            assert stats["imports_accepted"] == 0
            assert stats["credits"][emu.organisation] == credits
            event(f"refused: {report.errors[0].code}")
            return
    assert report.ok, f"the emulator accepted a file the validator refuses: {[str(p) for p in report.errors]}"
    summary = emu.wait_until_processed(emu.project_id, card_id, timeout=30)
    assert summary["SuccessfulUpload"] is True
    table = own_hook.get_card(None, card_id)
    assert table["Rows"] == report.rows
    assert [c["ColumnName"] for c in table["Columns"]] == report.columns
    own_hook.delete_card(None, card_id)
    event(f"accepted: {len(report.columns)} column(s)")


# -- malformed answers from the service -----------------------------------------------------------

HTML = (
    b"<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1>"
    b"<p>upstream said no to X-API-Key: {key}</p><hr><center>nginx</center></body></html>"
)
SUMMARY = {"CardID": CARD, "CardName": "t", "Rows": 1, "Processed": True, "SuccessfulUpload": True}


def _json(data) -> bytes:
    return json.dumps(data).encode()


# name: (status, content type, body, excerpt the error must quote, or None; how the calls must end)
# "fail": every call raises (test_connection answers False); "shape": the answer is well-formed
# JSON with a wrong shape: listing (and so waiting and the Test button) and importing must fail;
# "not-ready": nothing fails, but waiting must time out instead of reading "true" as finished.
ANSWERS = {
    "html-200": (200, "text/html", HTML, "Bad Gateway", "fail"),
    "html-502": (502, "text/html", HTML, "Bad Gateway", "fail"),
    "truncated-json": (200, "application/json", b'{"Msg": "OK", "ExecTime": 0.1, "Cards": [{"CardID": "CRD-',
                       '"Cards": [', "fail"),
    "json-array": (200, "application/json", _json([{"Msg": "OK", "Cards": []}]), '[{"Msg": "OK"', "fail"),
    "deeply-nested-json": (200, "application/json", b"[" * 100_000, "[[[[", "fail"),
    "invalid-utf8-json": (200, "application/json", b'{"Msg": "OK\xff\xfe"}', '{"Msg": "OK', "fail"),
    "msg-missing": (200, "application/json", _json({"ExecTime": 0, "Cards": [SUMMARY], "CardID": CARD}),
                    '"ExecTime": 0', "fail"),
    "empty-body": (200, "application/json", b"", "''", "fail"),
    "huge-body": (200, "text/plain", b"x" * (4 * 1024 * 1024), "xxxxxxxx", "fail"),
    "echoed-key-403": (403, "application/json", _json({"Msg": "key {key} may not"}), "may not", "fail"),
    "redirect": (302, "text/html", b"", "redirect", "fail"),
    "no-cards": (200, "application/json", _json({"Msg": "OK", "ExecTime": 0}), None, "shape"),
    "cards-not-a-list": (200, "application/json", _json({"Msg": "OK", "Cards": SUMMARY}), None, "shape"),
    "cards-of-strings": (200, "application/json", _json({"Msg": "OK", "Cards": [CARD]}), None, "shape"),
    "card-without-cardid": (200, "application/json",
                            _json({"Msg": "OK", "Cards": [{k: v for k, v in SUMMARY.items() if k != "CardID"}]}),
                            None, "shape"),
    "processed-as-string": (200, "application/json",
                            _json({"Msg": "OK", "Cards": [{**SUMMARY, "Processed": "true"}], **SUMMARY,
                                   "Processed": "true", "Success": True}), None, "not-ready"),
    "not-http": (None, "", b"SSH-2.0-OpenSSH_9.6\r\n\r\n", None, "fail"),
    "body-shorter-than-length": (None, "", b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 b"Content-Length: 5000\r\n\r\n{\"Msg\": \"OK\", ", None, "fail"),
}  # fmt: skip


class CannedHandler(BaseHTTPRequestHandler):
    """Answer every request with the server's ``answer``; ``{key}`` in it becomes the request's key."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def _answer(self) -> None:
        left = int(self.headers.get("Content-Length") or 0)
        while left > 0:  # read the upload, so the client is never cut off while sending
            chunk = self.rfile.read(min(left, 1 << 20))
            left = left - len(chunk) if chunk else 0
        status, content_type, body = self.server.answer[:3]
        body = body.replace(b"{key}", self.headers.get("X-API-Key", "").encode())
        if status is None:  # raw bytes, then hang up
            self.wfile.write(body)
            self.close_connection = True
            return
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = _answer


@pytest.fixture(scope="module")
def canned_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), CannedHandler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def hook_calls(hook, csv_path: Path) -> dict:
    """Every public method of the hook, with arguments; the async ones run to completion."""
    return {
        "list_cards": lambda: hook.list_cards(),
        "get_card": lambda: hook.get_card(None, CARD),
        "delete_card": lambda: hook.delete_card(None, CARD),
        "import_csv": lambda: hook.import_csv(None, csv_path),
        "wait_for_processed": lambda: hook.wait_for_processed(None, CARD, poll_interval=0.01, timeout=0.05),
        "test_connection": hook.test_connection,
        "a_list_cards": lambda: asyncio.run(hook.a_list_cards()),
        "a_get_card": lambda: asyncio.run(hook.a_get_card(None, CARD)),
    }


MUST_FAIL = {
    "fail": {
        "list_cards",
        "get_card",
        "delete_card",
        "import_csv",
        "wait_for_processed",
        "test_connection",
        "a_list_cards",
        "a_get_card",
    },
    "shape": {"list_cards", "a_list_cards", "wait_for_processed", "test_connection", "import_csv"},
    "not-ready": {"wait_for_processed"},
}


def error_texts(exc: BaseException) -> list[str]:
    texts = []
    while exc is not None:
        texts += [str(exc), repr(exc)]
        exc = exc.__cause__ or exc.__context__
    return texts


@pytest.mark.parametrize("key", [SHORT_KEY, LONG_KEY], ids=["short-key", "long-key"])
@pytest.mark.parametrize("answer", list(ANSWERS))
def test_malformed_answers_are_data_tables_errors(canned_server, make_hook, tmp_path, answer, key):  # noqa: F811
    status, _, _, excerpt, kind = canned_server.answer = ANSWERS[answer]
    hook = make_hook(f"http://127.0.0.1:{canned_server.server_address[1]}", key, project_id="P", max_retries=0)
    csv_path = tmp_path / "f.csv"
    csv_path.write_text("a,b\n1,2\n")
    for name, call in hook_calls(hook, csv_path).items():
        try:
            result = call()
        except ex.DataTablesError as err:
            message, texts = str(err), error_texts(err)
        except Exception as err:  # noqa: BLE001 - the point of the test
            pytest.fail(f"{name} on {answer}: {type(err).__name__} escaped: {err!r}"[:2000])
        else:
            if name == "test_connection":
                ok, message = result
                texts = [message]
                if ok:
                    assert name not in MUST_FAIL[kind], f"{name} on {answer}: {message}"
                    continue
            else:
                assert name not in MUST_FAIL[kind], f"{name} on {answer} returned {result!r}"[:2000]
                continue
        assert all(key not in t for t in texts), f"{name} on {answer}: the key is in {texts}"
        assert len(message) < 2000, f"{name} on {answer}: {len(message)} characters"
        if kind == "not-ready":
            assert name == "wait_for_processed"
            assert "still being read" in message
            continue
        expected_status = f"HTTP {status}" if status is not None else "no response"
        if kind == "shape":
            expected_status = "HTTP 200"
        assert expected_status in message, f"{name} on {answer}: {message}"
        if excerpt is not None:
            assert excerpt in message, f"{name} on {answer}: no excerpt {excerpt!r} in {message}"


def test_processed_as_a_string_is_not_finished(canned_server, make_hook):  # noqa: F811
    canned_server.answer = ANSWERS["processed-as-string"]
    hook = make_hook(f"http://127.0.0.1:{canned_server.server_address[1]}", LONG_KEY, project_id="P")
    started = time.monotonic()
    with pytest.raises(ex.DataTablesTimeoutError, match="still being read"):
        hook.wait_for_processed(None, CARD, poll_interval=0.02, timeout=0.2)
    assert time.monotonic() - started >= 0.2


# -- awkward files ----------------------------------------------------------------------------------


def test_a_one_mebibyte_heading_is_refused_on_both_sides_and_costs_nothing(own_emulator, own_hook, tmp_path):
    """A heading is a name people read: one of 1 MiB is refused (issue 36 point 15), by the rules both sides share."""
    from airflow_tables.exceptions import DataTablesRejectedFileError

    heading = "h" * (1024 * 1024)
    path = tmp_path / "long_heading.csv"
    path.write_text(f"{heading}\n1\n2\n3\n")
    report = validate_csv(path)
    assert [p.code for p in report.errors] == ["heading-too-long"]
    assert "column 1's heading is 1,048,576 characters long" in str(report.errors[0])
    credits = own_emulator.credits()
    with pytest.raises(DataTablesRejectedFileError) as refused:
        own_hook.import_csv(None, path)
    assert refused.value.status_code == 422 and "at most 1,024" in str(refused.value)
    assert len(str(refused.value)) < 1000 and own_emulator.credits() == credits


def test_ten_thousand_columns_are_refused_fast_in_bounded_memory_and_cost_nothing(own_emulator, own_hook, tmp_path):
    path = tmp_path / "wide.csv"
    with open(path, "w") as f:
        f.write(",".join(f"column_number_{i}" for i in range(10_000)) + "\n")
        row = ",".join(str(i) for i in range(10_000)) + "\n"
        f.writelines(row for _ in range(300))  # 15 MB
    tracemalloc.start()
    started = time.monotonic()
    try:
        report = validate_csv(path)
        elapsed = time.monotonic() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [p.code for p in report.errors] == ["too-many-columns"]
    assert "10,000 columns" in str(report.errors[0])
    assert elapsed < 2, elapsed
    assert peak < 8 * 1024 * 1024, peak  # the header, not the 15 MB file
    own_emulator.reset_stats()
    credits = own_emulator.credits()
    with pytest.raises(ex.DataTablesRejectedFileError) as info:
        own_hook.import_csv(None, path)
    assert info.value.status_code == 422
    assert "10,000 columns" in str(info.value)
    assert own_emulator.credits() == credits
    assert own_emulator.stats()["imports_accepted"] == 0


def test_an_empty_file_is_refused_by_both_and_costs_nothing(own_emulator, own_hook, tmp_path):
    path = tmp_path / "empty.csv"
    path.write_bytes(b"")
    report = validate_csv(path)
    assert [p.code for p in report.errors] == ["empty-file"]
    credits = own_emulator.credits()
    with pytest.raises(ex.DataTablesRejectedFileError) as info:
        own_hook.import_csv(None, path)
    assert info.value.status_code == 422
    assert own_emulator.credits() == credits


@pytest.mark.parametrize("what", ["missing", "directory"])
def test_a_missing_file_or_a_directory_fails_the_task_before_any_request(dags_module, datatables_conn, tmp_path, what):
    path = tmp_path / "orders.csv"
    if what == "directory":
        path.mkdir()
    report = validate_csv(path)
    assert [p.code for p in report.errors] == ["unreadable"]
    assert str(path) in report.errors[0].message
    assert ("directory" if what == "directory" else "No such file") in report.errors[0].message
    credits = datatables_conn.credits()
    datatables_conn.reset_stats()
    dag_run = run(dags_module, "dt_import_poke", file_path=str(path))
    assert state(dag_run, "import") == "failed"
    assert datatables_conn.stats()["requests"] == []
    assert datatables_conn.credits() == credits


# -- a file that changes while it is being uploaded -------------------------------------------------

ROWS = 800_000  # about 26 MB


def _big_csv(path: Path) -> Path:
    with open(path, "w") as f:
        f.write("id,text\n")
        f.writelines(f"{i},row number {i} of the file\n" for i in range(ROWS))
    return path


def _start_upload_once_open(hook, emulator, path: Path) -> tuple[threading.Thread, dict]:
    """Start ``import_csv`` in a thread; return once the upload has begun and holds the file open.

    The hook opens the file before it sends (to tell what it is), so an open file alone does not
    say the upload began: first the service must have received the import's request line (its
    log has it before the body is read), then the file must be open (the body being read from it).
    """
    result: dict = {}

    def upload() -> None:
        try:
            result["card_id"] = hook.import_csv(None, path)
        except BaseException as err:  # noqa: BLE001 - handed to the test
            result["error"] = err

    emulator.reset_stats()
    real = os.path.realpath(path)
    thread = threading.Thread(target=upload, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not any(r["method"] == "POST" for r in emulator.stats()["requests"]):
        assert thread.is_alive() and time.monotonic() < deadline, result
        time.sleep(0.01)
    while not any(_fd_target(fd) == real for fd in os.listdir("/proc/self/fd")):
        assert thread.is_alive() and time.monotonic() < deadline, result
        time.sleep(0.002)
    return thread, result


def _fd_target(fd: str) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc/self/fd")


@linux_only
def test_a_file_deleted_during_upload_lands_complete(own_emulator, own_hook, tmp_path):
    path = _big_csv(tmp_path / "deleted.csv")
    # The server waits before it reads the body, so the upload is still under way when the file goes.
    own_emulator.set_faults([{"methods": ["POST"], "path": r"/data/import$", "latency": 1, "times": 1}])
    try:
        thread, result = _start_upload_once_open(own_hook, own_emulator, path)
        path.unlink()
        thread.join(60)
    finally:
        own_emulator.clear_faults()
    assert not thread.is_alive()
    assert "error" not in result, result
    summary = own_emulator.wait_until_processed(own_emulator.project_id, result["card_id"])
    assert (summary["Rows"], summary["SuccessfulUpload"]) == (ROWS, True)
    own_hook.delete_card(None, result["card_id"])


@linux_only
def test_a_file_truncated_during_upload_fails_and_uploads_nothing(own_emulator, own_hook, tmp_path):
    path = _big_csv(tmp_path / "truncated.csv")
    credits = own_emulator.credits()
    own_emulator.set_faults([{"methods": ["POST"], "path": r"/data/import$", "latency": 1, "times": 1}])
    try:
        thread, result = _start_upload_once_open(own_hook, own_emulator, path)
        os.truncate(path, 1000)
        thread.join(60)
    finally:
        own_emulator.clear_faults()
    assert not thread.is_alive()
    error = result.get("error")
    assert isinstance(error, ex.DataTablesError), result
    assert not isinstance(error, ex.DataTablesImportUncertainError)  # the cut-off form cannot have landed
    assert "changed size while it was being uploaded" in str(error) and "nothing was imported" in str(error)
    stats = own_emulator.stats()
    assert stats["imports_accepted"] == 0
    # Sent once, never re-sent; the server saw the client give up (no answer, or a 400 nobody read).
    assert [(r["method"], r["status"] in (None, 400)) for r in stats["requests"]] == [("POST", True)]
    assert own_emulator.credits() == credits
    assert not [c for c in own_hook.list_cards() if c["CardName"] == "truncated"]
