"""The emulator under a crowd: idle connections and concurrent uploads do not starve a reader.

Docs and tests run the emulator as a service, so one slow or silent client must not hold
up the others: 100 open connections that send nothing (or half a request) and 8 threads
uploading at once, while the list endpoint is timed again and again. Everything stays on
127.0.0.1 and stops by itself.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import httpx

IDLE_CONNECTIONS = 100
UPLOADERS = 8
UPLOADS_EACH = 6
DEADLINE = 60  # seconds for the whole soak; it normally takes a few


def test_the_list_answers_within_a_second_under_idle_connections_and_concurrent_uploads(fresh_emulator):
    emu = fresh_emulator
    idle = [socket.create_connection(("127.0.0.1", emu.port), timeout=5) for _ in range(IDLE_CONNECTIONS)]
    for sock in idle[::2]:  # half of them start a request and never finish it
        sock.sendall(b"POST /v1.0/data/import HTTP/1.1\r\nHost: e\r\n")
    results: list[int] = []
    failures: list[BaseException] = []

    def upload(n: int) -> None:
        try:
            with httpx.Client(base_url=emu.base_url, timeout=30, trust_env=False) as http:
                for i in range(UPLOADS_EACH):
                    csv = f"id,who\n{n},{i}\n".encode() * 50
                    response = http.post(
                        "/v1.0/data/import",
                        headers={"X-API-Key": emu.api_key},
                        data={"ProjectID": emu.project_id},
                        files={"File": (f"soak-{n}-{i}.csv", csv, "text/csv")},
                    )
                    results.append(response.status_code)
        except BaseException as err:  # reported by the main thread
            failures.append(err)

    threads = [threading.Thread(target=upload, args=(n,), daemon=True) for n in range(UPLOADERS)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    timings: list[float] = []
    try:
        with httpx.Client(base_url=emu.base_url, timeout=5, trust_env=False) as http:
            while any(t.is_alive() for t in threads) or len(timings) < 5:
                assert time.monotonic() - started < DEADLINE, "the soak did not finish in time"
                before = time.perf_counter()
                response = http.get(f"/v1.0/projects/{emu.project_id}/cards", headers={"X-API-Key": emu.api_key})
                timings.append(time.perf_counter() - before)
                assert response.status_code == 200, response.text
    finally:
        for sock in idle:
            with contextlib.suppress(OSError):
                sock.close()
        for thread in threads:
            thread.join(DEADLINE)
    assert not failures, failures
    assert results == [200] * (UPLOADERS * UPLOADS_EACH)
    assert max(timings) < 1.0, f"slowest list answer {max(timings):.3f} s of {len(timings)}"
    listed = {c["CardName"] for c in emu.list_cards()}
    assert {f"soak-{n}-{i}" for n in range(UPLOADERS) for i in range(UPLOADS_EACH)} <= listed
