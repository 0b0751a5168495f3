"""Validator speed and memory against duckdb and Python's csv module, as whole processes.

    .venv/bin/python benchmarks/validate.py [--sizes 64 512] [--repeat 3]

"ours, pure Python" is the same validator with AIRFLOW_TABLES_PURE_PYTHON=1: the
fallback where the C extension could not be built. It is reported, not held to a target.

Targets (issue 2): our time <= 0.8x duckdb's ``SELECT count(*) FROM read_csv(...)`` on the
20- and 300-column files, peak memory <= 32 MiB and the same at 64 MiB as at 512 MiB,
with exactly the right row count.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, csv_file, machine, med, median_runs, python, run_process, write_rows  # noqa: E402

from airflow_tables.validation import kernels  # noqa: E402

DUCKDB = (
    # No progress bar: past 2 s (a loaded machine) duckdb draws one on stdout, where the count is read.
    "import duckdb, sys; con = duckdb.connect(); con.execute('SET enable_progress_bar = false'); "
    "print(con.execute(\"SELECT count(*) FROM read_csv(?, header=true, quote='\\\"', escape='\\\"', "
    "delim=',', all_varchar=true, strict_mode=true)\", [sys.argv[1]]).fetchone()[0])"
)
PYCSV = "import csv, sys; print(sum(1 for r in csv.reader(open(sys.argv[1], newline='')) if r) - 1)"
PYARROW = (
    "import pyarrow.csv as pc, sys; n = 0\n"
    "r = pc.open_csv(sys.argv[1], parse_options=pc.ParseOptions(newlines_in_values=True), "
    "convert_options=pc.ConvertOptions(column_types={}, strings_can_be_null=False, "
    "auto_dict_encode=False), read_options=pc.ReadOptions(block_size=8 << 20))\n"
    "for b in r: n += b.num_rows\n"
    "print(n)"
)


PURE = "ours, pure Python"


def contenders(path: Path, with_pyarrow: bool) -> dict:
    validate = [python(), "-m", "airflow_tables.cli", "validate", "--json", str(path)]
    pure_python = {**os.environ, kernels.PURE_PYTHON_ENV: "1"}

    def runs():
        result = {
            "airflow-tables": run_process(validate),
            "duckdb": run_process([python(), "-c", DUCKDB, str(path)]),
            "python csv": run_process([python(), "-c", PYCSV, str(path)]),
            # the fallback where the C extension could not be built (no compiler at install)
            PURE: run_process(validate, env=pure_python),
        }
        if with_pyarrow:
            result["pyarrow"] = run_process([python(), "-c", PYARROW, str(path)])
        return result

    return runs


def rows_of(name: str, stdout: str) -> int:
    if name.startswith(("airflow-tables", "ours")):
        return json.loads(stdout)[0]["rows"]
    return int(stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 512], help="file sizes in MiB")
    parser.add_argument("--columns", type=int, nargs="+", default=[20, 300])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pyarrow", action="store_true", help="also time pyarrow.csv.open_csv")
    parser.add_argument("--json", help="also write the report's rows here (for run_all.py)")
    args = parser.parse_args(argv)
    print(f"machine: {machine()}")
    kernel = "native (C extension)" if kernels.native_available() else "pure Python: the C extension is NOT built"
    print(f"airflow-tables scans with: {kernel}")
    print(f"{'file':<22} {'tool':<18} {'time s':>8} {'vs duckdb':>10} {'peak MiB':>9} rows")
    failures = []
    rows: list[Row] = []
    peaks: dict[int, list[float]] = {}
    for columns in args.columns:
        for size in args.sizes:
            path, expected = csv_file(columns, size)
            runs = median_runs(contenders(path, args.pyarrow), args.repeat)
            anchor = med(runs["duckdb"], "seconds")
            ours_s = med(runs["airflow-tables"], "seconds")
            ours_peak = max(r.peak_mib for r in runs["airflow-tables"])
            pure = runs[PURE]
            rows.append(
                Row(
                    "validate_csv, pure-Python kernel",
                    f"{columns} cols, {size} MiB, vs duckdb",
                    f"{med(pure, 'seconds'):.2f} s",
                    f"{anchor:.2f} s",
                    med(pure, "seconds") / anchor,
                    f"{max(r.peak_mib for r in pure):.0f} MiB",
                    "",
                    None,
                )
            )
            for name, rs in runs.items():
                if name not in ("airflow-tables", PURE):
                    theirs = med(rs, "seconds")
                    target = "<= 0.8x, <= 32 MiB" if name == "duckdb" and size >= 512 else ""
                    met = (ours_s / theirs <= 0.8 and ours_peak <= 32) if target else None
                    rows.append(
                        Row(
                            "validate_csv",
                            f"{columns} cols, {size} MiB, vs {name}",
                            f"{ours_s:.2f} s",
                            f"{theirs:.2f} s",
                            ours_s / theirs,
                            f"{ours_peak:.0f} vs {max(r.peak_mib for r in rs):.0f} MiB",
                            target,
                            met,
                        )
                    )
                seconds, peak = med(rs, "seconds"), max(r.peak_mib for r in rs)
                got = rows_of(name, rs[-1].stdout)
                mark = "ok" if got == expected else f"WRONG ({got} != {expected})"
                print(f"{path.name:<22} {name:<18} {seconds:>8.2f} {seconds / anchor:>9.2f}x {peak:>9.1f} {mark}")
                if name == "airflow-tables":
                    peaks.setdefault(columns, []).append(peak)
                    if got != expected:
                        failures.append(f"{path.name}: wrong row count {got}")
                    if size >= 512 and seconds / anchor > 0.8:
                        failures.append(f"{path.name}: {seconds / anchor:.2f}x duckdb (target <= 0.8x)")
                    if peak > 32:
                        failures.append(f"{path.name}: peak {peak:.1f} MiB (target <= 32)")
    for columns, ps in peaks.items():
        if len(ps) > 1 and max(ps) - min(ps) > 4:
            failures.append(f"{columns} cols: peak memory grows with size: {ps}")
    print("targets: " + ("all met" if not failures else "MISSED: " + "; ".join(failures)))
    write_rows(args.json, rows)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
