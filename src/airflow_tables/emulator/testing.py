"""Run the emulator as a real process, for tests, demos and benchmarks; standard library only.

A test that talks to the service over real HTTP needs a server on a free port,
fresh or persistent state, the test controls, and a way to kill it hard and
start it again. :class:`EmulatorProcess` does all of that without importing the
server (or Airflow) into the test process::

    with EmulatorProcess() as emu:
        emu.set_faults([{"methods": ["POST"], "status": 503, "times": 1}])
        ...  # point a client at emu.base_url with emu.api_key
        emu.wait_until_processed(emu.project_id, card_id)

Readiness and waits poll with deadlines; nothing sleeps a fixed time.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

POLL = 0.02
CONFIG_NAME = "test-config.json"
LOG_NAME = "emulator.log"
READY_NAME = "emulator.ready"
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class EmulatorError(RuntimeError):
    """The emulator could not be started, or answered a test control with an error."""


def make_test_config(*, credits: int = 1000) -> dict:
    """A configuration with a managing key, a read-only key, two departments and one active connector."""
    token = secrets.token_hex(6)
    return {
        "organisations": {"test-org": {"credits": credits}},
        "departments": {
            "PRJ-test": {"name": "Test department", "domain": "Testing"},
            "PRJ-other": {"name": "Other department", "domain": "Testing"},
        },
        "api_keys": [
            {"key": f"test-manage-{token}", "organisation": "test-org", "manage": ["PRJ-test", "PRJ-other"]},
            {"key": f"test-read-{token}", "organisation": "test-org", "read": ["PRJ-test"]},
        ],
        "connectors": [
            {
                "card_id": f"CRD-{uuid.UUID(int=1, version=4)}",
                "project_id": "PRJ-test",
                "name": "CRM accounts",
                "source": "Salesforce",
                "status": "active",
                "rows": 1200,
                "columns": {"AccountId": "string", "Employees": "long"},
            }
        ],
    }


class EmulatorProcess:
    """One emulator server process; ``port=0`` picks a free port, ``data_dir=None`` a temporary directory.

    With ``config=None`` the attributes name the test configuration's keys and
    departments: ``api_key`` manages ``project_id`` and ``other_project_id``,
    ``read_only_key`` may only read ``project_id``, ``connector_card_id`` is an
    active connector table in ``project_id``, and ``organisation`` has 1000 credits.
    With a ``config`` of your own they are taken from its first managing key,
    first read-only key and first connector, where there are any.
    ``ssl_certfile`` (and ``ssl_keyfile``) serve HTTPS; ``base_url`` is then ``https://``.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike | None = None,
        *,
        config: dict | None = None,
        test_controls: bool = True,
        processing_delay: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_certfile: str | os.PathLike | None = None,
        ssl_keyfile: str | os.PathLike | None = None,
    ) -> None:
        self._owns_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.config = config if config is not None else make_test_config()
        self.test_controls = test_controls
        self.processing_delay = processing_delay
        self._start_delay = processing_delay
        self.host = host
        self.port = port
        self.ssl_certfile = ssl_certfile
        self.ssl_keyfile = ssl_keyfile
        self._opener = _NO_PROXY
        if ssl_certfile is not None:
            import ssl

            # The helper only talks to the process it started, whose certificate a test may
            # deliberately make untrusted: its own control requests do not verify it.
            https = urllib.request.HTTPSHandler(context=ssl._create_unverified_context())
            self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), https)
        self.base_url = ""
        self.process: subprocess.Popen | None = None
        keys = self.config.get("api_keys", [])
        manage: dict = next((k for k in keys if k.get("manage")), {})
        read: dict = next((k for k in keys if k.get("read") and not k.get("manage")), {})
        self.api_key: str = manage.get("key", "")
        self.read_only_key: str = read.get("key", "")
        projects = list(manage.get("manage") or [])
        self.project_id: str = projects[0] if projects else ""
        self.other_project_id: str = projects[1] if len(projects) > 1 else ""
        self.organisation: str = manage.get("organisation", "")
        connectors = self.config.get("connectors") or [{}]
        self.connector_card_id: str = connectors[0].get("card_id", "")

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, timeout: float = 30) -> EmulatorProcess:
        """Spawn ``python -m airflow_tables.emulator`` and return once it serves (or raise)."""
        if self.process is not None and self.process.poll() is None:
            raise EmulatorError("the emulator is already running")
        if self.data_dir is None:
            self.data_dir = Path(tempfile.mkdtemp(prefix="datatables-emulator-"))
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config_path = self.data_dir / CONFIG_NAME
        config_path.write_text(json.dumps(self.config, indent=2), encoding="utf-8")
        ready = self.data_dir / READY_NAME
        ready.unlink(missing_ok=True)
        argv = [
            sys.executable,
            "-m",
            "airflow_tables.emulator",
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--data-dir",
            str(self.data_dir),
            "--config",
            str(config_path),
            "--ready-file",
            str(ready),
            "--processing-delay",
            str(self.processing_delay),
            "--stop-with-parent",
        ]
        if self.test_controls:
            argv.append("--test-controls")
        if self.ssl_certfile is not None:
            argv += ["--ssl-certfile", os.fspath(self.ssl_certfile)]
        if self.ssl_keyfile is not None:
            argv += ["--ssl-keyfile", os.fspath(self.ssl_keyfile)]
        self._start_delay = self.processing_delay
        with open(self.data_dir / LOG_NAME, "ab") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while not ready.exists():
            if self.process.poll() is not None:
                raise EmulatorError(f"the emulator exited with {self.process.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise EmulatorError(f"the emulator was not ready within {timeout} s:\n{self.log_tail()}")
            time.sleep(POLL)
        info = json.loads(ready.read_text())
        self.port = info["port"]
        self.base_url = info["url"]
        return self

    def stop(self, timeout: float = 10) -> None:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout``); remove a temporary data directory."""
        self._end(signal.SIGTERM, timeout)
        if self._owns_dir and self.data_dir is not None:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None

    def kill(self) -> None:
        """SIGKILL the server, as a crash would; the data directory is kept for :meth:`restart`."""
        self._end(signal.SIGKILL, 10)

    def restart(self, timeout: float = 30) -> None:
        """Start again on the same port and data directory (stopping first if still running)."""
        self._end(signal.SIGTERM, 10)
        self.start(timeout)

    def _end(self, sig: int, timeout: float) -> None:
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)

    def log_tail(self, lines: int = 40) -> str:
        if self.data_dir is None:
            return ""
        try:
            text = (self.data_dir / LOG_NAME).read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> EmulatorProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- HTTP -----------------------------------------------------------------------------

    def request(self, method: str, path: str, body: dict | None = None, *, key: str | None = None) -> tuple[int, dict]:
        """Send a JSON request; return (status, body) whatever the status."""
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if key:
            headers["X-API-Key"] = key
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base_url + path, data=data, method=method, headers=headers)
        try:
            with self._opener.open(req, timeout=30) as resp:
                return resp.status, json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read() or b"{}")

    def _control(self, method: str, path: str, body: dict | None = None) -> dict:
        status, answer = self.request(method, path, body)
        if status != 200:
            raise EmulatorError(f"{method} {path} answered {status}: {answer.get('Msg', answer)}")
        return answer

    def set_faults(self, rules: list[dict], seed: int | None = None) -> None:
        self._control("PUT", "/_emulator/faults", {"rules": rules, "seed": seed})

    def clear_faults(self) -> None:
        self._control("DELETE", "/_emulator/faults")

    def set_processing_delay(self, seconds: float) -> None:
        """Keep tables being read at least ``seconds`` after import (also after :meth:`restart`)."""
        self._control("PUT", "/_emulator/settings", {"processing_delay": seconds})
        self.processing_delay = seconds

    def set_fail_readings(self, count: int, reason: str | None = None) -> None:
        """Make the next ``count`` readings end with ``SuccessfulUpload`` false (``reason``: their ``Description``)."""
        self._control("PUT", "/_emulator/settings", {"fail_readings": count, "failure_reason": reason})

    def set_lose_rows(self, count: int) -> None:
        """Make the next reading end well but ``count`` rows short of the file's (``Rows``)."""
        self._control("PUT", "/_emulator/settings", {"lose_rows": count})

    def set_settings(self, **settings: object) -> None:
        """Set reading settings by name (``lock_while_reading=True``, ``replacement_card_id=False``, ...)."""
        self._control("PUT", "/_emulator/settings", dict(settings))

    def reset_settings(self) -> None:
        """Processing delay and failing readings back to how the process was started."""
        self._control("DELETE", "/_emulator/settings")
        self.processing_delay = self._start_delay

    def stats(self) -> dict:
        return self._control("GET", "/_emulator/stats")

    def reset_stats(self) -> None:
        self._control("POST", "/_emulator/stats/reset")

    def set_connector_status(self, card_id: str, status: str) -> None:
        self._control("PUT", f"/_emulator/connectors/{urllib.parse.quote(card_id)}", {"status": status})

    def credits(self) -> int:
        """The balance of :attr:`organisation`."""
        return self.stats()["credits"][self.organisation]

    def list_cards(self, project_id: str | None = None, *, key: str | None = None) -> list[dict]:
        project_id = project_id or self.project_id
        status, body = self.request(
            "GET", f"/v1.0/projects/{urllib.parse.quote(project_id)}/cards", key=key or self.api_key
        )
        if status != 200:
            raise EmulatorError(f"listing {project_id} answered {status}: {body.get('Msg')}")
        return body["Cards"]

    def received_bytes(self, card_id: str) -> bytes:
        """The bytes the emulator received for a table (its data file, as its store records it), to compare."""
        import sqlite3

        assert self.data_dir is not None, "the emulator was not started"
        db = sqlite3.connect(f"file:{self.data_dir / 'emulator.sqlite3'}?mode=ro", uri=True)
        try:
            query = "SELECT COALESCE(pending_file, file) FROM cards WHERE card_id = ?"
            row = db.execute(query, (card_id,)).fetchone()
        finally:
            db.close()
        if row is None or not row[0]:
            raise LookupError(f"table {card_id} holds no upload")
        return (self.data_dir / row[0]).read_bytes()

    def wait_until_processed(self, project_id: str, card_id: str, timeout: float = 30) -> dict:
        """Poll the list (the seed's polling rule) until the table's ``Processed`` is true; return its summary."""
        deadline = time.monotonic() + timeout
        while True:
            card = next((c for c in self.list_cards(project_id) if c["CardID"] == card_id), None)
            if card is None:
                raise LookupError(f"table {card_id} is not in department {project_id}")
            if card["Processed"]:
                return card
            if time.monotonic() > deadline:
                raise TimeoutError(f"table {card_id} was still being read after {timeout} s")
            time.sleep(POLL)
