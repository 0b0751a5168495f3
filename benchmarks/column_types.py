"""The cost of typing columns in the validation scan: ``validate_csv(column_types=True)`` against ``validate_csv``.

    .venv/bin/python benchmarks/column_types.py [--sizes 512] [--columns 20 300] [--repeat 3]

The schema check of a replace (``on_schema_change``) compares the file's column types with
the table's; the types come from the same single pass as validation, typed in the C kernel
(``validation/_speedups.c``) as it finds the separators. Target (issue 26): validation with
column types <= 1.15x validation without them on 512 MiB, 20 and 300 columns, peak memory
unchanged (within 4 MiB), both as whole processes in the same run, alternating. The
pure-Python kernel (``AIRFLOW_TABLES_PURE_PYTHON=1``) is reported for scale, not targeted.

Both wall time and CPU time (user + system, the process and the scan's second process) are
reported as medians; the target is held on CPU time, the steadier figure on a machine shared
with other work: on the project's 2-core machine under a load of 8 to 10 (six other sessions),
wall-time ratios of one build swung from 0.93x to 1.44x between runs, and from 1.05x to 1.18x
within one run, while CPU-time ratios stayed within a few per cent.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, csv_file, machine, med, median_runs, python, run_process, write_rows  # noqa: E402

from airflow_tables.validation import kernels  # noqa: E402

VALIDATE = (
    "from airflow_tables.validation import validate_csv; import sys\n"
    "r = validate_csv(sys.argv[1], column_types=sys.argv[2] == '1'); print(r.rows, r.column_types)"
)
TARGET, MEMORY_SLACK_MIB = 1.15, 4.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[512], help="file sizes in MiB")
    parser.add_argument("--columns", type=int, nargs="+", default=[20, 300])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pure-python", action="store_true", help="also time the pure-Python kernel (slow)")
    parser.add_argument("--json", help="also write the report's rows here (for run_all.py)")
    args = parser.parse_args(argv)
    print(f"machine: {machine()}")
    if not kernels.native_available():
        print("the C extension is NOT built: the target is for the native kernel")
        return 1
    rows: list[Row] = []
    failures = []
    pure = {**os.environ, kernels.PURE_PYTHON_ENV: "1"}
    for columns in args.columns:
        for size in args.sizes:
            path, expected = csv_file(columns, size)

            def runs(path: Path = path) -> dict:
                found = {
                    "without": run_process([python(), "-c", VALIDATE, str(path), "0"]),
                    "with": run_process([python(), "-c", VALIDATE, str(path), "1"]),
                }
                if args.pure_python:
                    found["pure without"] = run_process([python(), "-c", VALIDATE, str(path), "0"], env=pure)
                    found["pure with"] = run_process([python(), "-c", VALIDATE, str(path), "1"], env=pure)
                return found

            result = median_runs(runs, args.repeat)
            for run in result["with"]:
                if not run.stdout.startswith(f"{expected} ["):
                    failures.append(f"{path.name}: wrong answer {run.stdout[:80]!r}")
            pairs = [("with", "without", "validate_csv(column_types=True)", TARGET)]
            if args.pure_python:
                pairs.append(("pure with", "pure without", "validate_csv(column_types=True), pure-Python kernel", None))
            for ours, anchor, label, target in pairs:
                cpu, cpu_alone = med(result[ours], "cpu_seconds"), med(result[anchor], "cpu_seconds")
                seconds, alone = med(result[ours], "seconds"), med(result[anchor], "seconds")
                peak, peak_alone = (max(r.peak_mib for r in result[k]) for k in (ours, anchor))
                ratio = cpu / cpu_alone
                met = None if target is None else ratio <= target and peak - peak_alone <= MEMORY_SLACK_MIB
                rows.append(
                    Row(
                        label,
                        f"{columns} cols, {size} MiB, vs without column types (CPU time; wall {seconds / alone:.2f}x)",
                        f"{cpu:.2f} s CPU ({seconds:.2f} s wall)",
                        f"{cpu_alone:.2f} s CPU ({alone:.2f} s wall)",
                        ratio,
                        f"{peak:.0f} vs {peak_alone:.0f} MiB",
                        "" if target is None else f"<= {target}x, memory unchanged",
                        met,
                    )
                )
                print(
                    f"{columns:>3} cols {size} MiB {label}: CPU {cpu:.2f} s vs {cpu_alone:.2f} s: {ratio:.2f}x; "
                    f"wall {seconds:.2f} s vs {alone:.2f} s: {seconds / alone:.2f}x; "
                    f"peak {peak:.1f} vs {peak_alone:.1f} MiB"
                )
                if met is False:
                    failures.append(f"{columns} cols {size} MiB: {ratio:.2f}x, peak {peak:.1f} vs {peak_alone:.1f} MiB")
    print("targets: " + ("all met" if not failures else "MISSED: " + "; ".join(failures)))
    write_rows(args.json, rows)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
