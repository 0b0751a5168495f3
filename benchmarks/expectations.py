"""The import operators' expectations step against today's whole-file pandas read, as whole processes.

    .venv/bin/python benchmarks/expectations.py [--size 512] [--columns 20 300] [--repeat 1]

For each file (512 MiB, 20 and 300 columns, from ``_common.csv_file``) and each suite, three
processes, alternating, ``--repeat`` times. Each imports the operators' module (what a task
process has loaded) and runs ``validate_csv`` on the file, as the import task does before
any request; then:

* ``none``: nothing more (the task without a suite: the baseline memory is measured on it);
* ``today``: the anchor, the expectations step as it was before issue 16 (kept below as
  :func:`today_check`): the whole file read by ``pd.read_csv``, every column, then one GX
  validation;
* ``ours``: ``airflow_tables.expectations.check``.

"Added memory" is a process's peak resident memory minus the ``none`` process's, so it
counts everything the suite costs, Great Expectations' own import (about 200 MiB) included;
the time is the step's own (GX import included), from inside the process.

Suites: ``row-wise`` has four expectations on three columns (not null and between on a
``long`` column, in set on a text column, a regex on e-mail addresses); ``aggregate`` has one
expectation that needs a whole column (``expect_column_values_to_be_unique``).

Targets (issue 16): row-wise suite, added memory <= 256 MiB on both files and time <= today's;
aggregate suite, added memory <= 0.5x today's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, csv_file, machine, python, run_process, write_rows  # noqa: E402

SUITES: dict[str, dict] = {
    "row-wise": {
        "name": "orders_rows",
        "expectations": [
            {"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "col_0"}},
            {"type": "expect_column_values_to_be_between", "kwargs": {"column": "col_0", "min_value": 0}},
            {
                "type": "expect_column_values_to_be_in_set",
                "kwargs": {
                    "column": "col_3",
                    "value_set": ["retail", "wholesale", "online", "partner", "internal", "returns", "samples"],
                    "mostly": 0.8,
                },
            },
            {
                "type": "expect_column_values_to_match_regex",
                "kwargs": {"column": "col_5", "regex": r"^[^@\s]+@[^@\s]+\.[a-z]+$"},
            },
        ],
    },
    "aggregate": {
        "name": "orders_unique",
        "expectations": [{"type": "expect_column_values_to_be_unique", "kwargs": {"column": "col_0"}}],
    },
}
CASES = {
    "row-wise": "4 row-wise expectations on 3 columns",
    "aggregate": "1 aggregate expectation (unique)",
}
ROW_WISE_MAX_MIB = 256
AGGREGATE_MAX_RATIO = 0.5
MODES = ("none", "today", "ours")


def today_check(report: Any, expectations: dict) -> bool:
    """The expectations step before issue 16, kept as the anchor: the whole file into pandas, then GX."""
    import great_expectations as gx
    import pandas as pd

    suite = gx.ExpectationSuite(**expectations)
    frame = pd.read_csv(report.path, sep=report.delimiter, header=0, names=report.columns, encoding="utf-8-sig")
    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = {"globally": False}
    batch = (
        context.data_sources.add_pandas("airflow_tables")
        .add_dataframe_asset("upload")
        .add_batch_definition_whole_dataframe("whole_file")
        .get_batch(batch_parameters={"dataframe": frame})
    )
    return bool(batch.validate(suite).success)


def child(mode: str, path: str, suite: str) -> None:
    """One measured process: the import task's checks, with the suite run the ``mode`` way."""
    import airflow_tables.operators.tables  # noqa: F401  (what a task process has loaded)
    from airflow_tables.validation import validate_csv

    report = validate_csv(path)
    started = time.perf_counter()
    success = None
    if mode == "today":
        success = today_check(report, SUITES[suite])
    elif mode == "ours":
        from airflow_tables.expectations import check

        success = check(report, SUITES[suite]).success
    print(json.dumps({"seconds": time.perf_counter() - started, "success": success, "ok": report.ok}))


def measure(path: Path, suite: str, repeat: int) -> dict[str, dict[str, float]]:
    runs: dict[str, list[tuple[float, float, Any]]] = {m: [] for m in MODES}
    for _ in range(repeat):
        for mode in MODES:
            run = run_process([python(), __file__, "--child", mode, str(path), suite])
            out = json.loads(run.stdout.strip().splitlines()[-1])
            if not out["ok"]:
                raise RuntimeError(f"{path} does not validate")
            runs[mode].append((out["seconds"], run.peak_mib, out["success"]))
    verdicts = {runs[m][-1][2] for m in ("today", "ours")}
    if len(verdicts) != 1:
        raise RuntimeError(f"{path.name}, {suite}: today and ours disagree on the suite: {verdicts}")
    base = statistics.median(p for _, p, _ in runs["none"])
    return {
        mode: {
            "seconds": statistics.median(s for s, _, _ in rs),
            "added": max(p for _, p, _ in rs) - base,
            "base": base,
        }
        for mode, rs in runs.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512, help="file size in MiB")
    parser.add_argument("--columns", type=int, nargs="+", default=[20, 300])
    parser.add_argument("--suites", nargs="+", default=list(SUITES), choices=list(SUITES))
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", help="also write the report's rows here (for run_all.py)")
    parser.add_argument("--child", nargs=3, metavar=("MODE", "PATH", "SUITE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    print(f"machine: {machine()}")
    print(f"{'file':<28} {'suite':<10} {'today s':>8} {'ours s':>7} {'today +MiB':>11} {'ours +MiB':>10}  base MiB")
    rows: list[Row] = []
    failures: list[str] = []
    for columns in args.columns:
        path, _ = csv_file(columns, args.size)
        for suite in args.suites:
            r = measure(path, suite, args.repeat)
            today, ours = r["today"], r["ours"]
            print(
                f"{path.name:<28} {suite:<10} {today['seconds']:>8.1f} {ours['seconds']:>7.1f} "
                f"{today['added']:>11.0f} {ours['added']:>10.0f}  {r['none']['base']:.0f}"
            )
            case = f"{columns} cols, {args.size} MiB, {CASES[suite]}, vs whole-file pandas read"
            peak = f"+{ours['added']:.0f} vs +{today['added']:.0f} MiB"
            if suite == "row-wise":  # the row compares times; memory is held to a bound
                cells = (f"{ours['seconds']:.1f} s", f"{today['seconds']:.1f} s")
                ratio = ours["seconds"] / today["seconds"]
                met = ours["added"] <= ROW_WISE_MAX_MIB and ratio <= 1.0
                target = f"<= 1x time, <= +{ROW_WISE_MAX_MIB} MiB"
            else:  # the row compares added memory; the times are shown beside it
                cells = (f"+{ours['added']:.0f} MiB", f"+{today['added']:.0f} MiB")
                ratio = ours["added"] / today["added"]
                met = ratio <= AGGREGATE_MAX_RATIO
                target = f"<= {AGGREGATE_MAX_RATIO}x memory"
                peak += f" ({ours['seconds']:.1f} vs {today['seconds']:.1f} s)"
            rows.append(Row("expectations", case, *cells, ratio, peak, target, met))
            if not met:
                failures.append(f"{path.name}, {suite}: {peak}, {ours['seconds']:.1f} s vs {today['seconds']:.1f} s")
    print("targets: " + ("all met" if not failures else "MISSED: " + "; ".join(failures)))
    write_rows(args.json, rows)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
