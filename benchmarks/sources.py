"""Files from object storage and in legacy encodings: speed and memory against plain tools, same run.

    .venv/bin/python benchmarks/sources.py [--size 512] [--repeat 3]

A CSV of ``--size`` MiB is put in a local S3 server (moto's, ``tests/_s3.py``), and the
service is the counting server of ``upload.py`` (it checks every byte's XXH3-64). Each
contender runs in a process of its own, alternating, and its time is the call alone (not
Python's or Airflow's start):

* ``import_csv`` of the ``s3://`` object, against downloading it with boto3 to /dev/null
  plus ``curl -F`` uploading the same bytes from disk. Targets (issue 12): <= 1.2x that sum,
  <= 64 MiB added memory.
* ``validate_csv`` of the object, against the download alone: <= 1.5x.
* ``import_csv(encoding="cp1252")`` of a local Windows-1252 file (converted while sent),
  against ``import_csv`` of the UTF-8 file: <= 2x.
* The operators' choice, measured rather than argued (``docs/sources.md``): validate and
  upload from one local copy ("one copy"), against validating (which copies) and then
  streaming the object again ("two reads").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import xxhash

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _common import MIB, Row, csv_file, machine, python, run_process, write_rows  # noqa: E402
from upload import CountingServer, file_digest  # noqa: E402

BUCKET = "bench-sources"
CONN_ID = "bench_s3"


# -- the contenders (each in its own process) ------------------------------------------------------


def client(mode: str, target: str) -> None:
    """Run one contender on ``target``; print its call time and memory as JSON."""
    import resource

    rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # noqa: E731
    work = _contender(mode, target)
    before = rss()
    started = time.perf_counter()
    detail = work()
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "rss_before": before, "peak": rss(), "detail": detail}))


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
                    sink.write(chunk)
                    total += len(chunk)
            return total

        return download
    from airflow_tables.hooks.tables import DataTablesHook
    from airflow_tables.sources import open_source, staged
    from airflow_tables.validation import validate_csv, validate_source

    hook = DataTablesHook()
    _ = hook.settings  # resolve the connection before timing
    if target.startswith("s3://"):  # and the storage's client, as the download's is made before its timing
        from airflow.sdk import ObjectStoragePath

        ObjectStoragePath(target).fs.connect()
    if mode == "import":
        return lambda: hook.import_csv(None, target)
    if mode == "import_cp1252":
        return lambda: hook.import_csv(None, target, encoding="cp1252")
    if mode == "validate":
        return lambda: validate_csv(target).ok
    if mode == "two_reads":
        return lambda: (validate_csv(target).ok, hook.import_csv(None, target))

    def one_copy() -> tuple[bool, str]:
        with staged(open_source(target)) as local:
            return validate_source(local).ok, hook.import_csv(None, local)

    return one_copy


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512, help="file size in MiB (just under)")
    parser.add_argument("--repeat", type=int, default=3)
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

    path, rows = csv_file(20, args.size)
    size, digest = path.stat().st_size, file_digest(path)
    legacy, legacy_size, legacy_digest = cp1252_copy(path)
    print(f"machine: {machine()}")
    print(f"file: {path.name}, {size:,} bytes, {rows:,} rows; Windows-1252 copy {legacy.stat().st_size:,} bytes")
    with S3Server() as s3, CountingServer() as service:
        s3.create_bucket(BUCKET)
        started = time.perf_counter()
        s3.put(BUCKET, path.name, path)
        print(f"put the object in the S3 server in {time.perf_counter() - started:.1f} s")
        uri = f"s3://{CONN_ID}@{BUCKET}/{path.name}"
        conn = {"conn_type": "datatables", "host": service.base_url, "password": service.api_key}
        conn["extra"] = {"project_id": service.project_id}
        env = {**os.environ, "AIRFLOW_CONN_DATATABLES_DEFAULT": json.dumps(conn), "BENCH_S3_ENDPOINT": s3.endpoint_url}
        env[s3.connection_env(CONN_ID)[0]] = s3.connection_env(CONN_ID)[1]
        env.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="sources-bench-home-"))
        calls: dict[str, list[dict]] = {}
        checks: list[str] = []

        def call(name: str, mode: str, target: str, expect: tuple[int, int] | None = None) -> None:
            out = run_process([python(), __file__, "--client", mode, target], env=env)
            calls.setdefault(name, []).append(json.loads(out.stdout.strip().splitlines()[-1]))
            if expect:
                checks.append(service.confirm("", *expect, rows))

        for _ in range(args.repeat):
            call("download", "download", path.name)
            curl_run = run_process(
                [curl, "-sS", "--fail-with-body", "-H", f"X-API-Key: {service.api_key}",
                 "-F", f"ProjectID={service.project_id}", "-F", f"File=@{path};type=text/csv",
                 f"{service.base_url}/v1.0/data/import"]
            )  # fmt: skip
            calls.setdefault("curl", []).append({"seconds": curl_run.seconds, "peak": curl_run.peak_mib})
            checks.append(service.confirm("", size, digest, rows))
            call("import", "import", uri, (size, digest))
            call("validate", "validate", uri)
            call("plain", "import", str(path), (size, digest))
            call("cp1252", "import_cp1252", str(legacy), (legacy_size, legacy_digest))
            call("one copy", "one_copy", uri, (size, digest))
            call("two reads", "two_reads", uri, (size, digest))

    def med(name: str) -> float:
        values = sorted(c["seconds"] for c in calls[name])
        return values[len(values) // 2]

    def growth(name: str) -> float:
        return max(c["peak"] - c["rss_before"] for c in calls[name])

    download, curl_s = med("download"), med("curl")
    ok = sum(c == "ok" for c in checks)
    confirmed = f"{ok}/{len(checks)} byte-checked"
    for name in ("download", "curl", "import", "validate", "plain", "cp1252", "one copy", "two reads"):
        extra = "" if name == "curl" else f", +{growth(name):.0f} MiB"
        print(f"{name:<10} {med(name):7.3f} s{extra}")
    print(f"the counting server confirmed every byte: {confirmed}")
    mib = f"{size / 2**20:.0f} MiB"
    rows_out = [
        Row(
            "object storage",
            f"{mib} s3:// object through import_csv vs boto3 download + curl -F, {confirmed}",
            f"{med('import'):.2f} s",
            f"{download:.2f} + {curl_s:.2f} s",
            med("import") / (download + curl_s),
            f"+{growth('import'):.0f} MiB during the upload",
            "<= 1.2x, <= 64 MiB",
            med("import") <= 1.2 * (download + curl_s) and growth("import") <= 64 and ok == len(checks),
        ),
        Row(
            "object storage",
            f"{mib} s3:// object through validate_csv vs the boto3 download",
            f"{med('validate'):.2f} s",
            f"{download:.2f} s",
            med("validate") / download,
            f"+{growth('validate'):.0f} MiB",
            "<= 1.5x",
            med("validate") <= 1.5 * download,
        ),
        Row(
            "object storage",
            f"{mib} s3:// object validated and uploaded: one local copy vs two reads of the object",
            f"{med('one copy'):.2f} s",
            f"{med('two reads'):.2f} s",
            med("one copy") / med("two reads"),
            f"+{growth('one copy'):.0f} MiB",
            "",
            None,
        ),
        Row(
            "encodings",
            f"{mib} Windows-1252 file through import_csv(encoding=) vs the UTF-8 file's upload",
            f"{med('cp1252'):.2f} s",
            f"{med('plain'):.2f} s",
            med("cp1252") / med("plain"),
            f"+{growth('cp1252'):.0f} MiB during the upload",
            "<= 2x",
            med("cp1252") <= 2 * med("plain"),
        ),
    ]
    write_rows(args.json, rows_out)
    failures = [r.case for r in rows_out if r.met is False]
    for failure in failures:
        print(f"FAIL: {failure}")
    return 1 if failures or ok != len(checks) else 0


if __name__ == "__main__":
    sys.exit(main())
