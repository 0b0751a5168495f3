"""One test per row of the seed's error table (section 7), each named import failure, and our
status codes where the seed says "not shown" (docs/emulator.md). Every refusal is checked
to be the envelope ``{"Msg", "ExecTime"}`` with a Msg that names what to fix, and a refused
import to cost nothing and leave no file behind.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time

import pytest

from airflow_tables.emulator.testing import make_test_config

UNKNOWN_CARD = "CRD-00000000-0000-4000-8000-00000000dead"


def _table(columns: int, rows: int = 1) -> bytes:
    header = ",".join(f"c{i}" for i in range(columns))
    return (header + "\n" + "".join(",".join("1" * columns) + "\n" for _ in range(rows))).encode()


# -- the delete error table -------------------------------------------------------------


def test_delete_by_a_caller_not_allowed_to_manage_the_department_is_403(client, emulator):
    card_id = client.import_ready()
    client.assert_error(client.delete(card_id, key=emulator.read_only_key), 403, "manage", emulator.project_id)
    assert client.get(card_id).status_code == 200


def test_delete_of_a_table_still_being_read_is_409(client, emulator):
    emulator.set_processing_delay(60)
    card_id = client.import_ok()
    client.assert_error(client.delete(card_id), 409, "still being read", "wait until Processed is true")
    assert client.get(card_id).json()["Processed"] is False


def test_delete_of_a_table_fed_by_a_live_connection_is_409_with_locked_from_delete(client, emulator):
    assert client.get(emulator.connector_card_id).json()["LockedFromDelete"] is True
    client.assert_error(client.delete(emulator.connector_card_id), 409, "locked", "active connection")


# -- the named import failures ----------------------------------------------------------


@pytest.mark.parametrize("media_type", ["application/octet-stream", "text/plain", "application/vnd.ms-excel"])
def test_a_file_part_not_labelled_text_csv_is_415(client, media_type):
    with client.costs_nothing():
        client.assert_error(client.upload(media_type=media_type), 415, media_type, "text/csv", "data.csv")


def test_text_csv_with_parameters_is_accepted(client):
    assert client.upload(media_type="text/csv; charset=utf-8").status_code == 200


def test_replacing_a_table_still_being_read_is_409(client, emulator):
    emulator.set_processing_delay(60)
    card_id = client.import_ok()
    with client.costs_nothing():
        client.assert_error(client.upload(card_id=card_id), 409, "being read", "import again")


@pytest.mark.parametrize("name", ["data.txt", "data.csv.gz", "data", "report.tsv"])
def test_a_file_name_not_ending_in_csv_is_400(client, name):
    with client.costs_nothing():
        client.assert_error(client.upload(name=name), 400, repr(name), ".csv")


def test_a_file_name_ending_in_upper_case_csv_is_accepted(client):
    assert client.upload(name="DATA.CSV").status_code == 200


def test_more_than_300_columns_is_422_while_300_are_accepted(client):
    with client.costs_nothing():
        client.assert_error(client.upload(_table(301)), 422, "301 columns", "at most 300", "no credit")
    assert client.upload(_table(300)).status_code == 200


def test_a_file_over_the_size_limit_is_413_while_one_at_the_limit_is_accepted(make_emulator):
    emu, client = make_emulator(config={**make_test_config(), "limits": {"max_bytes": 1000}})
    at_limit = _table(1, rows=(1000 - 3) // 2)
    at_limit += b"1" * (1000 - len(at_limit))
    assert len(at_limit) == 1000
    with client.costs_nothing():
        client.assert_error(client.upload(at_limit + b"\n"), 413, "1,001 bytes", "at most 1,000 bytes")
    assert client.upload(at_limit).status_code == 200


def test_no_credit_left_is_402_and_nothing_is_imported(make_emulator):
    emu, client = make_emulator(config=make_test_config(credits=1))
    client.import_ok()
    assert emu.credits() == 0
    with client.costs_nothing():
        client.assert_error(client.upload(), 402, "no credit", emu.organisation)
    assert len([c for c in client.list().json()["Cards"] if c["ConnectorSource"] is None]) == 1


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"a,b\n1,2\n3\n4,5\n", ["record 3", "line 3", "1 field"]),
        (b"", ["empty"]),
        (b"name\ncaf\xe9\n", ["line 2", "UTF-8"]),
        (b'a,b\n1,"open\n', ["never closed"]),
        (b"Soci\xe9t\xe9,Montant\nAcme,10\n", ["line 1", "0xE9", "UTF-8"]),
        (b"id,na\x00me\n1,2\n", ["line 1", "NUL"]),
        (__import__("gzip").compress(b"a,b\n1,2\n"), ["this is a gzip file, not a CSV"]),
        (b"id," + b"h" * 2000 + b"\n1,2\n", ["column 2's heading is 2,000 characters long", "at most 1,024"]),
    ],
    ids=["ragged", "empty", "latin-1", "open-quote", "latin-1-heading", "nul-heading", "gzip", "long-heading"],
)
def test_a_file_the_csv_rules_refuse_is_422_naming_the_problem_and_costs_nothing(client, content, words):
    with client.costs_nothing():
        client.assert_error(client.upload(content, name="bad.csv"), 422, "'bad.csv'", "no credit", *words)


# -- our choices where the seed says "not shown" ----------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda c, key: c.list(key=key),
        lambda c, key: c.get(c.emu.connector_card_id, key=key),
        lambda c, key: c.delete(c.emu.connector_card_id, key=key),
        lambda c, key: c.upload(key=key),
    ],
    ids=["list", "fetch", "delete", "import"],
)
@pytest.mark.parametrize(("key", "words"), [(None, "missing"), ("not-a-key", "does not hold a key")])
def test_a_missing_or_unknown_api_key_is_401_on_every_endpoint(client, call, key, words):
    with client.costs_nothing():
        msg = client.assert_error(call(client, key), 401, "X-API-Key", words)
    assert "not-a-key" not in msg  # a key is never echoed back


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.list(c.emu.other_project_id, key=c.emu.read_only_key),
        lambda c: c.get(UNKNOWN_CARD, c.emu.other_project_id, key=c.emu.read_only_key),
        lambda c: c.delete(UNKNOWN_CARD, c.emu.other_project_id, key=c.emu.read_only_key),
        lambda c: c.upload(project_id=c.emu.other_project_id, key=c.emu.read_only_key),
        lambda c: c.list("PRJ-nobody-knows"),
    ],
    ids=["list", "fetch", "delete", "import", "unknown-department"],
)
def test_a_department_the_key_has_no_role_in_is_403_on_every_endpoint(client, call):
    with client.costs_nothing():
        client.assert_error(call(client), 403, "no access to department")


def test_a_read_only_key_may_list_and_fetch_but_not_import(client, emulator):
    assert client.list(key=emulator.read_only_key).status_code == 200
    assert client.get(emulator.connector_card_id, key=emulator.read_only_key).status_code == 200
    with client.costs_nothing():
        client.assert_error(client.upload(key=emulator.read_only_key), 403, "not manage", "importing")


@pytest.mark.parametrize("department", ["own", "other"], ids=["read-only role", "no role"])
def test_a_refused_callers_upload_is_never_written_to_disk(client, emulator, department):
    """Issue 36 point 15: a read-only key's upload was written to the data folder before the 403."""
    uploads = emulator.data_dir / "files"
    before = set(uploads.glob("*")) if uploads.exists() else set()
    project_id = emulator.project_id if department == "own" else emulator.other_project_id
    big = b"id,amount\n" + b"1,10\n" * 200_000  # 1.2 MB: written in pieces, were it written
    with client.costs_nothing():
        client.assert_error(client.upload(big, project_id=project_id, key=emulator.read_only_key), 403)
    after = set(uploads.glob("*")) if uploads.exists() else set()
    assert after == before
    assert client.upload(big).status_code == 200  # a caller who may import: kept as before
    assert len(set(uploads.glob("*")) - before) == 1


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.get(UNKNOWN_CARD),
        lambda c: c.delete(UNKNOWN_CARD),
        lambda c: c.upload(card_id=UNKNOWN_CARD),
        lambda c: c.get(c.emu.connector_card_id, c.emu.other_project_id),  # exists, but in another department
    ],
    ids=["fetch", "delete", "replace", "other-department"],
)
def test_an_unknown_card_id_in_a_visible_department_is_404(client, call):
    with client.costs_nothing():
        client.assert_error(call(client), 404, "there is no table")


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"project_id": None}, ["ProjectID", "missing"]),
        ({"project_id": "  "}, ["ProjectID", "empty"]),
        ({"card_id": "1234"}, ["CardID", "'1234'", "CRD-"]),
        ({"card_id": "CRD-not-a-uuid"}, ["CardID", "CRD-"]),
        ({"card_id": " "}, ["CardID"]),
    ],
    ids=["no-project", "blank-project", "card-id-shape", "card-id-not-uuid", "blank-card-id"],
)
def test_a_malformed_import_is_400_naming_the_field(client, kwargs, words):
    with client.costs_nothing():
        client.assert_error(client.upload(**kwargs), 400, *words)


def test_an_import_without_a_file_part_is_400(client, emulator):
    with client.costs_nothing():
        response = client.http.post(
            "/v1.0/data/import",
            headers={"X-API-Key": emulator.api_key},
            files={"ProjectID": (None, emulator.project_id)},
        )
        client.assert_error(response, 400, "no File part")


def test_an_import_that_is_not_multipart_is_400(client, emulator):
    with client.costs_nothing():
        response = client.http.post(
            "/v1.0/data/import", headers={"X-API-Key": emulator.api_key}, json={"ProjectID": emulator.project_id}
        )
        client.assert_error(response, 400, "multipart/form-data")


def test_an_import_with_two_file_parts_is_400(client, emulator):
    with client.costs_nothing():
        response = client.http.post(
            "/v1.0/data/import",
            headers={"X-API-Key": emulator.api_key},
            data={"ProjectID": emulator.project_id},
            files=[("File", ("a.csv", b"a\n1\n", "text/csv")), ("File", ("b.csv", b"b\n2\n", "text/csv"))],
        )
        client.assert_error(response, 400, "more than one File part")


def test_replacing_a_connector_table_is_409(client, emulator):
    with client.costs_nothing():
        client.assert_error(client.upload(card_id=emulator.connector_card_id), 409, "connected system", "Salesforce")


def test_permission_is_checked_before_the_file(client, emulator):
    """A caller without the right learns nothing about the file's problems (documented order)."""
    response = client.upload(b"", name="x.csv", media_type="text/plain", key=emulator.read_only_key)
    client.assert_error(response, 403)


@pytest.mark.parametrize(("method", "path", "status"), [("GET", "/nowhere", 404), ("PUT", "/v1.0/data/import", 405)])
def test_unknown_routes_and_methods_answer_in_the_envelope(client, method, path, status):
    client.assert_error(client.http.request(method, path), status, path)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1.0/projects/{project}/cards/"),
        ("GET", "/v1.0/projects/{project}/cards/{card}/"),
        ("DELETE", "/v1.0/projects/{project}/cards/{card}/"),
        ("POST", "/v1.0/data/import/"),
    ],
)
def test_a_trailing_slash_is_404_in_the_envelope_not_a_bare_redirect(client, emulator, method, path):
    path = path.format(project=emulator.project_id, card=emulator.connector_card_id)
    response = client.http.request(method, path, headers={"X-API-Key": emulator.api_key})
    client.assert_error(response, 404, "trailing slash", path)
    assert "location" not in response.headers


@pytest.mark.parametrize(
    ("sent", "card_name"),
    [("../../x.csv", "x"), ("..\\..\\evil.csv", "evil"), ("C:\\Users\\me\\Daily.CSV", "Daily"), ("a/b/c.csv", "c")],
)
def test_an_uploaded_file_name_with_a_path_names_the_table_by_its_base_name(client, emulator, sent, card_name):
    card_id = client.import_ready(name=sent)
    assert client.get(card_id).json()["CardName"] == card_name
    client.delete(card_id)


def test_a_path_in_the_file_name_is_not_echoed_in_a_refusal(client):
    with client.costs_nothing():
        msg = client.assert_error(client.upload(b"a,b\n1\n", name="../secret/bad.csv"), 422, "'bad.csv'")
    assert "secret" not in msg and ".." not in msg


@pytest.mark.parametrize("sent", [".csv", "dir/.csv", "dir/"])
def test_a_file_name_with_nothing_before_csv_is_400(client, sent):
    with client.costs_nothing():
        client.assert_error(client.upload(name=sent), 400)


# -- hostile bodies on a network (issue 24): every refusal names its limit, in the envelope ----------

_BOUNDARY = "b0undary"


def _raw_import(emu, body_headers: str, *, timeout: float = 10) -> socket.socket:
    """Open a connection and send an import's request line and headers; the caller sends the body."""
    sock = socket.create_connection(("127.0.0.1", emu.port), timeout=timeout)
    sock.sendall(
        (
            "POST /v1.0/data/import HTTP/1.1\r\nHost: emulator\r\n"
            f"X-API-Key: {emu.api_key}\r\nContent-Type: multipart/form-data; boundary={_BOUNDARY}\r\n"
            f"{body_headers}\r\n"
        ).encode()
    )
    return sock


def _answer(sock: socket.socket) -> tuple[int, dict, bytes]:
    """Read one response to its end (the server closes after it); return status, JSON body, raw head."""
    raw = b""
    while chunk := sock.recv(65536):
        raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body), head.lower()


def _assert_envelope(status: int, body: dict, expected: int, *words: str) -> None:
    assert status == expected, body
    assert set(body) == {"Msg", "ExecTime"}, body
    for word in words:
        assert word.lower() in body["Msg"].lower(), (word, body["Msg"])


def test_a_form_of_more_parts_than_the_limit_is_400_naming_it(client, emulator):
    with client.costs_nothing():
        response = client.http.post(
            "/v1.0/data/import",
            headers={"X-API-Key": emulator.api_key},
            data={"ProjectID": emulator.project_id, **{f"extra{i}": "x" for i in range(40)}},
            files={"File": ("a.csv", b"a\n1\n", "text/csv")},
        )
        client.assert_error(response, 400, "more than 16 parts")


_SMALL_LIMIT = {**make_test_config(), "limits": {"max_bytes": 1000}}
_CAP = 1000 + 2 * 1024**2  # the file limit plus the allowance for the form's other parts


def test_a_body_declared_larger_than_the_file_limit_allows_is_413_before_it_is_sent(make_emulator):
    emu, client = make_emulator(config=_SMALL_LIMIT)
    with client.costs_nothing(), _raw_import(emu, f"Content-Length: {_CAP + 1}\r\n") as sock:
        status, body, head = _answer(sock)  # nothing of the body was sent: the answer comes at once
    _assert_envelope(status, body, 413, f"{_CAP:,} bytes", "1,000 bytes", "2 MiB")
    assert b"connection: close" in head


def test_a_chunked_body_past_the_file_limit_is_413_once_it_passes_it(make_emulator):
    emu, client = make_emulator(config=_SMALL_LIMIT)
    part = f'--{_BOUNDARY}\r\nContent-Disposition: form-data; name="File"; filename="a.csv"\r\n\r\n'.encode()
    body = part + b"x" * (_CAP + 1 - len(part))  # one byte past the cap, and never finished
    with client.costs_nothing(), _raw_import(emu, "Transfer-Encoding: chunked\r\n") as sock:
        for start in range(0, len(body), 65536):
            piece = body[start : start + 65536]
            sock.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
        status, answer, _ = _answer(sock)
    _assert_envelope(status, answer, 413, f"{_CAP:,} bytes")


def test_a_body_that_drips_is_408_at_the_body_deadline(make_emulator):
    emu, client = make_emulator(config={**make_test_config(), "timeouts": {"body": 1}})
    with client.costs_nothing(), _raw_import(emu, "Content-Length: 100000\r\n") as sock:
        started = time.monotonic()
        sock.settimeout(0.2)
        answer = b""
        # One byte every 0.2 s for 0.8 s (never idle long enough for body_idle), then no more: a
        # byte sent after the server's answer and close would be answered with a reset, which
        # discards the answer still unread here.
        while not answer and time.monotonic() - started < 0.8:
            sock.sendall(b"-")
            with contextlib.suppress(TimeoutError):
                answer = sock.recv(65536)
        sock.settimeout(10)  # the server must cut the body off at its 1 s deadline, well within this
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, raw = answer.partition(b"\r\n\r\n")
    _assert_envelope(int(head.split()[1]), json.loads(raw), 408, "1 s")
    assert time.monotonic() - started >= 0.9


@pytest.mark.parametrize(("sent", "card_name"), [("売上.csv", "売上"), ("données.csv", "données")])
def test_a_non_ascii_file_name_names_the_table_with_its_characters(client, sent, card_name):
    card_id = client.import_ready(name=sent)
    assert client.get(card_id).json()["CardName"] == card_name
    client.delete(card_id)


def _refused_at_once(emu, timeout: float) -> tuple[int, dict, bytes] | None:
    """A new import's answer if it comes before a byte of its body is sent, else ``None`` (the probe is closed)."""
    with _raw_import(emu, "Content-Length: 100000\r\n", timeout=timeout) as probe:
        try:
            return _answer(probe)
        except TimeoutError:
            return None  # the server is reading this body: it was not full yet


def test_import_bodies_past_the_capacity_are_429_before_they_are_read(make_emulator):
    """Issue 36 point 15: slow bodies cannot pile up without bound; one past the capacity is refused at once."""
    emu, client = make_emulator(config={**make_test_config(), "capacity": {"open_uploads": 2}})
    slow = [_raw_import(emu, "Content-Length: 100000\r\n") for _ in range(2)]
    try:
        for sock in slow:
            sock.sendall(f"--{_BOUNDARY}\r\n".encode())  # a body begun, and left open
        with client.costs_nothing():
            deadline = time.monotonic() + 10
            refused = None
            while refused is None:  # until the server holds both slow bodies
                assert time.monotonic() < deadline, "a third import body was still read with two open"
                refused = _refused_at_once(emu, timeout=0.5)
        status, body, head = refused
        _assert_envelope(status, body, 429, "capacity.open_uploads", "no credit")
        assert b"retry-after: 1" in head and b"connection: close" in head
    finally:
        for sock in slow:
            sock.close()
    deadline = time.monotonic() + 10
    while (response := client.upload()).status_code == 429:  # until the server has seen both go
        assert time.monotonic() < deadline, "the capacity was not given back when the slow bodies ended"
    assert response.status_code == 200, response.text


def test_the_capacity_must_be_a_whole_number_of_one_or_more(tmp_path):
    from airflow_tables.emulator.config import ConfigError, EmulatorConfig, parse

    for wrong in (0, -1, 1.5, True, "64"):
        with pytest.raises(ConfigError, match="capacity.open_uploads"):
            parse({**make_test_config(), "capacity": {"open_uploads": wrong}}, EmulatorConfig(tmp_path))
    assert (
        parse({**make_test_config(), "capacity": {"open_uploads": 3}}, EmulatorConfig(tmp_path)).capacity.open_uploads
        == 3
    )
