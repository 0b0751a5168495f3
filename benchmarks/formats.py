"""Compressed and Parquet files imported: one pass against decompressing or converting first, then importing.

    .venv/bin/python benchmarks/formats.py [--sizes 512] [--columns 20] [--repeat 3]

Targets (issue 41), on the 512 MiB, 20-column CSV of the other benchmarks, each against its
anchor in the same run:

* ``orders.csv.gz`` (gzip -6 of that CSV) imported as an operator does it (decompressed into its
  one local copy, validated, sent) against ``gzip -dc`` to a file followed by the plain import
  (validate + send): at most 0.8x (one pass, not two). duckdb reading the same gzip file
  (``count(*)`` of ``read_csv``, no upload) is shown beside them, as the fastest reader we know.
* ``orders.parquet`` (pyarrow's, 1 M rows a row group, snappy) imported likewise against duckdb's
  ``COPY (FROM 'f.parquet') TO 'f.csv'`` followed by the plain import: at most 1.0x, and at most
  128 MiB of memory added to the importing process (duckdb's is shown beside it).

Each contender is a process of its own, importing into the emulator started for the run; its
time is the call alone, from the file on disk to the service's answer (the CardID). After each
call the table's ``Rows`` (once Processed) are checked and the table deleted. Memory: what the
call adds to its process (peak resident memory minus that just before it); duckdb's runs in the
anchor's process, so it is counted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, contender_args, csv_file, emulator_env, machine, python, run_process, write_rows  # noqa: E402
from upload import warm  # noqa: E402

TARGET_GZIP, TARGET_PARQUET, MEMORY_MIB = 0.8, 1.0, 128
#: Only files this large carry the targets (a small file's fixed costs dominate its ratio).
TARGET_MIN_MIB = 512


def gzip_file(clean: Path) -> Path:
    """``gzip -6`` of the clean CSV (cached beside it)."""
    out = clean.with_suffix(".csv.gz")
    if not out.exists():
        tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            subprocess.run(["gzip", "-6", "-c", str(clean)], stdout=f, check=True)
        tmp.rename(out)
    return out


def parquet_file(clean: Path) -> Path:
    """The clean CSV as Parquet (cached beside it), every column as pyarrow's CSV reader types it."""
    out = clean.with_suffix(".parquet")
    if not out.exists():
        import pyarrow.csv as pv
        import pyarrow.parquet as pq

        tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
        table = pv.read_csv(clean, parse_options=pv.ParseOptions(newlines_in_values=True))
        pq.write_table(table, tmp, row_group_size=1_000_000)
        tmp.rename(out)
    return out


# -- the contenders (each in its own process) -------------------------------------------------------


def client(mode: str, path: str, project: str) -> None:
    """Run one contender on ``path`` and print what it did as JSON (the last line of its output)."""
    from airflow_tables.hooks.tables import DataTablesHook
    from airflow_tables.sources import open_source, staged
    from airflow_tables.validation import validate_csv, validate_source
    from airflow_tables.validation.rules import MAX_BYTES

    hook = DataTablesHook()
    _ = hook.settings  # resolve the connection before timing
    warm(Path(path))
    tmp = tempfile.mkdtemp(prefix="formats-bench-")
    plain = os.path.join(tmp, "orders.csv")
    # Each side's library is imported before the timing (a task process pays either once, not per file).
    if mode == "duckdb-copy":
        import duckdb
    if mode == "ours" and path.endswith(".parquet"):
        import pyarrow.compute
        import pyarrow.parquet  # noqa: F401

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()
    if mode == "ours":
        with staged(open_source(path), max_bytes=MAX_BYTES) as copy:
            report = validate_source(copy)
            assert report.ok, report.errors
            prepared = time.perf_counter()
            card_id = hook.send_import(project, copy)
    else:
        if mode == "gunzip":
            with open(plain, "wb") as out:
                subprocess.run(["gzip", "-dc", path], stdout=out, check=True)
        elif mode == "duckdb-copy":
            duckdb.sql(f"COPY (FROM '{path}') TO '{plain}' (HEADER, DELIMITER ',')")
        else:
            raise ValueError(mode)
        report = validate_csv(plain)
        assert report.ok, report.errors
        prepared = time.perf_counter()
        card_id = hook.send_import(project, plain)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    Path(plain).unlink(missing_ok=True)
    os.rmdir(tmp)
    figures = {"seconds": seconds, "preparing": prepared - started, "added": peak - before, "rows": report.rows}
    figures["rss_before"] = before
    print(json.dumps({**figures, "card_id": card_id}))


def duckdb_read(path: str) -> None:
    """duckdb counting the gzip file's rows (no upload): the fastest reader of a .csv.gz we know."""
    import duckdb

    warm(Path(path))
    started = time.perf_counter()
    ((rows,),) = duckdb.sql(f"SELECT count(*) FROM read_csv('{path}')").fetchall()
    print(json.dumps({"seconds": time.perf_counter() - started, "rows": rows, "added": 0.0, "card_id": None}))


# -- the run ----------------------------------------------------------------------------------------


def measure(emu, env: dict, cases: dict[str, tuple[str, Path]], rows: int, repeat: int) -> dict[str, list[dict]]:
    """Run each case ``repeat`` times, each round in an order of its own; check every table's Rows."""
    names = list(cases)
    collected: dict[str, list[dict]] = {name: [] for name in names}
    for round_ in range(repeat):
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
            mode, path = cases[name]
            argv = [python(), __file__, "--duckdb-read", str(path)] if mode == "duckdb-read" else None
            argv = argv or [python(), __file__, "--client", mode, str(path), emu.project_id]
            call = json.loads(run_process(argv, env=env).stdout.strip().splitlines()[-1])
            if call["card_id"] is not None:
                table = emu.wait_until_processed(emu.project_id, call["card_id"], timeout=600)
                emu.request("DELETE", f"/v1.0/projects/{emu.project_id}/cards/{call['card_id']}", key=emu.api_key)
                call["checked"] = call["rows"] == rows and table["Rows"] == rows
            else:
                call["checked"] = call["rows"] == rows
            collected[name].append(call)
            prep = ""
            if "preparing" in call:
                prep = f" (preparing {call['preparing']:.2f} s; {call['rss_before']:.0f} MiB before)"
            print(f"  round {round_ + 1} {name:<34} {call['seconds']:6.2f} s{prep}, +{call['added']:.0f} MiB")
    return collected


def _median(calls: list[dict], figure: str = "seconds") -> float:
    return statistics.median(c[figure] for c in calls)


def report_rows(size: int, columns: int, collected: dict[str, list[dict]]) -> tuple[list[Row], list[str]]:
    """The report's rows for one size, and the targets it missed."""
    targeted = size >= TARGET_MIN_MIB
    rows, failures = [], []
    pairs = (
        ("gzip: ours", "gzip: gzip -dc, then import", TARGET_GZIP, None, ".csv.gz import vs gzip -dc + import"),
        ("gzip: ours", "gzip: duckdb reads it", None, None, ".csv.gz import vs duckdb reading the .csv.gz (no upload)"),
        (
            "parquet: ours",
            "parquet: duckdb COPY, then import",
            TARGET_PARQUET,
            MEMORY_MIB,
            ".parquet import vs duckdb COPY to CSV + import",
        ),
    )
    for ours, anchor, target, memory, what in pairs:
        seconds, anchor_s = _median(collected[ours]), _median(collected[anchor])
        ours_mib, anchor_mib = (max(c["added"] for c in collected[side]) for side in (ours, anchor))
        added = ours_mib  # the target holds what ours adds to its process, whatever the anchor's
        calls = collected[ours] + collected[anchor]
        checked = sum(c["checked"] for c in calls)
        ratio = seconds / anchor_s
        met = None
        if targeted and target is not None:
            met = ratio <= target and (memory is None or added <= memory) and checked == len(calls)
        rows.append(
            Row(
                "formats",
                f"{columns} cols, {size} MiB (decompressed), {what} "
                f"(preparing {_median(collected[ours], 'preparing'):.2f} s; {checked}/{len(calls)} checked)",
                f"{seconds:.2f} s",
                f"{anchor_s:.2f} s",
                ratio,
                f"{ours_mib:+.0f} MiB during the call (the anchor {anchor_mib:+.0f} MiB)",
                (f"<= {target}x" + (f", <= +{memory} MiB" if memory else "")) if targeted and target else "",
                met,
            )
        )
        print(
            f"{size} MiB {what}: {seconds:.2f} s vs {anchor_s:.2f} s = {ratio:.2f}x, "
            f"memory {ours_mib:+.0f} MiB (anchor {anchor_mib:+.0f} MiB)"
        )
        if met is False:
            failures.append(f"{size} MiB {what}: {ratio:.2f}x (target <= {target}x), {added:+.0f} MiB")
    return rows, failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[512], help="file sizes in MiB (decompressed)")
    parser.add_argument("--columns", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--duckdb-read", help=argparse.SUPPRESS)
    args = contender_args(parser, argv, client)
    if args is None:
        return 0
    if args.duckdb_read:
        duckdb_read(args.duckdb_read)
        return 0
    from airflow_tables.emulator.testing import EmulatorProcess

    print(f"machine: {machine()}")
    report: list[Row] = []
    failures: list[str] = []
    with EmulatorProcess() as emu:
        env = emulator_env(emu, "formats-bench-home-")
        for size in args.sizes:
            clean, rows = csv_file(args.columns, size)
            gz, parquet = gzip_file(clean), parquet_file(clean)
            print(
                f"{size} MiB: {clean.name}, {rows:,} rows; {gz.stat().st_size / 2**20:.0f} MiB gzip, "
                f"{parquet.stat().st_size / 2**20:.0f} MiB Parquet"
            )
            cases = {
                "gzip: ours": ("ours", gz),
                "gzip: gzip -dc, then import": ("gunzip", gz),
                "gzip: duckdb reads it": ("duckdb-read", gz),
                "parquet: ours": ("ours", parquet),
                "parquet: duckdb COPY, then import": ("duckdb-copy", parquet),
            }
            collected = measure(emu, env, cases, rows, args.repeat)
            rows_, missed = report_rows(size, args.columns, collected)
            report.extend(rows_)
            failures.extend(missed)
    print("targets: " + ("all met" if not failures else "MISSED: " + "; ".join(failures)))
    write_rows(args.json, report)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
