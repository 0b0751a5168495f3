"""The API key stays secret, ids cannot reach another route, and TLS is verified.

* **The key.** For a 3-character key (Airflow's masker leaves values of 5 characters or
  fewer alone, so nothing but our own care keeps it out) and a 64-character one: an
  emulator of the test's own with that managing key, and real DAG runs (dag.test())
  that import (poke and defer), replace, wait with the sensor, delete, and fail in
  several ways (validation, 403, 409 locked, an import whose answer is lost). Then the
  key is looked for in every file under ``$AIRFLOW_HOME`` (logs and the metadata DB as
  bytes), the captured stdout/stderr and log records, every XCom value, every rendered
  template field, the text of every exception raised, and the emulator's log and data.
* **Path tricks.** Ids such as ``../``, ``%2F``, ``?x=1``, ``#frag`` reach, by the
  emulator's own request log, only the route they were meant for (or none), and delete
  nothing. The hook tests already cover other project-id tricks for the list call.
* **TLS.** The emulator behind HTTPS with a certificate of a throwaway CA: refused by
  default (sync and async, nothing sent), accepted with ``verify`` false or the CA's path.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
from tests.hooks.conftest import make_hook  # noqa: F401  (the fixture, reused)
from tests.operators._runs import run, state, xcom

from airflow_tables import exceptions as ex
from airflow_tables.emulator.testing import CONFIG_NAME, EmulatorProcess, make_test_config

KEYS = {"short": "K~q", "long": "Zk9" + "x7Qm2vLp" * 7 + "R4t5W"}
assert len(KEYS["long"]) == 64


def orders_csv(path: Path, rows: int = 5) -> Path:
    path.write_text("order_id,region,amount\n" + "".join(f"{i},North,{10 * i}\n" for i in range(rows)))
    return path


def connection(emu: EmulatorProcess, key: str, **extra) -> str:
    extra = {"project_id": emu.project_id, "max_retries": 1, "retry_backoff": 0.02, **extra}
    return json.dumps({"conn_type": "datatables", "host": emu.base_url, "password": key, "extra": extra})


@pytest.fixture
def raised(monkeypatch) -> list[BaseException]:
    """Every DataTablesError, CsvValidationError and AirflowException created while the test runs."""
    from airflow.sdk.exceptions import AirflowException

    created: list[BaseException] = []
    for cls in (ex.DataTablesError, ex.CsvValidationError, AirflowException):
        original = cls.__init__

        def recording(self, *args, _original=original, **kwargs) -> None:
            _original(self, *args, **kwargs)
            created.append(self)

        monkeypatch.setattr(cls, "__init__", recording)
    return created


#: Reads every file under a folder and prints, one a line, those that hold the needle (hex in argv).
_FIND_IN_FILES = """
import os, sys
root, needle, skip = sys.argv[1], bytes.fromhex(sys.argv[2]), set(sys.argv[3:])
for folder, _, names in os.walk(root):
    for name in names:
        path = os.path.join(folder, name)
        if path not in skip and os.path.isfile(path):
            with open(path, "rb") as f:
                if needle in f.read():
                    print(path)
"""


def _files_with(root: Path, needle: bytes, skip: set[Path] = frozenset()) -> list[str]:
    """The files under ``root`` whose bytes hold ``needle``, read by a process of their own.

    Not here: the metadata DB is a live SQLite file that this process holds open, and closing any
    other descriptor of it drops every POSIX lock the process holds on it (SQLite's "How To Corrupt
    An SQLite Database File", 2.2). The next process to close its connection then takes itself for
    the last one, checkpoints and deletes the write-ahead log this one still writes to: CI's run of
    9874e1f found the session's database malformed by the tests that came after this one.
    """
    found = subprocess.run(
        [sys.executable, "-c", _FIND_IN_FILES, str(root), needle.hex(), *map(str, skip)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return found.stdout.splitlines()


def test_the_scan_of_files_finds_the_key_where_it_is(tmp_path):
    """The scan the key's test relies on finds bytes anywhere under a folder, and only there (a control)."""
    (tmp_path / "deep" / "er").mkdir(parents=True)
    (tmp_path / "deep" / "er" / "x.db").write_bytes(b"\x00\x01secret-KEY\xff")
    (tmp_path / "other.log").write_bytes(b"nothing here")

    assert _files_with(tmp_path, b"secret-KEY") == [str(tmp_path / "deep" / "er" / "x.db")]
    assert _files_with(tmp_path, b"secret-KEY", {tmp_path / "deep" / "er" / "x.db"}) == []


def _around(text: str, key: str) -> str:
    """Where the key stands in ``text``, with the key itself replaced, for the failure message."""
    at = text.index(key)
    return text[max(0, at - 200) : at + len(key) + 100].replace(key, "<THE KEY>")


def _db_texts() -> tuple[list[str], list[str]]:
    """Every XCom value and every rendered template field in the metadata DB, as text."""
    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        xcoms = [
            f"{row.dag_id}.{row.task_id}.{row.key}={row.value!r}={XComModel.deserialize_value(row)!r}"
            for row in session.scalars(select(XComModel))
        ]
        rendered = [  # keyed by DAG and task up to Airflow 3.3, by the task instance's id from 3.4
            f"{getattr(row, 'dag_id', '')}.{getattr(row, 'task_id', getattr(row, 'task_instance_id', ''))}="
            f"{json.dumps(row.rendered_fields)}{row.k8s_pod_yaml or ''}"
            for row in session.scalars(select(RenderedTaskInstanceFields))
        ]
    return xcoms, rendered


@pytest.mark.parametrize("kind", list(KEYS))
def test_the_key_never_leaks_from_dag_runs(dags_module, monkeypatch, tmp_path, capfd, caplog, raised, kind):
    key = KEYS[kind]
    config = make_test_config()
    config["api_keys"][0]["key"] = key
    # A data directory of the test's own: stop() keeps it, so it can be searched afterwards.
    emu = EmulatorProcess(tmp_path / "emulator", config=config, processing_delay=0.3).start()
    try:
        monkeypatch.setenv("AIRFLOW_CONN_DATATABLES_DEFAULT", connection(emu, key))
        caplog.set_level(logging.DEBUG)
        orders = orders_csv(tmp_path / "orders.csv")

        # What works: import (poke and defer), replace, the sensor, delete.
        first = run(dags_module, "dt_import_poke", file_path=str(orders))
        second = run(dags_module, "dt_import_defer", file_path=str(orders))
        assert (state(first, "import"), state(second, "import")) == ("success", "success")
        card_a, card_b = xcom(first, "import"), xcom(second, "import")
        replaced = run(
            dags_module, "dt_replace_poke", file_path=str(orders_csv(tmp_path / "more.csv", 9)), card_id=card_a
        )
        sensed = run(dags_module, "dt_sensor_defer", card_id=card_a)
        deleted = run(dags_module, "dt_delete_fail", card_id=card_b)
        assert [state(replaced, "replace"), state(sensed, "wait"), state(deleted, "delete")] == ["success"] * 3

        # What fails: validation, a locked table, a department the key may not use (403).
        bad = tmp_path / "bad.csv"
        bad.write_text("a,b\n1,2\n3\n")
        invalid = run(dags_module, "dt_import_poke", file_path=str(bad))
        locked = run(dags_module, "dt_delete_fail", card_id=emu.connector_card_id)
        monkeypatch.setenv("AIRFLOW_CONN_DATATABLES_DEFAULT", connection(emu, key, project_id="PRJ-nobody"))
        forbidden = run(dags_module, "dt_import_poke", file_path=str(orders))
        monkeypatch.setenv("AIRFLOW_CONN_DATATABLES_DEFAULT", connection(emu, key))
        assert [state(invalid, "import"), state(locked, "delete"), state(forbidden, "import")] == ["failed"] * 3

        # An import whose answer is lost: the first try fails, the retry adopts the table.
        emu.set_faults([{"methods": ["POST"], "path": "/data/import", "drop": "after", "times": 1}])
        lost = run(dags_module, "dt_import_retry", file_path=str(orders_csv(tmp_path / "lost.csv")))
        assert [r["fault"] for r in emu.stats()["requests"] if r["fault"]] == ["drop:after"]
        assert state(lost, "import") in ("success", "failed")

        statuses = {r["status"] for r in emu.stats()["requests"]}
        assert {200, 403} <= statuses  # the key was used, and refused where it should be
    finally:
        emu.stop()
    out, err = capfd.readouterr()
    xcoms, rendered = _db_texts()
    errors = [text for exc in raised for text in (str(exc), repr(exc))]
    assert xcoms and rendered and errors and out  # each place really was looked at
    assert any("HTTP 403" in e for e in errors) and any("locked from delete" in e for e in errors)
    places = {
        "stdout": [out],
        "stderr": [err],
        "log records": [caplog.text, *(repr(r.args) for r in caplog.records)],
        "XCom": xcoms,
        "rendered template fields": rendered,
        "exceptions": errors,
        "emulator log": [emu.log_tail(10_000)],
    }
    leaks = {where: [_around(t, key) for t in texts if key in t] for where, texts in places.items()}
    assert not any(leaks.values()), leaks
    home = Path(os.environ["AIRFLOW_HOME"])
    assert not _files_with(home, key.encode())
    assert not _files_with(emu.data_dir, key.encode(), {emu.data_dir / CONFIG_NAME})


# -- ids in paths ---------------------------------------------------------------------------------

IDS = ["../", "%2F", "?x=1", "#frag", "..%2F..", "CRD-../../x"]


@pytest.fixture
def real_table(emulator, make_hook, tmp_path):  # noqa: F811
    """A ready table of the shared emulator, and a hook allowed to delete it."""
    hook = make_hook(emulator.base_url, emulator.api_key, project_id=emulator.project_id, max_retries=0)
    card_id = hook.import_csv(None, orders_csv(tmp_path / "target.csv"))
    emulator.wait_until_processed(emulator.project_id, card_id)
    yield hook, card_id
    hook.delete_card(None, card_id)


@pytest.mark.parametrize("trick", IDS)
def test_id_tricks_reach_only_their_own_route(emulator, real_table, tmp_path, trick):
    hook, card_id = real_table
    departments = (emulator.project_id, emulator.other_project_id)
    tables_before = {p: emulator.list_cards(p) for p in departments}
    credits = emulator.credits()
    emulator.reset_stats()

    # As a department: each request goes to that department's URL, the id encoded as one segment.
    encoded = quote(trick, safe="")
    calls = [
        ("GET", f"/projects/{encoded}/cards", lambda: hook.list_cards(trick)),
        ("GET", f"/projects/{encoded}/cards/{card_id}", lambda: hook.get_card(trick, card_id)),
        ("DELETE", f"/projects/{encoded}/cards/{card_id}", lambda: hook.delete_card(trick, card_id)),
        ("POST", "/data/import", lambda: hook.import_csv(trick, tmp_path / "target.csv")),
    ]
    for method, path, call in calls:
        with pytest.raises(ex.DataTablesError) as info:
            call()
        assert (info.value.method, info.value.url) == (method, f"{emulator.base_url}/v1.0{path}")
        if info.value.status_code == 403:  # a handler ran, for the department named exactly so
            assert f"department {trick}" in info.value.msg
        else:  # the router found no endpoint: no handler ran at all
            assert info.value.status_code == 404
            assert "there is no endpoint" in info.value.msg
    # The server decodes %XX before it routes and logs: each logged path is the URL sent, decoded.
    log = emulator.stats()["requests"]
    assert [(r["method"], r["path"]) for r in log] == [(m, "/v1.0" + unquote(p)) for m, p, _ in calls]
    assert all(r["status"] in (403, 404) for r in log)

    # As a table: refused before any request (a CardID has one shape).
    emulator.reset_stats()
    for call in (
        lambda: hook.get_card(None, trick),
        lambda: hook.delete_card(None, trick),
        lambda: hook.import_csv(None, tmp_path / "target.csv", card_id=trick),
    ):
        with pytest.raises(ValueError, match="CardID"):
            call()
    assert emulator.stats()["requests"] == []

    assert {p: emulator.list_cards(p) for p in departments} == tables_before  # nothing deleted or added
    assert emulator.credits() == credits


# -- TLS ------------------------------------------------------------------------------------------


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def tls_emulator(tmp_path_factory):
    """The emulator over HTTPS, with a server certificate signed by a CA made for this module."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    folder = tmp_path_factory.mktemp("tls")
    (folder / "server.ext").write_text(
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n"
    )
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "1",
             "-subj", "/CN=airflow-tables test CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=folder)  # fmt: skip
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=127.0.0.1", cwd=folder)  # fmt: skip
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial", "1",
             "-days", "1", "-out", "server.pem", "-extfile", "server.ext", cwd=folder)  # fmt: skip
    emu = EmulatorProcess(ssl_certfile=folder / "server.pem", ssl_keyfile=folder / "server.key").start()
    assert emu.base_url.startswith("https://127.0.0.1:")
    yield emu, str(folder / "ca.pem")
    emu.stop()


@pytest.fixture
def system_ca_bundle_in_env(monkeypatch):
    # requests lets this variable override a Session's verify; the hook must not be fooled by it.
    import ssl

    monkeypatch.setenv("REQUESTS_CA_BUNDLE", ssl.get_default_verify_paths().openssl_cafile or "")


@pytest.mark.usefixtures("system_ca_bundle_in_env")
def test_tls_is_verified_by_default_and_nothing_is_sent(tls_emulator, make_hook, tmp_path):  # noqa: F811
    emu, _ = tls_emulator
    hook = make_hook(emu.base_url, emu.api_key, project_id=emu.project_id, max_retries=0)
    emu.reset_stats()
    credits = emu.credits()
    with pytest.raises(ex.DataTablesConnectionError, match="CERTIFICATE_VERIFY_FAILED") as info:
        hook.list_cards()
    assert info.value.request_sent is False
    with pytest.raises(ex.DataTablesConnectionError, match="CERTIFICATE_VERIFY_FAILED") as info:
        hook.import_csv(None, orders_csv(tmp_path / "refused.csv"))
    assert not isinstance(info.value, ex.DataTablesImportUncertainError)
    assert info.value.request_sent is False
    with pytest.raises(ex.DataTablesConnectionError, match="CERTIFICATE_VERIFY_FAILED") as info:
        asyncio.run(hook.a_list_cards())
    assert info.value.request_sent is False
    assert emu.stats()["requests"] == []  # no request got past the handshake
    assert emu.credits() == credits
    assert not [c for c in emu.list_cards() if c["CardName"] == "refused"]


@pytest.mark.usefixtures("system_ca_bundle_in_env")
@pytest.mark.filterwarnings("ignore:Unverified HTTPS request")
@pytest.mark.parametrize("verify", ["ca", False])
def test_tls_with_the_ca_or_verification_off(tls_emulator, make_hook, tmp_path, verify):  # noqa: F811
    emu, ca = tls_emulator
    hook = make_hook(
        emu.base_url, emu.api_key, project_id=emu.project_id, max_retries=0, verify=ca if verify == "ca" else verify
    )
    card_id = hook.import_csv(None, orders_csv(tmp_path / "secure.csv"))
    summary = hook.wait_for_processed(None, card_id, poll_interval=0.05, timeout=30)
    assert summary["Rows"] == 5

    async def read() -> tuple[list, dict]:
        return await hook.a_list_cards(), await hook.a_get_card(None, card_id)

    cards, table = asyncio.run(read())
    assert card_id in {c["CardID"] for c in cards}
    assert table["CardID"] == card_id
    hook.delete_card(None, card_id)


# -- a proxy that echoes the request's headers ----------------------------------------------------

from tests.hooks.test_http import LONG_KEY, key_forms, leaked  # noqa: E402
from tests.hooks.test_transport import hostile  # noqa: E402, F401  (the fixture, reused)

ECHOES = ["html", "html-escaped", "json-escaped", "url-encoded"]


def _echo(form: str):
    """A 502 page from a proxy that shows the request's headers, in one of the forms proxies use."""
    import html

    def answer(server, conn, head) -> None:
        lines = head.decode("latin-1").split("\r\n")
        # The key's line first: a page shows the start of a long key before any excerpt is cut.
        headers = "\n".join(sorted(lines, key=lambda line: not line.lower().startswith("x-api-key")))
        if form == "html":
            page = f"<html><body><h1>502 Bad Gateway</h1><pre>{headers}</pre></body></html>"
        elif form == "html-escaped":
            page = f"<html><body><h1>502 Bad Gateway</h1><pre>{html.escape(headers)}</pre></body></html>"
        elif form == "json-escaped":
            page = "502 Bad Gateway; upstream request: " + json.dumps({"headers": headers})
        else:
            page = f"<html><body>502 Bad Gateway; to retry, open /retry?h={quote(headers, safe='')}</body></html>"
        body = page.encode()
        # The server closes each connection after its answer, and says so: a client that reused it for
        # the retry would race the close (seen on CI: the async retry read a closed socket, not the 502).
        head = b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
        server.write(conn, head % len(body) + body)

    return answer


@pytest.mark.parametrize("form", ECHOES)
def test_a_proxy_echoing_the_headers_never_shows_a_piece_of_the_key(make_hook, hostile, caplog, form):  # noqa: F811
    server = hostile(_echo(form))
    hook = make_hook(server.url, LONG_KEY, project_id="P", max_retries=1)
    texts: list[str] = []
    with caplog.at_level(logging.DEBUG):
        for call in (hook.list_cards, lambda: asyncio.run(hook.a_list_cards())):
            with pytest.raises(ex.DataTablesServerError) as info:
                call()
            texts += [str(info.value), repr(info.value)]
        ok, message = hook.test_connection()
    assert not ok and "502" in message
    assert LONG_KEY.encode() in server.requests[0]  # the key did go out, in its header, and came back
    assert all("502 Bad Gateway" in t for t in texts[:1])
    assert leaked("\n".join([*texts, message, caplog.text]), LONG_KEY) == []


def test_the_key_forms_echoed_are_the_ones_the_scrub_knows():
    """The echo forms above are real escapes of the key: each differs from the key itself."""
    forms = key_forms(LONG_KEY)
    assert len({forms["exact"], forms["html"], forms["json"], forms["url"]}) == 4
