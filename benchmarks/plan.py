"""``airflow-tables plan`` of a big DAG, and the credit budget's cost per import.

    .venv/bin/python benchmarks/plan.py [--tasks 200] [--tables 10000] [--imports 30]

Issue 44. Two measurements, each against an anchor in the same run:

* **The plan**: ``airflow-tables plan`` of a DAG with ``--tasks`` import tasks (each a small CSV,
  validated) into one department of ``--tables`` tables (connector tables seeded in the emulator, as
  ``mapped.py`` does), against ``airflow dags list`` of the same DAG folder (the anchor: what
  loading the folder costs a CLI command). Figures: the wall time of each (median of ``--repeat``,
  alternating), and the requests the plan sent to the service per task (from the emulator's log;
  none may be an import or a delete). Target: the plan at most 3x the listing (it loads the DAG as
  ``airflow dags test`` does, then renders and checks every task's file), and no paid request.
* **The budget check**: ``--imports`` imports through the hook with ``[datatables] credit_budget`` set,
  against as many with none, alternating one by one. The claim goes the way a worker's does: over HTTP
  to the provider's plugin app (served here by uvicorn on 127.0.0.1, the metadata database SQLite), signed
  with the connection's key, written by compare-and-swap. Figure: the median import time with the
  budget minus without it. Target: at most 50 ms.
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
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _common import Row, airflow_home, machine, run_process, seeded_config, write_rows  # noqa: E402

from airflow_tables.emulator.testing import EmulatorProcess  # noqa: E402
from airflow_tables.plugins.testing import PluginAppProcess  # noqa: E402

PLAN_TARGET = 3.0
BUDGET_TARGET_MS = 50.0
DAG_ID = "bench_plan"
DAG_FILE = "bench_plan.py"

DAGS = """
import json
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG

from airflow_tables.operators.tables import DataTablesImportOperator

FILES = json.loads((Path(__file__).parent / "plan_files.json").read_text())

with DAG("bench_plan", schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    for i, path in enumerate(FILES):
        DataTablesImportOperator(task_id=f"import_{i:04d}", file_path=path)
"""


def write_files(folder: Path, count: int) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"plan_{i:05d}.csv"
        path.write_text("order_id,region,amount\n" + "".join(f"{i * 10 + r},North,{r * 3}\n" for r in range(20)))
        paths.append(str(path))
    return paths


def measure_plan(args: argparse.Namespace, emulator: EmulatorProcess, home: Path) -> list[Row]:
    files = write_files(home / "files", args.tasks)
    (home / "dags" / "plan_files.json").write_text(json.dumps(files))
    env = {**os.environ, "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags")}
    exe = Path(sys.executable)
    plan = [str(exe.with_name("airflow-tables")), "plan", DAG_ID, "--json"]
    listing = [str(exe.with_name("airflow")), "dags", "list", "-o", "json"]
    plans, lists, requests = [], [], []
    for _ in range(args.repeat):
        emulator.reset_stats()
        run = run_process(plan, env)
        seen = emulator.stats()["requests"]
        decided = json.loads(run.stdout)
        assert len(decided["tasks"]) == args.tasks and decided["credits"] == args.tasks, decided["credits"]
        plans.append(run.seconds)
        requests.append(seen)
        lists.append(run_process(listing, env).seconds)
    paid = [r for r in requests[-1] if r["method"] != "GET"]
    ours, anchor = statistics.median(plans), statistics.median(lists)
    per_task = len(requests[-1]) / args.tasks
    ratio = ours / anchor
    print(f"plan of {args.tasks} imports: {plans} s; airflow dags list: {lists} s; requests {len(requests[-1])}")
    return [
        Row(
            "plan.py",
            f"airflow-tables plan, {args.tasks} imports, department of {args.tables:,} tables",
            f"{ours:.2f} s, {per_task:.2f} requests a task, {len(paid)} paid",
            f"{anchor:.2f} s (airflow dags list)",
            ratio,
            "",
            f"<= {PLAN_TARGET:g}x, no paid request",
            ratio <= PLAN_TARGET and not paid,
        )
    ]


def measure_budget(args: argparse.Namespace, emulator: EmulatorProcess, home: Path) -> list[Row]:
    from airflow_tables.hooks.tables import DataTablesHook

    server = PluginAppProcess().__enter__()
    os.environ["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] = f"{server.url}/execution/"
    os.environ.pop("_AIRFLOW_PROCESS_CONTEXT", None)  # a worker's process: it asks the api-server
    files = write_files(home / "budget_files", 2 * args.imports + 2)
    hook = DataTablesHook()
    times: dict[bool, list[float]] = {True: [], False: []}
    try:
        for i, path in enumerate(files):
            budgeted = i % 2 == 0
            if budgeted:
                os.environ["AIRFLOW__DATATABLES__CREDIT_BUDGET"] = str(10 * len(files))
            else:
                os.environ.pop("AIRFLOW__DATATABLES__CREDIT_BUDGET", None)
            start = time.perf_counter()
            hook.import_csv(None, path)
            if i >= 2:  # the first of each: connections and imports warmed up
                times[budgeted].append(time.perf_counter() - start)
    finally:
        server.__exit__()
        os.environ.pop("AIRFLOW__DATATABLES__CREDIT_BUDGET", None)
    with_budget, without = statistics.median(times[True]), statistics.median(times[False])
    added_ms = (with_budget - without) * 1000
    print(f"imports with a budget: median {with_budget * 1000:.1f} ms; without: {without * 1000:.1f} ms")
    return [
        Row(
            "plan.py",
            f"budget check per import (claim over HTTP to the plugin app, {args.imports} imports each way)",
            f"{with_budget * 1000:.1f} ms (+{added_ms:.1f} ms)",
            f"{without * 1000:.1f} ms (no budget)",
            with_budget / without,
            "",
            f"<= +{BUDGET_TARGET_MS:g} ms at the median",
            added_ms <= BUDGET_TARGET_MS,
        )
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--tables", type=int, default=10_000)
    parser.add_argument("--imports", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", help="also write the report's rows here (for run_all.py)")
    args = parser.parse_args(argv)
    home = airflow_home(DAG_FILE, DAGS)
    with EmulatorProcess(config=seeded_config(args.tables, credits=10 * args.imports + 100)) as emulator:
        conn = {
            "conn_type": "datatables",
            "host": emulator.base_url,
            "password": emulator.api_key,
            "extra": {"project_id": emulator.project_id},
        }
        os.environ["AIRFLOW_CONN_DATATABLES_DEFAULT"] = json.dumps(conn)
        rows = measure_plan(args, emulator, home) + measure_budget(args, emulator, home)
    print(f"machine: {machine()}")
    print("| case | ours | anchor | ratio | target | met |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        ratio = "" if row.ratio is None else f"{row.ratio:.2f}x"
        print(f"| {row.case} | {row.ours} | {row.anchor} | {ratio} | {row.target} | {'yes' if row.met else 'NO'} |")
    write_rows(args.json, rows)
    return 0 if all(row.met for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
