"""A small HTTP client for the emulator's tests: the seed's four endpoints, over httpx.

It is deliberately not the provider's hook: these tests check the server
against the seed, and must not share the client's assumptions.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from airflow_tables.emulator.testing import EmulatorProcess

CARD_ID = re.compile(r"CRD-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
SIMPLE_CSV = b"id,name,qty\n1,apple,3\n2,pear,\n-3,plum,7\n"
_DEFAULT = object()


class Client:
    """Requests as a caller of the service makes them; every method returns the raw response.

    Test modules get it through the ``client`` / ``fresh_client`` fixtures (helpers
    are not imported from a conftest), with the checks they share as methods.
    """

    CARD_ID = CARD_ID
    SIMPLE_CSV = SIMPLE_CSV

    def __init__(self, emulator) -> None:
        self.emu = emulator
        self.http = httpx.Client(base_url=emulator.base_url, timeout=60, trust_env=False)

    def _headers(self, key) -> dict:
        key = self.emu.api_key if key is _DEFAULT else key
        return {"X-API-Key": key} if key is not None else {}

    def list(self, project_id: str | None = None, *, key=_DEFAULT) -> httpx.Response:
        return self.http.get(f"/v1.0/projects/{project_id or self.emu.project_id}/cards", headers=self._headers(key))

    def get(self, card_id: str, project_id: str | None = None, *, key=_DEFAULT) -> httpx.Response:
        path = f"/v1.0/projects/{project_id or self.emu.project_id}/cards/{card_id}"
        return self.http.get(path, headers=self._headers(key))

    def delete(self, card_id: str, project_id: str | None = None, *, key=_DEFAULT) -> httpx.Response:
        path = f"/v1.0/projects/{project_id or self.emu.project_id}/cards/{card_id}"
        return self.http.delete(path, headers=self._headers(key))

    def upload(
        self,
        content: bytes | Path = SIMPLE_CSV,
        *,
        name: str = "data.csv",
        media_type: str | None = "text/csv",
        project_id: str | None = _DEFAULT,
        card_id: str | None = None,
        key=_DEFAULT,
    ) -> httpx.Response:
        """POST /v1.0/data/import; ``project_id=None`` leaves the field out."""
        data = {}
        if project_id is not None:
            data["ProjectID"] = self.emu.project_id if project_id is _DEFAULT else project_id
        if card_id is not None:
            data["CardID"] = card_id
        body = content.read_bytes() if isinstance(content, Path) else content
        part = (name, body, media_type) if media_type else (name, body)
        return self.http.post("/v1.0/data/import", data=data, files={"File": part}, headers=self._headers(key))

    def import_ok(self, content: bytes | Path = SIMPLE_CSV, **kwargs) -> str:
        """Import and return the CardID, failing the test on any refusal."""
        response = self.upload(content, **kwargs)
        assert response.status_code == 200, response.text
        return response.json()["CardID"]

    def import_ready(self, content: bytes | Path = SIMPLE_CSV, **kwargs) -> str:
        """Import and wait until the table is ready; return the CardID."""
        card_id = self.import_ok(content, **kwargs)
        self.emu.wait_until_processed(kwargs.get("project_id") or self.emu.project_id, card_id)
        return card_id

    def close(self) -> None:
        self.http.close()

    @contextmanager
    def costs_nothing(self):
        """Assert that the requests inside spend no credit, import nothing and leave no file behind."""
        files = set((self.emu.data_dir / "files").iterdir())
        stats = self.emu.stats()
        yield
        after = self.emu.stats()
        assert after["credits"] == stats["credits"]
        assert after["imports_accepted"] == stats["imports_accepted"]
        assert set((self.emu.data_dir / "files").iterdir()) <= files

    @staticmethod
    def assert_error(response: httpx.Response, status: int, *words: str) -> str:
        """The response is the seed's error envelope with ``status``; its Msg mentions every word."""
        assert response.status_code == status, response.text
        body = response.json()
        assert set(body) == {"Msg", "ExecTime"}, body
        assert isinstance(body["ExecTime"], (int, float))
        for word in words:
            assert word.lower() in body["Msg"].lower(), (word, body["Msg"])
        return body["Msg"]


@pytest.fixture
def client(emulator):
    c = Client(emulator)
    yield c
    c.close()


@pytest.fixture
def fresh_client(fresh_emulator):
    c = Client(fresh_emulator)
    yield c
    c.close()


@pytest.fixture
def make_emulator(tmp_path):
    """Start emulators with a configuration of the test's own: ``emu, client = make_emulator(config=...)``."""
    started: list[tuple[EmulatorProcess, Client]] = []

    def make(**kwargs) -> tuple[EmulatorProcess, Client]:
        emu = EmulatorProcess(tmp_path / f"emulator-{len(started)}", **kwargs).start()
        started.append((emu, Client(emu)))
        return started[-1]

    yield make
    for emu, c in started:
        c.close()
        emu.stop()
