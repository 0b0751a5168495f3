"""Many part files into one table (``combine=True``) against one file of the same bytes.

    .venv/bin/python benchmarks/combine.py [--parts 1000] [--part-kib 512] [--repeat 3]

Target (issue 41): 1,000 parts of 512 KiB each, combined and imported, at most 1.3x the import
of one file holding the same rows (the 20-column CSV of the other benchmarks, cut in parts at
row boundaries, each part with the header). Both sides do what the import operator does:
the combined side reads every part (``open_parts`` of the folder's pattern), validates it,
writes the one CSV, validates that and sends it; the anchor validates its file and sends it.
Each contender is a process of its own against the emulator started for the run; its time is
the call alone (the CardID back), and the table's ``Rows`` are checked.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import MIB, Row, contender_args, csv_file, emulator_env, machine, python, run_process, write_rows  # noqa: E402
from upload import warm  # noqa: E402

TARGET = 1.3


def parts_of(clean: Path, parts: int, part_kib: int) -> tuple[Path, Path, int]:
    """A folder of ``parts`` parts of about ``part_kib`` KiB cut from the clean CSV, and one file of their rows."""
    folder = clean.with_name(f"{clean.stem}_{parts}x{part_kib}k")
    whole = folder.with_suffix(".csv")
    rows_file = folder.with_suffix(".rows")
    if folder.exists() and whole.exists() and rows_file.exists():
        return folder, whole, int(rows_file.read_text())
    folder.mkdir(exist_ok=True)
    rows = 0
    with open(clean, "rb") as src, open(whole, "wb") as out:
        header = src.readline()
        out.write(header)
        pending: list[bytes] = []
        quotes = 0
        for n in range(parts):
            chunk = [header]
            size = len(header)
            while size < part_kib * 1024:
                line = src.readline()
                if not line:
                    break
                quotes += line.count(b'"')
                pending.append(line)
                if quotes % 2:
                    continue  # inside a quoted field that holds a line break: the record goes on
                record = b"".join(pending)
                pending.clear()
                quotes = 0
                chunk.append(record)
                size += len(record)
                rows += 1
            data = b"".join(chunk)
            (folder / f"part-{n:05d}.csv").write_bytes(data)
            out.write(data[len(header) :])
    rows_file.write_text(str(rows))
    return folder, whole, rows


def client(mode: str, path: str, project: str) -> None:
    """One contender: ``combined`` (the folder's parts) or ``one`` (the file); prints JSON."""
    from airflow_tables.hooks.tables import DataTablesHook
    from airflow_tables.sources import open_source
    from airflow_tables.sources.parts import open_parts
    from airflow_tables.validation import validate_source
    from airflow_tables.validation.combine import combined

    hook = DataTablesHook()
    _ = hook.settings
    # Both sides from the page cache: this machine pages out what was not used for a minute (upload.warm),
    # and the other benchmarks before this one leave the parts cold (a first round 2.8-3.0 s, then 1.0-1.2).
    for name in sorted(Path(path).glob("part-*.csv")) if mode == "combined" else [Path(path)]:
        warm(name)
    started = time.perf_counter()
    if mode == "combined":
        with combined(open_parts(os.path.join(path, "part-*.csv")), "orders.csv", "parts") as source:
            report = validate_source(source)
            assert report.ok, report.errors
            card_id = hook.send_import(project, source)
    else:
        source = open_source(path)
        report = validate_source(source)
        assert report.ok, report.errors
        card_id = hook.send_import(project, source)
    print(json.dumps({"seconds": time.perf_counter() - started, "rows": report.rows, "card_id": card_id}))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", type=int, default=1000)
    parser.add_argument("--part-kib", type=int, default=512)
    parser.add_argument("--repeat", type=int, default=3)
    args = contender_args(parser, argv, client)
    if args is None:
        return 0
    from airflow_tables.emulator.testing import EmulatorProcess

    print(f"machine: {machine()}")
    size_mib = max(1, args.parts * args.part_kib // 1024 + 1)
    clean, _ = csv_file(20, size_mib)
    folder, whole, rows = parts_of(clean, args.parts, args.part_kib)
    print(
        f"{args.parts} parts of {args.part_kib} KiB in {folder.name}; "
        f"{whole.stat().st_size / MIB:.0f} MiB, {rows:,} rows"
    )
    seconds: dict[str, list[float]] = {"combined": [], "one": []}
    checked = 0
    with EmulatorProcess() as emu:
        env = emulator_env(emu, "combine-bench-home-")
        for round_ in range(args.repeat):
            for mode in ("combined", "one") if round_ % 2 == 0 else ("one", "combined"):
                target = folder if mode == "combined" else whole
                run = run_process([python(), __file__, "--client", mode, str(target), emu.project_id], env=env)
                call = json.loads(run.stdout.strip().splitlines()[-1])
                table = emu.wait_until_processed(emu.project_id, call["card_id"], timeout=600)
                emu.request("DELETE", f"/v1.0/projects/{emu.project_id}/cards/{call['card_id']}", key=emu.api_key)
                checked += call["rows"] == rows and table["Rows"] == rows
                seconds[mode].append(call["seconds"])
                print(f"  round {round_ + 1} {mode:<9} {call['seconds']:6.2f} s")
    ours, anchor = statistics.median(seconds["combined"]), statistics.median(seconds["one"])
    ratio = ours / anchor
    met = ratio <= TARGET and checked == 2 * args.repeat
    row = Row(
        "combine",
        f"{args.parts:,} parts of {args.part_kib} KiB combined vs one file of the same rows "
        f"({checked}/{2 * args.repeat} checked)",
        f"{ours:.2f} s",
        f"{anchor:.2f} s",
        ratio,
        "",
        f"<= {TARGET}x",
        met,
    )
    print(f"combined {ours:.2f} s vs one file {anchor:.2f} s = {ratio:.2f}x (target <= {TARGET}x)")
    write_rows(args.json, [row])
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
