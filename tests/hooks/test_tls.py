"""The ``verify`` extra against a real TLS server with a self-signed certificate."""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from airflow_tables import exceptions as ex

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def _reply(self, body: dict) -> None:
        data = json.dumps({"Msg": "OK", "ExecTime": 0, **body}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._reply({"Cards": []})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self._reply({"Success": True, "CardID": "CRD-00000000-0000-4000-8000-000000000001"})


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.1:{server.server_address[1]}", str(cert)
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def _system_ca_bundle_in_env(monkeypatch):
    # requests lets this variable override a Session's verify; the hook must not be fooled by it.
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", ssl.get_default_verify_paths().openssl_cafile)


def test_an_unknown_certificate_is_refused_and_nothing_was_sent(make_hook, tls_server, tmp_path):
    url, _ = tls_server
    hook = make_hook(url, "a-long-api-key", project_id="P", max_retries=0)
    with pytest.raises(ex.DataTablesConnectionError) as info:
        hook.list_cards()
    assert "CERTIFICATE_VERIFY_FAILED" in str(info.value)
    path = tmp_path / "f.csv"
    path.write_text("a\n1\n")
    with pytest.raises(ex.DataTablesConnectionError) as info:
        hook.import_csv(None, path)
    assert not isinstance(info.value, ex.DataTablesImportUncertainError)
    assert info.value.request_sent is False


@pytest.mark.filterwarnings("ignore:Unverified HTTPS request")
@pytest.mark.parametrize("verify", ["cert", "false", False])
def test_verify_with_a_ca_bundle_or_off(make_hook, tls_server, tmp_path, verify):
    url, cert = tls_server
    hook = make_hook(url, "a-long-api-key", project_id="P", max_retries=0, verify=cert if verify == "cert" else verify)
    assert hook.list_cards() == []
    assert asyncio.run(hook.a_list_cards()) == []
    path = tmp_path / "f.csv"
    path.write_text("a\n1\n")
    assert hook.import_csv(None, path).startswith("CRD-")


def test_an_async_handshake_failure_ends_at_once(make_hook, tls_server, caplog):
    url, _ = tls_server
    hook = make_hook(url, "a-long-api-key", project_id="P", max_retries=5)
    with caplog.at_level("WARNING"), pytest.raises(ex.DataTablesConnectionError) as info:
        asyncio.run(hook.a_list_cards())
    assert "CERTIFICATE_VERIFY_FAILED" in str(info.value)
    assert info.value.retryable is False and info.value.request_sent is False
    assert not [r for r in caplog.records if "retry" in r.getMessage()]  # not retried


@pytest.mark.parametrize("problem", ["missing", "unreadable", "not-a-certificate"])
def test_a_ca_bundle_that_cannot_be_read_is_a_typed_error_naming_the_connection(
    make_hook, tls_server, tmp_path, caplog, problem
):
    import os

    url, cert = tls_server
    path = tmp_path / "ca.pem"
    if problem == "unreadable":
        if os.geteuid() == 0:
            pytest.skip("root reads any file")
        path.write_bytes(Path(cert).read_bytes())
        path.chmod(0)
    elif problem == "not-a-certificate":
        path.write_text("not a certificate\n")
    hook = make_hook(url, "a-long-api-key", conn_id="dt_ca", project_id="P", max_retries=5, verify=str(path))
    with caplog.at_level("WARNING"):
        for call in (hook.list_cards, lambda: asyncio.run(hook.a_list_cards())):
            with pytest.raises(ex.DataTablesConnectionError) as info:
                call()
            text = str(info.value)
            assert "'dt_ca'" in text and str(path) in text and "verify" in text, text
            assert info.value.retryable is False and info.value.request_sent is False
    assert not [r for r in caplog.records if "retry" in r.getMessage()]


@pytest.mark.parametrize("prefix", ["", "/tables"])
def test_a_host_without_its_scheme_is_told_the_base_url_to_set(make_hook, emulator, prefix):
    """A bare host means https; on a plain-HTTP port the hint names the host to set, not the request's URL."""
    bare = emulator.base_url.removeprefix("http://") + prefix
    hook = make_hook(bare, emulator.api_key, project_id=emulator.project_id, max_retries=0)
    for call in (hook.test_connection, lambda: asyncio.run(_async_failure(hook))):
        ok, message = call()
        assert not ok
        assert message.endswith(f"set the host to http://{bare}."), message
    if not prefix:
        ok, message = make_hook(f"http://{bare}", emulator.api_key, project_id=emulator.project_id).test_connection()
        assert ok, message


async def _async_failure(hook) -> tuple[bool, str]:
    try:
        await hook.a_list_cards()
    except ex.DataTablesConnectionError as exc:
        return False, str(exc)
    return True, ""
