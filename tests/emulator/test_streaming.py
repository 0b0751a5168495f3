"""Uploads go to disk without the server's memory growing with them.

The server's peak resident memory (VmHWM) is read after a 16 MiB upload and again
after a 96 MiB one: if the body, the scan or the reading held the file, the second
would add about 80 MiB; bounded, it adds next to nothing. (The 512 MiB figures are
in benchmarks/emulator_read.py; this is the cheap, always-run version.)
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

MiB = 1024 * 1024

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/status")


def _write_csv(path: Path, size_mib: int) -> int:
    """A CSV of about ``size_mib`` MiB with quoted separators and line breaks; returns its row count."""
    block_rows = [f'{i},"Lisbon, PT",{i * 7 % 1000},"two\nlines",x{i % 13}\n' for i in range(20_000)]
    block = "".join(block_rows).encode()
    repeats = max(1, size_mib * MiB // len(block))
    with open(path, "wb") as f:
        f.write(b"id,place,amount,note,tag\n")
        for _ in range(repeats):
            f.write(block)
    return repeats * len(block_rows)


def _peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_memory_does_not_grow_with_the_upload(make_emulator, tmp_path):
    emu, client = make_emulator()
    peaks = []
    for size in (16, 96):
        path = tmp_path / f"upload_{size}.csv"
        rows = _write_csv(path, size)
        with open(path, "rb") as f:
            response = client.http.post(
                "/v1.0/data/import",
                headers={"X-API-Key": emu.api_key},
                data={"ProjectID": emu.project_id},
                files={"File": (path.name, f, "text/csv")},
            )
        assert response.status_code == 200, response.text
        summary = emu.wait_until_processed(emu.project_id, response.json()["CardID"], timeout=60)
        assert summary["Rows"] == rows and summary["SuccessfulUpload"] is True
        peaks.append(_peak_mib(emu.process.pid))
        path.unlink()
    assert peaks[1] - peaks[0] < 24, f"peak memory {peaks[0]:.0f} MiB after 16 MiB, {peaks[1]:.0f} MiB after 96 MiB"
    assert peaks[1] < 160, peaks
