"""``make bench``: every benchmark in one run, one table, written to the README.

    .venv/bin/python benchmarks/run_all.py [--quick]

Runs validate.py (20 and 300 columns, 64 and 512 MiB, against duckdb, pyarrow and Python's
csv), upload.py (the hook against curl), sources.py (an object in a local S3 server and a
Windows-1252 file through the hook, against boto3 + curl and the plain upload), wait.py
(coalesced deferred waits against per-task polling), emulator_read.py (reading an upload
against validate_csv), parse.py (import costs), fingerprint.py (skip_if_unchanged's hash
beside validation), column_types.py (validation with column types against without it),
ui.py (the Data Tables page: render time, list requests under 20 viewers),
expectations.py (a GX suite before the upload against a whole-file pandas read),
replace_requests.py (a replace's requests with the schema check and without) and bad_rows.py
(an import with on_bad_rows="quarantine" of a file with 1 % bad rows, and of a clean one,
against the clean file's validate + import), formats.py (a .csv.gz and a .parquet imported, against
gzip -dc or duckdb's COPY to CSV followed by the plain import), combine.py (1,000 part files into one
table against one file of their rows), sql_transfer.py (5 million rows from PostgreSQL through
SqlToDataTablesOperator's path, against psql's \\copy to a file followed by the plain import),
lineage.py (a DAG's Data Tables tasks with the OpenLineage provider on, forked child and file
transport, against the same run with it off), plan.py (``airflow-tables plan`` of 200 imports against
``airflow dags list`` of the same folder, and an import's credit-budget claim against none) and
mapped.py (100 mapped imports and replaces into a department of 10,000 tables, the operators
against a bare @task calling the hook), each as its own process on a quiet machine is best.
Every ratio compares with an anchor measured in
the same run. The table goes to benchmarks/results/latest.md and between the markers in README.md.
``--quick`` uses 64 MiB files and fewer repeats (minutes, not tens).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row, machine, python  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def suites(quick: bool) -> list[list[str]]:
    sizes = ["64"] if quick else ["64", "512"]
    repeat = "1" if quick else "3"
    return [
        ["validate.py", "--sizes", *sizes, "--repeat", repeat, "--pyarrow"],
        # Nine rounds: curl's own time moves by a third from round to round (0.28 s to 0.42 s for 512 MiB).
        ["upload.py", "--size", "64" if quick else "512", "--repeat", "2" if quick else "9"],
        ["sources.py", "--size", *sizes, "--repeat", "1" if quick else "5"],
        ["wait.py"],
        ["emulator_read.py", "--sizes", *sizes, "--repeat", repeat],
        ["parse.py", "--repeat", "3" if quick else "7"],
        # Five rounds: with three, one busy round in 2026-11-26's runs moved the median from 1.19x to 1.34x.
        ["fingerprint.py", "--sizes", "64" if quick else "512", "--repeat", "3" if quick else "5"],
        ["column_types.py", "--sizes", "64" if quick else "512", "--repeat", "3" if quick else "5"],
        ["ui.py", "--tables", "2000" if quick else "10000", "--seconds", "20" if quick else "60"],
        ["expectations.py", "--size", "64" if quick else "512", "--repeat", "1"],
        ["replace_requests.py", "--repeat", "1" if quick else "3"],
        ["bad_rows.py", "--sizes", "64" if quick else "512", "--repeat", "3" if quick else "5"],
        ["formats.py", "--sizes", "64" if quick else "512", "--repeat", "1" if quick else "3"],
        ["combine.py", "--parts", "100" if quick else "1000", "--part-kib", "64" if quick else "512"],
        # 5 million rows (about 470 MB of CSV) is the figure; --quick makes 500,000.
        ["sql_transfer.py", "--rows", "500000" if quick else "5000000", "--repeat", "1" if quick else "3"],
        ["lineage.py", "--repeat", "2" if quick else "5"],
        ["plan.py", "--tasks", "50" if quick else "200", "--repeat", "1" if quick else "3"],
        # 1,000 of each is the figure, about an hour on 2 cores: run it alone (benchmarks/mapped.py).
        ["mapped.py", "--count", "20" if quick else "100"],
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    started = time.monotonic()
    rows: list[Row] = []
    failed = []
    for suite in suites(args.quick):
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            print(f"== {' '.join(suite)}", flush=True)
            code = subprocess.call([python(), str(HERE / suite[0]), *suite[1:], "--json", out.name])
            data = Path(out.name).read_text()
            rows.extend(Row(**r) for r in json.loads(data or "[]"))
            if code != 0:
                failed.append(suite[0])
    command = "make bench" + (" (--quick)" if args.quick else "")
    lines = [
        f"Measured {dt.date.today().isoformat()} with `{command}` on {machine()}; "
        f"{time.monotonic() - started:.0f} s in all. Ratios are ours / the anchor, both measured in this run.",
        "",
        "| benchmark | case | ours | anchor | ratio | peak memory | target | met |",
        "|---|---|---|---|---|---|---|---|",
        *(r.markdown() for r in rows),
    ]
    table = "\n".join(lines) + "\n"
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "latest.md").write_text(table)
    readme = ROOT / "README.md"
    text = readme.read_text()
    if START in text and END in text:
        head, rest = text.split(START, 1)
        readme.write_text(head + START + "\n" + table + END + rest.split(END, 1)[1])
    print(table)
    if failed:
        print(f"benchmarks that missed a target or failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
