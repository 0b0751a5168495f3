"""Files from object storage and in legacy encodings, against the physical limits, same run.

    .venv/bin/python benchmarks/sources.py [--size 64 512] [--repeat 5]

For each ``--size`` (MiB), a CSV is put in a local S3 server (moto's, ``tests/_s3.py``), and the
service is the counting server of ``upload.py`` (it checks every byte's XXH3-64). Each contender
runs in a process of its own, all of them once a round in a shuffled order, and its time is the call alone
(not Python's or Airflow's start; the storage client is connected before, as boto3's is):

* ``download``: boto3 GET of the object to /dev/null; ``upload``: ``import_csv`` of the same
  bytes from the local disk (the hook's own upload, faster than ``curl -F``, which is shown too).
  A file read from storage and sent crosses both at once: nothing can finish before the slower.
* ``import_csv`` of the ``s3://`` object: <= 1.25x the slower of download and upload, <= 64 MiB
  added memory (issue 30).
* ``validate_csv`` of the object: <= 1.1x the download.
* ``import_csv(encoding="cp1252")`` of a local Windows-1252 file: <= 1.25x ``import_csv`` of the
  converted bytes (its UTF-8 conversion, from disk). The counting pass (the UTF-8 length the
  upload's Content-Length needs) is timed apart.
* the operators' validate-and-import (one local copy of the object, validated as it is
  written, then uploaded), shown against the same limits.

Every figure is the median of ``--repeat`` rounds with its spread (lowest-highest), and the CPU
each side spent (the contender, the S3 server, the service): on two cores the three share them.
The time until the S3 server's first byte is shown apart (moto prepares a large answer before it
sends any of it; every client waits the same): an upload cannot start before it, so the import is
also shown against the download and that first byte plus the upload alone, whichever is later.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import xxhash

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _common import MIB, Row, csv_file, machine, python, run_process, write_rows  # noqa: E402
from upload import CountingServer, file_digest, warm  # noqa: E402

BUCKET = "bench-sources"
CONN_ID = "bench_s3"


# -- the contenders (each in its own process) ------------------------------------------------------


def client(mode: str, target: str) -> None:
    """Run one contender on ``target``; print its call time, CPU, memory and details as JSON."""
    import resource

    def usage() -> tuple[float, float]:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024

    work = _contender(mode, target)
    _watch_first_byte()
    cpu_before, before = usage()
    started = time.perf_counter()
    detail = work()
    seconds = time.perf_counter() - started
    cpu_after, peak = usage()
    result = {"seconds": seconds, "cpu": cpu_after - cpu_before, "rss_before": before, "peak": peak}
    if "at" in FIRST_BYTE:
        result["first_byte"] = FIRST_BYTE["at"] - started
    print(json.dumps({**result, "detail": detail}))


#: When the contender received its first byte from the S3 server (``perf_counter``), if it read one.
FIRST_BYTE: dict[str, float] = {}


def _watch_first_byte() -> None:
    """Note when the first piece of an object arrives, for the report's split of the time at the first byte.

    The S3 server takes a while before it answers a large GET at all (moto copies the object
    first); no client can overlap anything with that, so the report shows it apart.
    """
    from airflow_tables.sources.read_ahead import ReadAhead

    put = ReadAhead._put

    def noting_put(self: ReadAhead, piece: memoryview) -> None:
        FIRST_BYTE.setdefault("at", time.perf_counter())
        put(self, piece)

    ReadAhead._put = noting_put  # type: ignore[method-assign]


def _contender(mode: str, target: str):  # noqa: ANN202 - a zero-argument callable, prepared before timing
    if mode == "download":
        from tests._s3 import S3Server

        s3 = S3Server()
        s3.endpoint_url = os.environ["BENCH_S3_ENDPOINT"]
        s3_client = s3.client()

        def download() -> int:
            body = s3_client.get_object(Bucket=BUCKET, Key=target)["Body"]
            total = 0
            with open(os.devnull, "wb") as sink:
                for chunk in body.iter_chunks(MIB):
                    FIRST_BYTE.setdefault("at", time.perf_counter())
                    sink.write(chunk)
                    total += len(chunk)
            return total

        return download
    from airflow_tables.hooks.tables import DataTablesHook
    from airflow_tables.sources import open_source
    from airflow_tables.validation import validate_csv, validate_source
    from airflow_tables.validation.report import scanned_copy

    hook = DataTablesHook()
    _ = hook.settings  # resolve the connection before timing
    if target.startswith("s3://"):  # and the storage's client, as the download's is made before its timing
        from airflow.sdk import ObjectStoragePath

        stored = ObjectStoragePath(target)
        stored.fs.info(stored.path)  # s3fs makes its client at the first request (connect() alone does not)
    else:
        warm(Path(target))
    if mode in ("import", "upload"):  # the same call: an object, or a local file
        return lambda: hook.import_csv(None, target)
    if mode == "import_cp1252":

        def converted() -> dict:
            started = time.perf_counter()
            source = open_source(target, encoding="cp1252")
            source.utf8_size()  # the counting pass, which import_csv makes first (and keeps)
            counted = time.perf_counter() - started
            hook.import_csv(None, source)
            return {"count": counted}

        return converted
    if mode == "validate":
        return lambda: validate_csv(target).ok

    def one_copy() -> tuple[bool, str]:  # as the operators do it (operators/_checks.py): validated as it is copied
        with scanned_copy(open_source(target)) as local:
            return validate_source(local).ok, hook.import_csv(None, local)

    return one_copy


def _cpu_seconds(pid: int) -> float:
    """The CPU time a process has used so far (user + system), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the run -----------------------------------------------------------------------------------------


def cp1252_copy(path: Path) -> tuple[Path, int, int]:
    """The file re-encoded in Windows-1252 (cached), and the size and XXH3-64 of its UTF-8 conversion."""
    out = path.with_name(path.stem + "_cp1252.csv")
    check_file = out.with_suffix(".xxh3")
    if not (out.exists() and check_file.exists()):
        digest, size = xxhash.xxh3_64(), 0
        with open(path, encoding="utf-8", newline="") as src, open(out.with_suffix(".tmp"), "wb") as dst:
            while chunk := src.read(4 * MIB):
                legacy = chunk.encode("cp1252", errors="replace")  # the odd character cp1252 lacks becomes "?"
                dst.write(legacy)
                utf8 = legacy.decode("cp1252").encode()
                digest.update(utf8)
                size += len(utf8)
        out.with_suffix(".tmp").rename(out)
        check_file.write_text(f"{size} {digest.intdigest()}")
    size, utf8_digest = map(int, check_file.read_text().split())
    return out, size, utf8_digest


def converted_copy(legacy: Path) -> Path:
    """The UTF-8 conversion of the Windows-1252 file (cached): the bytes the service receives for it."""
    out = legacy.with_name(legacy.stem + "_utf8.csv")
    if not out.exists():
        with open(legacy, "rb") as src, open(out.with_suffix(".tmp"), "wb") as dst:
            while chunk := src.read(4 * MIB):
                dst.write(chunk.decode("cp1252").encode())
        out.with_suffix(".tmp").rename(out)
    return out


#: The contenders; each round runs them all, in an order of its own.
CONTENDERS = ("download", "upload", "curl", "import", "validate", "converted", "cp1252", "one copy")


@dataclass
class Figure:
    """One contender's rounds."""

    runs: list[dict]

    def values(self, key: str = "seconds") -> list[float]:
        return sorted(run[key] for run in self.runs)

    def med(self, key: str = "seconds") -> float:
        return statistics.median(self.values(key))

    def spread(self) -> str:
        values = self.values()
        return f"{values[0]:.2f}-{values[-1]:.2f}"

    def growth(self) -> float:
        return max(run.get("peak", 0) - run.get("rss_before", 0) for run in self.runs)


def measure(size_mib: int, repeat: int, s3: Any, service: Any, curl: str) -> tuple[dict[str, Figure], list[str], str]:
    """Run every contender ``repeat`` times on a file of ``size_mib``; return the figures, the byte checks, the load."""
    path, rows = csv_file(20, size_mib)
    size, digest = path.stat().st_size, file_digest(path)
    legacy, legacy_size, legacy_digest = cp1252_copy(path)
    utf8 = converted_copy(legacy)
    print(f"\nfile: {path.name}, {size:,} bytes, {rows:,} rows; Windows-1252 copy {legacy.stat().st_size:,} bytes")
    s3.create_bucket(BUCKET)
    s3.upload(BUCKET, path.name, path)  # as users put it: multipart (boto3's upload_file)
    uri = f"s3://{CONN_ID}@{BUCKET}/{path.name}"
    conn = {"conn_type": "datatables", "host": service.base_url, "password": service.api_key}
    conn["extra"] = {"project_id": service.project_id}
    env = {**os.environ, "AIRFLOW_CONN_DATATABLES_DEFAULT": json.dumps(conn), "BENCH_S3_ENDPOINT": s3.endpoint_url}
    env[s3.connection_env(CONN_ID)[0]] = s3.connection_env(CONN_ID)[1]
    env.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="sources-bench-home-"))
    plan = {
        "download": ("download", path.name, None),
        "upload": ("upload", str(path), (size, digest)),
        "import": ("import", uri, (size, digest)),
        "validate": ("validate", uri, None),
        "converted": ("upload", str(utf8), (legacy_size, legacy_digest)),
        "cp1252": ("import_cp1252", str(legacy), (legacy_size, legacy_digest)),
        "one copy": ("one_copy", uri, (size, digest)),
    }
    runs: dict[str, list[dict]] = {name: [] for name in CONTENDERS}
    checks: list[str] = []
    load = f"load average {os.getloadavg()[0]:.1f}"
    servers = {"s3": s3.process.pid, "service": service.process.pid}
    order = list(CONTENDERS)
    for round_number in range(repeat):
        random.Random(round_number).shuffle(order)  # no contender always follows the same one
        for name in order:
            before = {side: _cpu_seconds(pid) for side, pid in servers.items()}
            if name == "curl":
                warm(path)
                run = run_process(
                    [curl, "-sS", "--fail-with-body", "-H", f"X-API-Key: {service.api_key}",
                     "-F", f"ProjectID={service.project_id}", "-F", f"File=@{path};type=text/csv",
                     f"{service.base_url}/v1.0/data/import"]
                )  # fmt: skip
                result: dict = {"seconds": run.seconds, "peak": run.peak_mib, "rss_before": run.peak_mib}
                expect: tuple[int, int] | None = (size, digest)
            else:
                mode, target, expect = plan[name]
                out = run_process([python(), __file__, "--client", mode, target], env=env)
                result = json.loads(out.stdout.strip().splitlines()[-1])
            result.update({side: _cpu_seconds(pid) - before[side] for side, pid in servers.items()})
            runs[name].append(result)
            if expect:
                checks.append(service.confirm("", *expect, rows))
    load += f" at the start, {os.getloadavg()[0]:.1f} at the end (1 min)"
    return {name: Figure(r) for name, r in runs.items()}, checks, load


def report(size_mib: int, figures: dict[str, Figure], checks: list[str], load: str) -> list[Row]:
    """Print the size's table and return its rows for the README."""
    ok = sum(c == "ok" for c in checks)
    print(f"{size_mib} MiB, {len(figures['download'].runs)} rounds, {load}; {ok}/{len(checks)} uploads byte-checked")
    print(f"{'':<10} {'median':>8} {'spread':>11} {'added':>8} {'CPU: ours':>10} {'s3':>6} {'service':>8}")
    for name, figure in figures.items():
        cpu = "" if name == "curl" else f"{figure.med('cpu'):.2f}"
        growth = "" if name == "curl" else f"+{figure.growth():.0f} MiB"
        print(
            f"{name:<10} {figure.med():7.3f}s {figure.spread():>11} {growth:>8} {cpu:>10} "
            f"{figure.med('s3'):6.2f} {figure.med('service'):8.2f}"
        )
    counts = [run["detail"]["count"] for run in figures["cp1252"].runs]
    count = statistics.median(counts)
    print(f"cp1252's counting pass (the UTF-8 length for Content-Length): {count:.3f} s, median")
    download, upload = figures["download"].med(), figures["upload"].med()
    slower, both = max(download, upload), download + upload
    first = {name: figures[name].med("first_byte") for name in ("download", "import", "validate")}
    imp_med = figures["import"].med()
    after = {name: figures[name].med() - first[name] for name in first}
    print(
        f"the S3 server's first byte came after {first['download']:.2f} s (download), {first['import']:.2f} s "
        f"(import), {first['validate']:.2f} s (validate): nothing can flow before it. After it: download "
        f"{after['download']:.2f} s, upload alone {upload:.2f} s, import {after['import']:.2f} s "
        f"({after['import'] / max(after['download'], upload):.2f}x the slower), validate {after['validate']:.2f} s "
        f"({after['validate'] / after['download']:.2f}x the download)"
    )
    # The upload of an object cannot start before its first byte exists: the limit, counted from there.
    from_first = max(download, first["download"] + upload)
    at_first = (
        f"first byte at {first['import']:.2f} s; {imp_med / from_first:.2f}x max(download, its first byte + upload) "
        f"= {from_first:.2f} s"
    )
    limits = f"download {download:.2f} s, upload {upload:.2f} s: max {slower:.2f}, sum {both:.2f}"
    mib = f"{size_mib} MiB"
    checked = f"{ok}/{len(checks)} byte-checked"
    imp, validate, one = figures["import"], figures["validate"], figures["one copy"]
    cp, plain = figures["cp1252"], figures["converted"]
    rows = [
        Row(
            "object storage",
            f"{mib} s3:// object through import_csv vs the slower of download and upload alone, {checked}",
            f"{imp.med():.2f} s ({imp.spread()}; {imp.med() / both:.2f}x the sum; {at_first})",
            limits,
            imp.med() / slower,
            f"+{imp.growth():.0f} MiB",
            "<= 1.25x, <= 64 MiB",
            imp.med() <= 1.25 * slower and imp.growth() <= 64 and ok == len(checks),
        ),
        Row(
            "object storage",
            f"{mib} s3:// object through validate_csv vs the download alone",
            f"{validate.med():.2f} s ({validate.spread()}; first byte at {first['validate']:.2f} s, then "
            f"{after['validate']:.2f} s vs {after['download']:.2f})",
            f"{download:.2f} s ({figures['download'].spread()})",
            validate.med() / download,
            f"+{validate.growth():.0f} MiB",
            "<= 1.1x",
            validate.med() <= 1.1 * download,
        ),
        Row(
            "object storage",
            f"{mib} s3:// object validated and uploaded by the operators (one local copy) vs the slower of "
            "download and upload alone",
            f"{one.med():.2f} s ({one.spread()}; {one.med() / both:.2f}x the sum)",
            limits,
            one.med() / slower,
            f"+{one.growth():.0f} MiB",
            "",
            None,
        ),
        Row(
            "encodings",
            f"{mib} Windows-1252 file through import_csv(encoding=) vs the upload of its UTF-8 conversion "
            f"(counting pass {count:.2f} s of it)",
            f"{cp.med():.2f} s ({cp.spread()})",
            f"{plain.med():.2f} s ({plain.spread()})",
            cp.med() / plain.med(),
            f"+{cp.growth():.0f} MiB",
            "<= 1.25x",
            cp.med() <= 1.25 * plain.med(),
        ),
    ]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, nargs="+", default=[64, 512], help="file sizes in MiB (just under)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--client", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--json", help="also write the report's rows here (for run_all.py)")
    args = parser.parse_args(argv)
    if args.client:
        client(*args.client)
        return 0
    curl = shutil.which("curl")
    if curl is None:
        print("curl is not installed")
        return 2
    from tests._s3 import S3Server

    print(f"machine: {machine()}")
    rows: list[Row] = []
    all_checked = True
    with S3Server() as s3, CountingServer() as service:
        for size_mib in args.size:
            figures, checks, load = measure(size_mib, args.repeat, s3, service, curl)
            rows += report(size_mib, figures, checks, load)
            all_checked = all_checked and all(c == "ok" for c in checks)
    print("\nRows for the README's table:")
    for row in rows:
        print(row.markdown())
    write_rows(args.json, rows)
    failures = [r.case for r in rows if r.met is False]
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if failures or not all_checked else 0


if __name__ == "__main__":
    sys.exit(main())
