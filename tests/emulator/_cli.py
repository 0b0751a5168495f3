"""Run ``airflow-tables-emulator`` as a user does (its own arguments, its printed banner), for tests.

Shared by the command line's tests and the tests that paste what its banner prints.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

EMULATOR = [sys.executable, "-m", "airflow_tables.emulator"]


def start_cli(argv: list[str], workdir: Path, timeout: float = 30) -> tuple[subprocess.Popen, dict, Path]:
    """Start ``argv`` on a free port; return the process, its ready-file ``{url, port, pid}`` and its output file."""
    ready, log = workdir / "ready.json", workdir / f"out-{time.monotonic_ns()}.txt"
    ready.unlink(missing_ok=True)
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*argv, "--port", "0", "--ready-file", str(ready), "--stop-with-parent"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + timeout
    while not ready.exists():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "not ready in time"
        time.sleep(0.02)
    return proc, json.loads(ready.read_text()), log


def stop_cli(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(10)
