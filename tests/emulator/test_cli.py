"""The command line: curl works as the seed describes, a first run is ready to use, --help explains
the configuration, bad configuration is refused clearly, and start-up is fast.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from tests.emulator._cli import EMULATOR, start_cli, stop_cli

from airflow_tables.emulator.testing import CONFIG_NAME, EmulatorProcess, make_test_config

curl = pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")


def _curl_import(emu, path: Path, file_arg: str) -> tuple[int, dict]:
    out = subprocess.run(
        [
            "curl", "-sS", "--noproxy", "*", "-w", "\n%{http_code}",
            "-H", f"X-API-Key: {emu.api_key}",
            "-F", f"ProjectID={emu.project_id}",
            "-F", file_arg.format(path=path),
            f"{emu.base_url}/v1.0/data/import",
        ],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    body, _, status = out.rpartition("\n")
    return int(status), json.loads(body)


@curl
def test_curl_imports_a_file_as_the_seed_shows(emulator, tmp_path):
    path = tmp_path / "from curl.csv"
    path.write_bytes(b"id,city\n1,Lisbon\n2,Porto\n")
    status, body = _curl_import(emulator, path, "File=@{path};type=text/csv")
    assert status == 200, body
    assert body["Msg"] == "OK" and body["Success"] is True
    summary = emulator.wait_until_processed(emulator.project_id, body["CardID"])
    assert (summary["CardName"], summary["Rows"], summary["SuccessfulUpload"]) == ("from curl", 2, True)


@curl
def test_curl_without_a_media_type_sends_octet_stream_and_is_refused(emulator, tmp_path):
    path = tmp_path / "x.csv"
    path.write_bytes(b"id\n1\n")
    status, body = _curl_import(emulator, path, "File=@{path}")
    assert status == 415 and "application/octet-stream" in body["Msg"]


def test_help_explains_keys_departments_credits_connectors_and_test_controls():
    script = Path(sys.executable).with_name("airflow-tables-emulator")
    argv = [str(script)] if script.exists() else EMULATOR
    text = subprocess.run([*argv, "--help"], capture_output=True, text=True, check=True, timeout=30).stdout
    for words in ["--data-dir", "--config", "api_keys", "X-API-Key", "manage", "read", "credits", "departments",
                  "connectors", "LockedFromDelete", "--test-controls", "--processing-delay", "first run"]:  # fmt: skip
        assert words in text, words


def test_a_first_run_without_config_prints_a_ready_to_use_key_and_department(tmp_path):
    data = tmp_path / "data"
    proc, info, log = start_cli([*EMULATOR, "--data-dir", str(data)], tmp_path)
    try:
        printed = log.read_text()
        key = re.search(r"X-API-Key:\s+(\S+)", printed).group(1)
        project_id = re.search(r"ProjectID:\s+(\S+)", printed).group(1)
        assert "credits:    100" in printed and "curl -H" in printed
        assert (
            f'export AIRFLOW_CONN_DATATABLES_DEFAULT=\'{{"conn_type": "datatables", "host": "{info["url"]}", '
            f'"password": "{key}", "extra": {{"project_id": "{project_id}"}}}}\'' in printed
        )
        headers = {"X-API-Key": key}
        response = httpx.post(
            f"{info['url']}/v1.0/data/import",
            headers=headers,
            data={"ProjectID": project_id},
            files={"File": ("first.csv", b"a\n1\n", "text/csv")},
        )
        assert response.status_code == 200, response.text
    finally:
        stop_cli(proc)
    proc, info, log = start_cli([*EMULATOR, "--data-dir", str(data)], tmp_path)  # second run: same key, same table
    try:
        second = log.read_text()
        assert "First run" not in second and "X-API-Key:" not in second  # the key's own lines, once
        assert f'"host": "{info["url"]}", "password": "{key}"' in second  # the connection line, on every start
        cards = httpx.get(f"{info['url']}/v1.0/projects/{project_id}/cards", headers=headers).json()["Cards"]
        assert [c["CardName"] for c in cards] == ["first"]
    finally:
        stop_cli(proc)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda c: c["api_keys"][0].update(organisation="nobody"), "api_keys[0].organisation 'nobody'"),
        (lambda c: c["connectors"][0].update(status="on"), "connectors[0].status"),
        (lambda c: c["connectors"][0].update(card_id="CRD-1"), "connectors[0].card_id 'CRD-1'"),
        (lambda c: c["organisations"]["test-org"].update(credits=-1), "organisations.test-org.credits"),
        (lambda c: c.update(users=[]), "unknown field(s) users"),
        (lambda c: c.update(api_keys=[]), "no api_keys"),
        (lambda c: c.update(limits={"max_columns": 0}), "limits.max_columns must be a whole number of at least 1"),
    ],
)
def test_a_bad_configuration_exits_2_naming_the_field(tmp_path, change, words):
    config = make_test_config()
    change(config)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    result = subprocess.run(
        [*EMULATOR, "--data-dir", str(tmp_path / "d"), "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2 and words in result.stderr, result.stderr


def test_a_toml_configuration_works(tmp_path):
    pytest.importorskip("tomllib")
    path = tmp_path / "config.toml"
    path.write_text(
        "[organisations.acme]\ncredits = 3\n\n"
        '[[api_keys]]\nkey = "toml-key"\norganisation = "acme"\nmanage = ["PRJ-t"]\n'
    )
    proc, info, _ = start_cli([*EMULATOR, "--data-dir", str(tmp_path / "d"), "--config", str(path)], tmp_path)
    try:
        response = httpx.get(f"{info['url']}/v1.0/projects/PRJ-t/cards", headers={"X-API-Key": "toml-key"})
        assert response.status_code == 200 and response.json()["Cards"] == []
    finally:
        stop_cli(proc)


def test_a_port_in_use_is_reported(emulator, tmp_path):
    result = subprocess.run(
        [*EMULATOR, "--data-dir", str(tmp_path), "--port", str(emulator.port)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1 and f"cannot listen on 127.0.0.1:{emulator.port}" in result.stderr


def test_a_data_directory_serves_one_emulator_at_a_time(emulator):
    result = subprocess.run(
        [
            *EMULATOR,
            "--data-dir",
            str(emulator.data_dir),
            "--config",
            str(emulator.data_dir / CONFIG_NAME),
            "--port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 1 and "another emulator is using the data directory" in result.stderr


def test_it_starts_again_on_the_same_data_directory(tmp_path):
    # How fast it starts is a speed claim: benchmarks/parse.py measures it (< 1 s).
    for _ in range(2):
        emu = EmulatorProcess(tmp_path / "startup").start()
        assert emu.list_cards(emu.project_id) is not None
        emu.stop()


def test_without_the_emulator_extra_the_command_names_it(tmp_path):
    """``python -S``: no site-packages, so no Starlette or uvicorn, as in a worker's install."""
    src = Path(__file__).resolve().parents[2] / "src"
    code = f"import sys; sys.path.insert(0, {str(src)!r}); from airflow_tables.emulator.__main__ import main; "
    code += f"sys.exit(main(['--data-dir', {str(tmp_path / 'data')!r}]))"
    result = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, timeout=30)
    assert result.returncode == 1, result.stderr
    assert "needs starlette and uvicorn (not installed here)" in result.stderr
    assert "pip install 'airflow-tables[emulator]'" in result.stderr
    assert not (tmp_path / "data").exists()  # nothing was written


# -- a server on a network (issue 24): no connection is held for ever ---------------------------

_QUICK = {"keep_alive": 0.5, "request_headers": 1}


def _closed_within(sock: socket.socket, seconds: float, drip: bytes = b"") -> float:
    """Poll until the server closes ``sock`` (sending ``drip`` bytes meanwhile); return when, or fail."""
    started = time.monotonic()
    sock.settimeout(0.2)
    while time.monotonic() - started < seconds:
        try:
            if drip:
                sock.sendall(drip)
            if sock.recv(65536) == b"":
                return time.monotonic() - started
        except TimeoutError:
            continue
        except ConnectionError:
            return time.monotonic() - started
    raise AssertionError(f"the server kept the connection open for {seconds} s")


@pytest.mark.parametrize("sent", [b"", b"GET /v1.0/projects/x/cards HTTP/1.1\r\nHost: e\r\n"], ids=["silent", "slow"])
def test_a_connection_that_never_finishes_its_request_headers_is_closed(make_emulator, sent):
    emu, _ = make_emulator(config={**make_test_config(), "timeouts": _QUICK})
    with socket.create_connection(("127.0.0.1", emu.port)) as sock:
        sock.sendall(sent)
        # A header line every 0.2 s would keep it open for ever without a deadline on the whole head.
        assert 0.9 <= _closed_within(sock, 10, drip=b"X-A: b\r\n" if sent else b"") < 5


def test_an_idle_keep_alive_connection_is_closed_after_the_keep_alive_timeout(make_emulator):
    emu, _ = make_emulator(config={**make_test_config(), "timeouts": _QUICK})
    with socket.create_connection(("127.0.0.1", emu.port)) as sock:
        sock.sendall(b"GET /v1.0/projects/x/cards HTTP/1.1\r\nHost: e\r\n\r\n")
        sock.settimeout(10)
        assert sock.recv(65536).startswith(b"HTTP/1.1 401")
        assert _closed_within(sock, 10) < 0.9  # keep_alive 0.5 s, not request_headers (1 s)


def test_request_headers_that_run_past_16_kib_unfinished_are_400_in_the_envelope(emulator):
    with socket.create_connection(("127.0.0.1", emulator.port), timeout=10) as sock:
        # Unfinished: h11 holds at most 16 KiB of a head it is still waiting to complete.
        sock.sendall(b"GET /v1.0/projects/x/cards HTTP/1.1\r\nHost: e\r\nX-Long: " + b"a" * 20000)
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400"), raw
    answer = json.loads(body)
    assert set(answer) == {"Msg", "ExecTime"} and "16 KiB" in answer["Msg"]


def test_help_gives_the_bounds_and_timeouts_of_the_server():
    text = subprocess.run([*EMULATOR, "--help"], capture_output=True, text=True, check=True, timeout=30).stdout
    for words in ["timeouts", "keep_alive", "request_headers", "body", "16 parts", "64 KiB", "16 KiB", "2 MiB"]:
        assert words in text, words


def test_a_body_nobody_reads_that_still_drips_after_the_answer_is_cut_off(make_emulator):
    emu, _ = make_emulator(config={**make_test_config(), "timeouts": _QUICK})
    with socket.create_connection(("127.0.0.1", emu.port)) as sock:
        sock.sendall(b"GET /v1.0/projects/x/cards HTTP/1.1\r\nHost: e\r\nContent-Length: 100000\r\n\r\n")
        sock.settimeout(10)
        assert sock.recv(65536).startswith(b"HTTP/1.1 401")  # answered without reading the body
        # A byte every 0.2 s would keep the keep-alive timer from ever running out.
        assert 0.9 <= _closed_within(sock, 10, drip=b"-") < 5  # request_headers (1 s), not keep_alive
