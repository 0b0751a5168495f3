"""What airflow-tables adds to every process that parses a DAG or validates a file.

    .venv/bin/python benchmarks/parse.py [--repeat 7]

Each figure is a fresh process, median of ``--repeat``, measured as the extra time over
an anchor process that imports only what it must anyway: ``airflow.sdk`` for a DAG file,
the stdlib ``csv`` module for the validator. Targets: the validator's import <= 50 ms
(issue 2); a DAG file's own part small next to Airflow's (issue 6 asks < 2 s in all).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, machine, python, write_rows  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TIMER = "import time, runpy, sys; t = time.perf_counter(); {code}; print(time.perf_counter() - t)"


def seconds(code: str, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        out = subprocess.run([python(), "-c", TIMER.format(code=code)], capture_output=True, text=True, check=True)
        runs.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(runs)


def emulator_start_up(repeat: int) -> Row:
    """From starting ``airflow-tables-emulator`` to its first answer, against a bare ``python -c pass``."""
    import tempfile
    import time

    from airflow_tables.emulator.testing import EmulatorProcess

    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(repeat):
            started = time.perf_counter()
            emulator = EmulatorProcess(Path(tmp) / "startup").start()
            runs.append(time.perf_counter() - started)
            emulator.stop()
    ours = statistics.median(runs)
    bare = seconds("pass", repeat)
    return Row(
        "emulator start-up",
        "airflow-tables-emulator to its first answer vs python -c pass",
        f"{ours:.2f} s",
        f"{bare:.2f} s",
        None,
        "",
        "< 1 s",
        ours < 1.0,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", help="also write the report's rows here (for run_all.py)")
    args = parser.parse_args(argv)
    print(f"machine: {machine()}")
    rows: list[Row] = []
    csv_s = seconds("import csv", args.repeat)
    ours = seconds("import airflow_tables.validation", args.repeat)
    rows.append(
        Row("import cost", "airflow_tables.validation vs csv", f"{ours * 1000:.0f} ms", f"{csv_s * 1000:.0f} ms",
            None, "", "<= 50 ms", ours <= 0.05)
    )  # fmt: skip
    sdk = seconds("import airflow.sdk", args.repeat)
    for dag in sorted((ROOT / "dags").glob("example_*.py")):
        total = seconds(f"import airflow.sdk; runpy.run_path({str(dag)!r})", args.repeat)
        rows.append(
            Row("DAG parse", f"{dag.name} vs import airflow.sdk", f"{total:.2f} s (+{(total - sdk) * 1000:.0f} ms)",
                f"{sdk:.2f} s", total / sdk, "", "< 2 s", total < 2.0)
        )  # fmt: skip
    rows.append(emulator_start_up(args.repeat))
    for row in rows:
        print(f"{row.case:<58} {row.ours:>20} {row.anchor:>10} {row.target:>9} {'met' if row.met else 'MISSED'}")
    write_rows(args.json, rows)
    return 0 if all(r.met for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
