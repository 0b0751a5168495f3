"""The cost of ``on_bad_rows="quarantine"``: setting bad rows aside and importing the good ones.

    .venv/bin/python benchmarks/bad_rows.py [--sizes 512] [--columns 20] [--repeat 5]

Target (issue 40), on 512 MiB and 20 columns, against the clean file's validate + import in the
same run: the import with quarantine of a copy with 1 % bad rows spread through it takes
<= 1.25x and adds <= 64 MiB of memory; with 0 bad rows (the clean file itself) <= 1.05x: the
switch costs nothing when the file is clean. Smaller files are shown without a target.

The bad copy (cached beside the clean file) replaces every hundredth data row of the clean file
with a bad version of it: eight in ten have a field too many or too few, one a NUL byte, one a
byte that is not UTF-8 (a Windows-1252 ``é``). Its rejects file is checked against that count.

Each contender is a process of its own, importing into the emulator started for the run; its
time is the call alone (not Python's or Airflow's start), from the file on disk to the service's
answer (the CardID; not the wait for Processed), as an operator does it:

* ``quarantine``: ``sorted_rows(...)`` with ``BadRowPolicy("quarantine")``, then ``send_import``
  of the rows it sets to go (the good rows' file, or the file itself when none was bad);
  the time ends when the block has removed the good rows' file;
* ``anchor``: ``validate_csv`` of the clean file, then ``send_import`` of it.

Every round runs the three (quarantine of the bad copy, of the clean file, the anchor) in an
order of its own; figures are medians. Memory: what the call adds to its process (peak resident
memory minus that just before it); the target holds the quarantine's against the anchor's. The
validator's second process for a large file (``ranges.scan_data``, 16 MiB: an interpreter and the
kernel) is the anchor's too and is not counted: ``RUSAGE_CHILDREN`` would report the parent's own
size at the spawn for it (115 MiB), not the child's. After each call the table's ``Rows`` (once
Processed), the rows sent and the rejects file's rows are checked, and the table is deleted.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import MIB, Row, csv_file, emulator_env, machine, python, run_process, write_rows  # noqa: E402
from upload import warm  # noqa: E402

#: One data row in this many is made bad (1 %).
EVERY = 100
#: What the n-th bad row is, by n % 10: NUL byte, a byte that is not UTF-8, otherwise a field too many or too few.
NUL_AT, NOT_UTF8_AT = 0, 5
TARGET_BAD, TARGET_CLEAN, MEMORY_MIB = 1.25, 1.05, 64
#: Only files this large carry the targets (a small file's fixed costs dominate its ratio).
TARGET_MIN_MIB = 512


# -- the files -------------------------------------------------------------------------------------


def _spoiled(record: bytes, n: int) -> bytes:
    """The ``n``-th bad row, made from a clean record (which ends with its line break, ``\\n``).

    The first field (an id) and the last (a number) are never quoted, so the changes stay in them.
    """
    if n % 10 == NUL_AT:
        return record[:1] + b"\x00" + record[1:]
    if n % 10 == NOT_UTF8_AT:
        return record[:1] + b"\xe9" + record[1:]  # Windows-1252's é: a UTF-8 lead byte before a digit
    if n % 2:
        return record[:-1] + b",0\n"  # a field too many
    return record[: record.rindex(b",")] + b"\n"  # a field too few


def bad_copy(clean: Path) -> tuple[Path, dict[str, int]]:
    """The clean file with one data row in :data:`EVERY` made bad (cached); and the bad rows by code.

    Records are told apart by quote parity: the generator's quoted fields hold line breaks, but
    every quote it writes is paired, so a line break ends a record only after an even number of them.
    """
    out = clean.with_name(clean.stem + "_bad1pct.csv")
    counts_file = out.with_suffix(".bad")
    if out.exists() and counts_file.exists():
        return out, json.loads(counts_file.read_text())
    by_code: Counter[str] = Counter()
    tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
    with open(clean, "rb") as src, open(tmp, "wb", buffering=4 * MIB) as dst:
        dst.write(src.readline())  # the header
        pending: list[bytes] = []
        quotes = rows = 0
        for line in src:
            quotes += line.count(b'"')
            if quotes % 2:
                pending.append(line)
                continue
            record = b"".join(pending) + line if pending else line
            pending.clear()
            quotes = 0
            rows += 1
            if rows % EVERY == 0:
                n = rows // EVERY
                record = _spoiled(record, n)
                code = {NUL_AT: "nul-byte", NOT_UTF8_AT: "encoding"}.get(n % 10, "field-count")
                by_code[code] += 1
            dst.write(record)
        assert not pending, "the clean file ends inside a quoted field"
    tmp.rename(out)
    counts_file.write_text(json.dumps(dict(by_code)))
    return out, dict(by_code)


# -- the contenders (each in its own process) -------------------------------------------------------


def client(mode: str, path: str, project: str) -> None:
    """Run one contender on ``path`` and print what it did as JSON (the last line of its output)."""
    from airflow_tables.hooks.tables import DataTablesHook
    from airflow_tables.sources import open_source
    from airflow_tables.validation import validate_csv
    from airflow_tables.validation.quarantine import RowCheck, sorted_rows
    from airflow_tables.validation.row_policy import BadRowPolicy

    hook = DataTablesHook()
    _ = hook.settings  # resolve the connection before timing
    warm(Path(path))
    rejects = Path(path).with_name(Path(path).stem + ".rejects.csv")
    rejects.unlink(missing_ok=True)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cpu_before = _cpu()
    started = time.perf_counter()
    if mode == "quarantine":
        check = RowCheck(BadRowPolicy("quarantine"))
        with sorted_rows(open_source(path), check, default_rejects=path) as aside:
            sent_at = time.perf_counter()
            card_id = hook.send_import(project, aside.source)
        facts = {
            "rows": aside.report.rows,
            "errors": [e.message for e in aside.report.errors],
            "bad_rows": aside.bad_rows,
            "by_code": aside.by_code,
            "rejects": aside.rejects,
        }
    else:
        report = validate_csv(path)
        assert report.ok, report.errors
        sent_at = time.perf_counter()
        card_id = hook.send_import(project, path)
        facts = {"rows": report.rows, "errors": [], "bad_rows": 0, "by_code": {}, "rejects": None}
    seconds = time.perf_counter() - started
    cpu = _cpu() - cpu_before
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if facts["rejects"] is not None:  # counted after the timing, then removed for the next round
        with open(facts["rejects"], newline="", encoding="utf-8") as f:
            facts["rejects_rows"] = sum(1 for _ in csv.reader(f)) - 1
        Path(facts["rejects"]).unlink()
    figures = {"seconds": seconds, "sorting": sent_at - started, "cpu": cpu, "added": peak - before}
    print(json.dumps({**figures, "card_id": card_id, "rss_before": before, **facts}))


def _cpu() -> float:
    """User + system CPU time of this process and of the children it has waited for."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


# -- the run ----------------------------------------------------------------------------------------


CASES = ("quarantine 1 %", "quarantine 0 %", "anchor")


def measure(emu, env: dict, size: int, columns: int, repeat: int) -> tuple[dict[str, list[dict]], list[str]]:
    """Run the three contenders ``repeat`` times, each round in an order of its own; check every answer."""
    clean, rows = csv_file(columns, size)
    bad, by_code = bad_copy(clean)
    made_bad = sum(by_code.values())
    expected = {
        "quarantine 1 %": (bad, rows - made_bad, made_bad, by_code),
        "quarantine 0 %": (clean, rows, 0, {}),
        "anchor": (clean, rows, 0, {}),
    }
    print(f"{size} MiB: {clean.name}, {rows:,} data rows; {bad.name}: {made_bad:,} bad ({by_code})")
    collected: dict[str, list[dict]] = {case: [] for case in CASES}
    problems: list[str] = []
    for round_ in range(repeat):
        for case in CASES[round_ % 3 :] + CASES[: round_ % 3]:
            path, sent, bad_rows, codes = expected[case]
            mode = "anchor" if case == "anchor" else "quarantine"
            run = run_process([python(), __file__, "--client", mode, str(path), emu.project_id], env=env)
            call = json.loads(run.stdout.strip().splitlines()[-1])
            collected[case].append(call)
            table = emu.wait_until_processed(emu.project_id, call["card_id"], timeout=600)
            emu.request("DELETE", f"/v1.0/projects/{emu.project_id}/cards/{call['card_id']}", key=emu.api_key)
            got = (call["rows"], call["bad_rows"], call["by_code"], call.get("rejects_rows", 0), table["Rows"])
            call["checked"] = not call["errors"] and got == (sent, bad_rows, codes, bad_rows, sent)
            if not call["checked"]:
                problems.append(
                    f"{size} MiB {case}: expected (rows sent, bad rows, by code, rejects, the table's Rows) "
                    f"{(sent, bad_rows, codes, bad_rows, sent)}, got {got}; errors {call['errors']}"
                )
            print(
                f"  round {round_ + 1} {case:<15} {call['seconds']:6.2f} s (sorting/validating "
                f"{call['sorting']:.2f} s, CPU {call['cpu']:.2f} s), +{call['added']:.0f} MiB"
            )
    return collected, problems


def rows_of(size: int, columns: int, collected: dict[str, list[dict]]) -> tuple[list[Row], list[str]]:
    """The report's two rows for one size, and the targets it missed."""
    anchor = collected["anchor"]
    anchor_s, anchor_cpu, anchor_check = (_median(anchor, k) for k in ("seconds", "cpu", "sorting"))
    anchor_mib = max(c["added"] for c in anchor)
    targeted = size >= TARGET_MIN_MIB
    rows, failures = [], []
    for case, target, what in (
        ("quarantine 1 %", TARGET_BAD, "1 % bad rows, quarantine + import"),
        ("quarantine 0 %", TARGET_CLEAN, "0 % bad rows, quarantine + import"),
    ):
        calls = collected[case]
        seconds, cpu, sorting = (_median(calls, k) for k in ("seconds", "cpu", "sorting"))
        ours_mib = max(c["added"] for c in calls)
        added, ratio = ours_mib - anchor_mib, seconds / anchor_s
        checked = sum(c["checked"] for c in calls + anchor)
        memory_target = case == "quarantine 1 %"
        met = None
        if targeted:
            within = ratio <= target and (not memory_target or added <= MEMORY_MIB)
            met = within and checked == len(calls + anchor)
        rows.append(
            Row(
                "bad rows",
                f"{columns} cols, {size} MiB, {what} vs the clean file's validate + import "
                f"(sorting {sorting:.2f} s vs validating {anchor_check:.2f} s; "
                f"CPU {cpu:.2f} s vs {anchor_cpu:.2f} s; {checked}/{len(calls + anchor)} checked)",
                f"{seconds:.2f} s",
                f"{anchor_s:.2f} s",
                ratio,
                f"{added:+.0f} MiB vs the anchor ({ours_mib:.0f} vs {anchor_mib:.0f} MiB during the call)",
                (f"<= {target}x" + (f", <= +{MEMORY_MIB} MiB" if memory_target else "")) if targeted else "",
                met,
            )
        )
        print(
            f"{size} MiB {case}: {seconds:.2f} s (sorting {sorting:.2f} s) vs {anchor_s:.2f} s "
            f"(validating {anchor_check:.2f} s): {ratio:.2f}x; CPU {cpu:.2f} s vs {anchor_cpu:.2f} s; "
            f"memory {ours_mib:.0f} vs {anchor_mib:.0f} MiB ({added:+.0f})"
        )
        if met is False:
            failures.append(f"{size} MiB {case}: {ratio:.2f}x (target <= {target}x), {added:+.0f} MiB")
    return rows, failures


def _median(calls: list[dict], figure: str) -> float:
    return statistics.median(c[figure] for c in calls)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[512], help="file sizes in MiB")
    parser.add_argument("--columns", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--client", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--json", help="also write the report's rows here (for run_all.py)")
    args = parser.parse_args(argv)
    if args.client:
        client(*args.client)
        return 0
    from airflow_tables.emulator.testing import EmulatorProcess

    print(f"machine: {machine()}")
    report: list[Row] = []
    failures: list[str] = []
    with EmulatorProcess() as emu:
        env = emulator_env(emu, "bad-rows-bench-home-")
        for size in args.sizes:
            collected, problems = measure(emu, env, size, args.columns, args.repeat)
            rows, missed = rows_of(size, args.columns, collected)
            report.extend(rows)
            failures.extend(problems + missed)
    print("targets: " + ("all met" if not failures else "MISSED: " + "; ".join(failures)))
    write_rows(args.json, report)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
