"""Shared helpers for the benchmarks: cached test files, whole-process timing, one table.

Every figure is a ratio against an anchor measured in the same run on the same
file, because the machine is shared and noisy (see shared/bench/ANCHORS.md).
"""

from __future__ import annotations

import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CACHE = Path(os.environ.get("AIRFLOW_TABLES_BENCH_CACHE", Path.home() / ".cache" / "airflow-tables-bench"))
MIB = 1024 * 1024

_FIRST = ["Ana", "Bo", "Chen", "Dmitri", "Eva", "Farah", "Gustav", "Hana", "Ivo", "Jürgen", "Kofi", "Lena"]
_LAST = ["Silva", "Larsen", "Wang", "Ivanov", "Novak", "Haddad", "Berg", "Sato", "Horvat", "Müller", "Mensah"]
_CITIES = ["Lisbon", "Zürich", "São Paulo", "Oslo", "Nairobi", "Kyoto", "Austin", "Lyon", "Gdańsk", "Perth"]
_CATEGORIES = ["retail", "wholesale", "online", "partner", "internal", "returns", "samples", "other"]
_NOTES = ["left at reception", "second delivery", "paid by card", "gift wrapped", "n/a", "priority customer"]
# Quoted because they must be: separators, line breaks and quotes inside the text.
_QUOTED = [
    "delivered late, customer called",
    "line one\nline two",
    "ask for Bo; not Ana",
    'customer said "fine"',
    "ship to: dock 4\r\nbring ID",
    "sizes: S|M|L",
    "tab\tseparated note",
]


def _row(rng: random.Random, columns: int, n: int) -> str:
    """One row of a plausible sales table: ids, times, amounts, names, emails, cities, notes."""
    fields = []
    for c in range(columns):
        kind = c % 10
        if kind == 0:
            fields.append(str(n * 7 + c))
        elif kind == 1:
            fields.append(
                f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T"
                f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
            )
        elif kind == 2:
            fields.append(f"{rng.uniform(0, 5000):.2f}")
        elif kind == 3:
            fields.append(rng.choice(_CATEGORIES))
        elif kind == 4:
            fields.append(f"{rng.choice(_FIRST)} {rng.choice(_LAST)}")
        elif kind == 5:
            fields.append(f"{rng.choice(_FIRST).lower()}.{rng.choice(_LAST).lower()}@example.com")
        elif kind == 6:
            fields.append(rng.choice(_CITIES))
        elif kind == 7:  # free text: one in four needs quoting
            r = rng.random()
            if r < 0.25:
                fields.append('"' + rng.choice(_QUOTED).replace('"', '""') + '"')
            else:
                fields.append("" if r < 0.4 else rng.choice(_NOTES))
        elif kind == 8:
            fields.append(rng.choice(["true", "false"]))
        else:
            fields.append(str(rng.randint(0, 500)))
    return ",".join(fields) + "\n"


def csv_file(columns: int, size_mib: int) -> tuple[Path, int]:
    """A cached CSV just under ``size_mib`` MiB, with quoted separators and line breaks; returns (path, rows).

    The data looks like a sales export: ids, timestamps, amounts, names, e-mail addresses,
    cities with accents, and a free-text column where one value in four needs quoting
    (commas, semicolons, pipes, tabs, quotes, LF and CRLF line breaks inside).

    A block of random rows is repeated, so making a 512 MiB file takes seconds, not minutes.
    """
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"sales_{columns}cols_{size_mib}mib.csv"
    rows_file = path.with_suffix(".rows")
    if path.exists() and rows_file.exists():
        return path, int(rows_file.read_text())
    rng = random.Random(columns * 1000 + size_mib)
    header = ",".join(f"col_{i}" for i in range(columns)) + "\n"
    block_rows = []
    block_size = 0
    while block_size < 4 * MIB:
        row = _row(rng, columns, len(block_rows))
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
    # User + system CPU time of the process and the children it waited for (from os.wait4): steadier
    # than wall time on a shared machine.
    cpu_seconds: float


def seeded_config(tables: int, *, credits: int | None = None) -> dict:
    """The emulator's test configuration with ``tables`` connector tables in its first department.

    Connector tables are in every listing like any other table, and nothing else makes tables
    without an import (ten thousand imports over HTTP would take longer than a benchmark).
    """
    from airflow_tables.emulator.testing import make_test_config

    config = make_test_config() if credits is None else make_test_config(credits=credits)
    project = config["api_keys"][0]["manage"][0]
    config["connectors"] += [
        {
            "project_id": project,
            "name": f"table {i:05d}",
            "source": "Benchmark",
            "status": "active" if i % 3 else "paused",
            "rows": i,
        }
        for i in range(tables)
    ]
    return config


def airflow_home(dag_file: str, dags: str) -> Path:
    """A throwaway Airflow home (set in ``os.environ``) with a migrated SQLite database and ``dags`` in ``dag_file``."""
    import base64
    import secrets
    import tempfile

    home = Path(tempfile.mkdtemp(prefix="airflow-tables-bench-"))
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
            "AIRFLOW__CORE__FERNET_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode(),
        }
    )
    (home / "dags").mkdir()
    (home / "dags" / dag_file).write_text(dags)
    airflow = str(Path(sys.executable).with_name("airflow"))
    subprocess.run([airflow, "db", "migrate"], check=True, capture_output=True, env=os.environ)
    return home


def run_process(argv: list[str], env: dict | None = None) -> Run:
    """Run a whole process; return its wall time, CPU time, peak resident memory (it and its children) and output."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    # Both pipes are drained at once (a child that fills one while the other is read would block);
    # not communicate(), which reaps the child before os.wait4 can read its resource usage.
    errors: list[bytes] = []
    drain = threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True)
    drain.start()
    out = proc.stdout.read()
    drain.join()
    err = errors[0] if errors else b""
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0 and not out:
        raise RuntimeError(f"{argv[:3]} failed ({proc.returncode}): {err.decode(errors='replace')[-2000:]}")
    return Run(seconds, usage.ru_maxrss / 1024, out.decode(), cpu_seconds=usage.ru_utime + usage.ru_stime)


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


def emulator_env(service: Any, home_prefix: str) -> dict[str, str]:
    """The environment of a contender's process: ``datatables_default`` pointing at ``service``, an Airflow home."""
    conn = {"conn_type": "datatables", "host": service.base_url, "password": service.api_key}
    conn["extra"] = {"project_id": service.project_id}
    env = {**os.environ, "AIRFLOW_CONN_DATATABLES_DEFAULT": json.dumps(conn)}
    env.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix=home_prefix))
    return env


def contender_args(parser: Any, argv: list[str] | None, client: Any) -> Any:
    """Parse a benchmark's arguments, with ``--json`` (for run_all.py) and the hidden ``--client``.

    A ``--client`` process runs ``client(*its three values)`` and gets ``None`` back: the
    benchmark's ``main`` returns 0 then, having measured one contender.
    """
    import argparse

    parser.add_argument("--client", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--json", help="also write the report's rows here (for run_all.py)")
    args = parser.parse_args(argv)
    if args.client:
        client(*args.client)
        return None
    return args
