"""Shared helpers for the benchmarks: cached test files, whole-process timing, one table.

Every figure is a ratio against an anchor measured in the same run on the same
file, because the machine is shared and noisy (see shared/bench/ANCHORS.md).
"""

from __future__ import annotations

import os
import platform
import random
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(os.environ.get("AIRFLOW_TABLES_BENCH_CACHE", Path.home() / ".cache" / "airflow-tables-bench"))
MIB = 1024 * 1024

_WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "Lisbon", "Zürich", "n/a", ""]
_STRUCTURED = ["x, y", "line one\nline two", "semi;colon", 'say "hi"', "tab\there", "pipe|bar", "a,b\r\nc"]


def _field(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.45:
        return str(rng.randint(0, 10**7))
    if r < 0.75:
        return rng.choice(_WORDS)
    if r < 0.85:
        return f"{rng.uniform(-1000, 1000):.3f}"
    text = rng.choice(_STRUCTURED) if r < 0.93 else rng.choice(_WORDS)
    return '"' + text.replace('"', '""') + '"'


def csv_file(columns: int, size_mib: int) -> tuple[Path, int]:
    """A cached CSV just under ``size_mib`` MiB, with quoted separators and line breaks; returns (path, rows).

    A block of random rows is repeated, so making a 512 MiB file takes seconds, not minutes.
    """
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"bench_{columns}cols_{size_mib}mib.csv"
    rows_file = path.with_suffix(".rows")
    if path.exists() and rows_file.exists():
        return path, int(rows_file.read_text())
    rng = random.Random(columns * 1000 + size_mib)
    header = ",".join(f"col_{i}" for i in range(columns)) + "\n"
    block_rows = []
    block_size = 0
    while block_size < 4 * MIB:
        row = ",".join(_field(rng) for _ in range(columns)) + "\n"
        block_rows.append(row)
        block_size += len(row.encode())
    block = "".join(block_rows).encode()
    limit = size_mib * MIB - MIB // 2  # "just under"
    rows = 0
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        f.write(header.encode())
        written = len(header)
        while written + len(block) <= limit:
            f.write(block)
            written += len(block)
            rows += len(block_rows)
        for row in block_rows:
            data = row.encode()
            if written + len(data) > limit:
                break
            f.write(data)
            written += len(data)
            rows += 1
    tmp.rename(path)
    rows_file.write_text(str(rows))
    return path, rows


@dataclass
class Run:
    seconds: float
    peak_mib: float
    stdout: str


def run_process(argv: list[str], env: dict | None = None) -> Run:
    """Run a whole process; return its wall time, peak resident memory (it and its children) and output."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out, err = b"", b""
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0 and not out:
        raise RuntimeError(f"{argv[:3]} failed ({proc.returncode}): {err.decode(errors='replace')[-2000:]}")
    return Run(seconds, usage.ru_maxrss / 1024, out.decode())


def median_runs(make_runs, repeat: int) -> dict[str, list[Run]]:
    """Call ``make_runs()`` ``repeat`` times (it runs every contender once, alternating) and collect."""
    collected: dict[str, list[Run]] = {}
    for _ in range(repeat):
        for name, run in make_runs().items():
            collected.setdefault(name, []).append(run)
    return collected


def med(runs: list[Run], attr: str) -> float:
    return statistics.median(getattr(r, attr) for r in runs)


def machine() -> str:
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
        mem = f", {kb / 1024**2:.0f} GiB"
    except OSError:
        pass
    cpu = platform.processor() or platform.machine()
    return f"{os.cpu_count()} cores{mem}, {cpu}, Python {platform.python_version()}, {platform.system()}"


def python() -> str:
    return sys.executable


@dataclass
class Row:
    """One line of the benchmark report: ours against an anchor measured in the same run."""

    benchmark: str
    case: str
    ours: str
    anchor: str
    ratio: float | None
    peak: str
    target: str
    met: bool | None

    def markdown(self) -> str:
        ratio = "" if self.ratio is None else f"{self.ratio:.2f}x"
        met = {True: "yes", False: "**no**", None: ""}[self.met]
        cells = [self.benchmark, self.case, self.ours, self.anchor, ratio, self.peak, self.target, met]
        return "| " + " | ".join(cells) + " |"


def write_rows(path: str | None, rows: list[Row]) -> None:
    """With ``--json PATH``, leave the rows for benchmarks/run_all.py."""
    if path:
        import json
        from dataclasses import asdict

        Path(path).write_text(json.dumps([asdict(r) for r in rows]))
