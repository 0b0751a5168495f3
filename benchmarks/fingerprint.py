"""The cost of ``skip_if_unchanged``'s fingerprint: validation with it against validation alone.

    .venv/bin/python benchmarks/fingerprint.py [--sizes 512] [--repeat 3]

The fingerprint (XXH3-128 of the file, see airflow_tables/sources/fingerprint.py) is computed in a
thread beside the validation scan, as the operator does it (``while_validating``). Target
(issue 14): validation with the fingerprint <= 1.25x validation alone on 512 MiB. For scale,
the same with SHA-256 instead is also reported (not targeted).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, csv_file, machine, med, median_runs, python, run_process, write_rows  # noqa: E402

ALONE = "from airflow_tables.validation import validate_csv; import sys; print(validate_csv(sys.argv[1]).rows)"
WITH = (
    "from airflow_tables.validation import validate_csv\n"
    "from airflow_tables.sources.fingerprint import while_validating\n"
    "import sys; r, f = while_validating(lambda: validate_csv(sys.argv[1]), sys.argv[1]); print(r.rows, f)"
)
SHA256 = (
    "import hashlib, sys; from concurrent.futures import ThreadPoolExecutor\n"
    "from airflow_tables.validation import validate_csv\n"
    "def sha(p):\n"
    "    with open(p, 'rb') as f: return hashlib.file_digest(f, 'sha256').hexdigest()\n"
    "with ThreadPoolExecutor(1) as pool:\n"
    "    h = pool.submit(sha, sys.argv[1]); r = validate_csv(sys.argv[1]); print(r.rows, h.result())"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[512], help="file sizes in MiB")
    parser.add_argument("--columns", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", help="also write the report's rows here (for run_all.py)")
    args = parser.parse_args(argv)
    print(f"machine: {machine()}")
    rows: list[Row] = []
    failures = []
    for size in args.sizes:
        path, _ = csv_file(args.columns, size)

        def runs(path: Path = path) -> dict:
            return {
                "alone": run_process([python(), "-c", ALONE, str(path)]),
                "xxh3": run_process([python(), "-c", WITH, str(path)]),
                "sha256": run_process([python(), "-c", SHA256, str(path)]),
            }

        result = median_runs(runs, args.repeat)
        alone = med(result["alone"], "seconds")
        for name, target in (("xxh3", "<= 1.25x"), ("sha256", "")):
            seconds = med(result[name], "seconds")
            ratio = seconds / alone
            met = ratio <= 1.25 if target else None
            label = "validate + fingerprint" if name == "xxh3" else "validate + SHA-256 (not used; for scale)"
            rows.append(
                Row(
                    label,
                    f"{args.columns} cols, {size} MiB, vs validate_csv alone",
                    f"{seconds:.2f} s",
                    f"{alone:.2f} s",
                    ratio,
                    f"{max(r.peak_mib for r in result[name]):.0f} MiB",
                    target,
                    met,
                )
            )
            print(f"{size} MiB {name:<7} {seconds:.2f} s vs {alone:.2f} s alone: {ratio:.2f}x")
            if met is False:
                failures.append(f"{size} MiB: {ratio:.2f}x validation alone (target <= 1.25x)")
    print("targets: " + ("all met" if not failures else "MISSED: " + "; ".join(failures)))
    write_rows(args.json, rows)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
