"""Mapped imports and replaces into a large department: the operators against a bare ``@task`` calling the hook.

    .venv/bin/python benchmarks/mapped.py [--count 1000] [--tables 10000]

Issue 37, point 8: mapped tasks scaled quadratically. Target: ``--count`` mapped imports and as
many mapped replaces into a department of ``--tables`` tables, each DAG run at most 1.2x a bare
``@task`` calling the hook (same run), with at most one listing of the department per import.

One emulator serves the whole run. Its department holds ``--tables`` tables beforehand:
connector tables declared in its configuration (as ``ui.py`` seeds them), since nothing else makes
tables without an import and ten thousand imports over HTTP would take longer than the benchmark.
They are in every listing like any other table; none of them is imported or replaced here.

Four DAG runs (``dag.test()`` in a throwaway Airflow home, tasks run one after another):

* imports, operator: ``DataTablesImportOperator.partial(...).expand(file_path=[...])``;
* imports, bare: a ``@task`` expanded over the same files (copies with names of their own, so no
  run sees another's tables as its own) calling ``import_csv`` then ``wait_for_processed``;
* replaces, bare, then operator: ``expand_kwargs`` over ``{card_id, file_path}``, each side
  replacing the tables its own import run made (``DataTablesReplaceOperator`` against a ``@task``
  calling ``import_csv(card_id=...)`` then ``wait_for_processed``).

Every wait polls every 0.2 s, on the worker (``deferrable=False``). A warm-up run of one task of
each kind goes first (the process's first task pays about 10 s of imports and start-up). The order
alternates (imports: operator first; replaces: bare first) and each run is measured once: the
department grows by ``--count`` tables with each import run, which the report shows. Figures per
run: the wall time of ``dag.test()``, the tasks' own time (the sum of their durations, and the
first and last tenth's means: a cost that grows with the map index shows there), requests by kind
from the emulator's request log (lists ``GET .../cards``, fetches ``GET .../cards/{CardID}``,
imports ``POST .../data/import``) per task, XComs left per task, and credits spent. Listings per
import are judged on the mean and on the most lists between two consecutive imports.

``dag.test()`` logs every task to stdout; the report comes last, and each run's line is also
written to stderr as soon as the run ends, with a progress line a minute. On 2 cores a task takes
about 0.5 to 1.2 s, most of it listing the 10,000 tables, so ``--count 1000`` runs for about an
hour; ``--count 20`` takes two minutes. Ctrl-C does not stop a ``dag.test()`` under way.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _common import Row, airflow_home, machine, seeded_config, write_rows  # noqa: E402

from airflow_tables.emulator.testing import EmulatorProcess  # noqa: E402

TARGET_RATIO = 1.2
MANIFEST = "mapped_manifest.json"
DAG_FILE = "bench_mapped.py"
SIDES = ("operator", "bare")
KINDS = ("list", "fetch", "import", "other")

# Read at parse time: the files and tables to map over are only known once the script has made them
# (the replaces' CardIDs once the imports have run), and every parse must see the same lists.
DAGS = """
import json
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG, task

from airflow_tables.operators.tables import DataTablesImportOperator, DataTablesReplaceOperator

MANIFEST = json.loads((Path(__file__).parent / "mapped_manifest.json").read_text())
PROJECT = MANIFEST["project_id"]
POLL = 0.2
DAGS = {}


def bench_dag(name):
    return DAG(f"bench_mapped_{name}", schedule=None, start_date=datetime(2026, 1, 1), catchup=False)


@task
def bare_import(file_path):
    from airflow_tables.hooks.tables import DataTablesHook

    hook = DataTablesHook()
    card_id = hook.import_csv(PROJECT, file_path)
    hook.wait_for_processed(PROJECT, card_id, poll_interval=POLL)
    return card_id


@task
def bare_replace(card_id, file_path):
    from airflow_tables.hooks.tables import DataTablesHook

    hook = DataTablesHook()
    hook.import_csv(PROJECT, file_path, card_id=card_id)
    hook.wait_for_processed(PROJECT, card_id, poll_interval=POLL)
    return card_id


def mapped(action, side, task_id, items):
    if action == "import" and side == "operator":
        return DataTablesImportOperator.partial(
            task_id=task_id, project_id=PROJECT, deferrable=False, poll_interval=POLL
        ).expand(file_path=items)
    if action == "replace" and side == "operator":
        return DataTablesReplaceOperator.partial(
            task_id=task_id, project_id=PROJECT, deferrable=False, poll_interval=POLL
        ).expand_kwargs(items)
    if action == "import":
        return bare_import.override(task_id=task_id).expand(file_path=items)
    return bare_replace.override(task_id=task_id).expand_kwargs(items)


for action in ("import", "replace"):
    for side in ("operator", "bare"):
        with bench_dag(f"{action}_{side}") as dag:
            mapped(action, side, action, MANIFEST[action + "s"][side])
        DAGS[action, side] = dag

# One task of each kind, run first: the process's first task pays for imports and start-up.
with bench_dag("warmup") as dag:
    for action in ("import", "replace"):
        for side in ("operator", "bare"):
            mapped(action, side, f"{side}_{action}", MANIFEST["warmup"][action + "s"][side])
DAGS["warmup"] = dag
"""


def write_files(folder: Path, prefix: str, count: int, rows: int) -> list[str]:
    """``count`` tiny CSVs named ``<prefix>_<i>.csv`` (the service names each table after its file)."""
    folder.mkdir(parents=True)
    paths = []
    for i in range(count):
        path = folder / f"{prefix}_{i:05d}.csv"
        path.write_text("order_id,region,amount\n" + "".join(f"{i * 10 + r},North,{r * 3}\n" for r in range(rows)))
        paths.append(str(path))
    return paths


def load_dags(home: Path, manifest: dict) -> ModuleType:
    """Write the manifest and parse the DAG file afresh, as ``dag.test()`` will when it syncs the folder."""
    (home / "dags" / MANIFEST).write_text(json.dumps(manifest))
    spec = importlib.util.spec_from_file_location("bench_mapped", home / "dags" / DAG_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kind(request: dict) -> str:
    path, method = request["path"], request["method"]
    if method == "GET" and path.endswith("/cards"):
        return "list"
    if method == "GET" and "/cards/" in path:
        return "fetch"
    if method == "POST" and path.endswith("/data/import"):
        return "import"
    return "other"


def most_lists_between_imports(requests: list[dict]) -> int:
    """The most lists seen between two imports (or before the first, after the last).

    Tasks run one after another, so each stretch holds the end of one task and the start of
    the next: a task that lists twice before it sends shows here as 2, where a mean of many
    tasks could hide it.
    """
    most = lists = 0
    for request in requests:
        k = kind(request)
        if k == "import":
            most, lists = max(most, lists), 0
        elif k == "list":
            lists += 1
    return max(most, lists)


@dataclass
class Measured:
    """One DAG run: its wall time, its tasks' time, and what it asked of the service.

    ``first_tenth`` and ``last_tenth``: the mean duration of the first and the last tenth of its
    tasks, in the order they ran; a task whose cost grows with the tasks before it shows here.
    """

    action: str
    side: str
    tasks: int
    wall: float
    task_seconds: float
    first_tenth: float
    last_tenth: float
    requests: Counter
    most_lists: int
    xcoms: int
    credits: int
    tables_before: int

    def per_task(self, what: str) -> float:
        return self.requests[what] / self.tasks

    def shown(self) -> str:
        asked = ", ".join(f"{self.per_task(k):.2f} {k}" for k in KINDS if self.requests[k] or k != "other")
        return f"{self.wall:.1f} s ({self.wall / self.tasks * 1000:.0f} ms a task); per task {asked}"

    def line(self) -> str:
        """Everything measured, on one line."""
        return (
            f"{self.action}s, {self.side:8}: wall {self.wall:7.1f} s, tasks {self.task_seconds:7.1f} s "
            f"(first tenth {self.first_tenth * 1000:.0f} ms a task, last tenth {self.last_tenth * 1000:.0f} ms); "
            f"per task {self.per_task('list'):.2f} lists (at most {self.most_lists} between two imports), "
            f"{self.per_task('fetch'):.2f} fetches, {self.per_task('import'):.2f} imports, "
            f"{self.per_task('other'):.2f} other, {self.xcoms / self.tasks:.1f} XComs; "
            f"{self.credits} credits; department of {self.tables_before:,} tables at the start"
        )


class Progress:
    """A line on stderr every ``every`` seconds: imports sent so far (one credit each), to judge the rate."""

    def __init__(self, emulator: EmulatorProcess, label: str, count: int, every: float = 60.0) -> None:
        self.emulator, self.label, self.count, self.every = emulator, label, count, every
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        start, credits, last = time.perf_counter(), self.emulator.credits(), 0
        while not self.stopped.wait(self.every):
            sent = credits - self.emulator.credits()
            print(
                f"  {self.label}: {sent}/{self.count} sent after {time.perf_counter() - start:.0f} s "
                f"({sent - last} in the last {self.every:g} s)",
                file=sys.stderr,
                flush=True,
            )
            last = sent

    def __enter__(self) -> Progress:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.thread.join()


def xcom_count(dag_id: str, run_id: str) -> int:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import func, select

    with create_session() as session:
        query = select(func.count()).select_from(XComModel)
        return session.scalar(query.where(XComModel.dag_id == dag_id, XComModel.run_id == run_id))


def dag_test(dag, count: int, when: datetime) -> tuple[float, list]:
    """``dag.test()``: its wall time and its task instances, failing unless all ``count`` of them succeeded."""
    start = time.perf_counter()
    dag_run = dag.test(logical_date=when, run_after=when)
    wall = time.perf_counter() - start
    tis = dag_run.get_task_instances()
    states = Counter(str(ti.state) for ti in tis)
    if len(tis) != count or states != Counter({"success": count}):
        raise RuntimeError(f"{dag.dag_id}: {len(tis)} task instances of {count} expected, ended {dict(states)}")
    return wall, tis


def run_dag(module: ModuleType, action: str, side: str, emulator: EmulatorProcess, when: datetime) -> Measured:
    """Run one of the four measured DAGs, counting the requests it made."""
    from airflow_tables.emulator.faults import LOG_SIZE

    dag = module.DAGS[action, side]
    count = len(module.MANIFEST[f"{action}s"][side])
    tables_before = len(emulator.list_cards())
    before = emulator.credits()
    emulator.reset_stats()
    with Progress(emulator, f"{action}s, {side}", count):
        wall, tis = dag_test(dag, count, when)
    requests = emulator.stats()["requests"]
    if len(requests) >= LOG_SIZE:
        raise RuntimeError(f"the emulator's request log ({LOG_SIZE} entries) overflowed: its counts would be short")
    durations = [ti.duration or 0.0 for ti in sorted(tis, key=lambda ti: ti.start_date)]
    tenth = max(1, count // 10)
    return Measured(
        action,
        side,
        count,
        wall,
        sum(durations),
        statistics.mean(durations[:tenth]),
        statistics.mean(durations[-tenth:]),
        Counter(kind(r) for r in requests),
        most_lists_between_imports(requests),
        xcom_count(dag.dag_id, tis[0].run_id),
        before - emulator.credits(),
        tables_before,
    )


def report(action: str, results: dict[str, Measured], tables: int) -> list[Row]:
    """Print one action's two runs and return its two rows: the time ratio, and listings per import."""
    ours, anchor = results["operator"], results["bare"]
    ratio = ours.wall / anchor.wall
    met = ratio <= TARGET_RATIO
    for m in (ours, anchor):
        print(m.line())
    lists = ours.per_task("list")
    case = f"{ours.tasks:,} mapped {action}s, {tables:,} tables: operator vs bare @task (one run each)"
    return [
        Row("mapped tasks", case, ours.shown(), anchor.shown(), ratio, "", f"<= {TARGET_RATIO:g}x", met),
        Row(
            "mapped tasks",
            f"{ours.tasks:,} mapped {action}s, {tables:,} tables: listings of the department per {action}",
            f"{lists:.2f} (at most {ours.most_lists} between two imports)",
            f"{anchor.per_task('list'):.2f}",
            None,
            "",
            "<= 1 per import",
            lists <= 1 and ours.most_lists <= 1,
        ),
    ]


def warm_up(home: Path, emulator: EmulatorProcess, manifest: dict) -> dict:
    """The warm-up's files, and two tables for its replaces, imported outside Airflow and read."""
    from airflow_tables.hooks.tables import DataTablesHook

    files = {
        (action, side): write_files(home / "files" / f"warmup_{action}_{side}", f"warmup_{action}_{side}", 1, 3)
        for action in ("import", "replace")
        for side in SIDES
    }
    hook = DataTablesHook()
    targets = write_files(home / "files" / "warmup_targets", "warmup_target", 2, 3)
    card_ids = [hook.import_csv(manifest["project_id"], path) for path in targets]
    for card_id in card_ids:
        emulator.wait_until_processed(manifest["project_id"], card_id)
    return {
        "imports": {side: files["import", side] for side in SIDES},
        "replaces": {
            side: [{"card_id": card_id, "file_path": files["replace", side][0]}]
            for side, card_id in zip(SIDES, card_ids, strict=True)
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000, help="mapped tasks per DAG run (20 for a smoke run)")
    parser.add_argument("--tables", type=int, default=10_000, help="tables in the department beforehand")
    parser.add_argument("--json", help="also write the report's rows here (for run_all.py)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    home = airflow_home(DAG_FILE, DAGS)  # the DAGs' manifest comes later
    files = home / "files"
    imports = {side: write_files(files / f"import_{side}", f"{side}_import", args.count, 3) for side in SIDES}
    replacements = {side: write_files(files / f"replace_{side}", f"{side}_replace", args.count, 4) for side in SIDES}
    try:
        with EmulatorProcess(config=seeded_config(args.tables, credits=4 * args.count + 100)) as emulator:
            os.environ["AIRFLOW_CONN_DATATABLES_DEFAULT"] = json.dumps(
                {
                    "conn_type": "datatables",
                    "host": emulator.base_url,
                    "password": emulator.api_key,
                    "extra": {"project_id": emulator.project_id},
                }
            )
            manifest = {"project_id": emulator.project_id, "imports": imports, "replaces": {s: [] for s in SIDES}}
            manifest["warmup"] = warm_up(home, emulator, manifest)
            module = load_dags(home, manifest)
            when = datetime.now(UTC)
            wall, _ = dag_test(module.DAGS["warmup"], 4, when)
            print(f"warm-up (one task of each kind): {wall:.1f} s", file=sys.stderr, flush=True)
            results: dict[str, dict[str, Measured]] = {"import": {}, "replace": {}}
            for action, order in (("import", SIDES), ("replace", SIDES[::-1])):
                if action == "replace":
                    # Each side replaces the tables its own import run made (named after its files).
                    card_ids = {card["CardName"]: card["CardID"] for card in emulator.list_cards()}
                    manifest["replaces"] = {
                        side: [
                            {"card_id": card_ids[Path(made).stem], "file_path": path}
                            for made, path in zip(imports[side], replacements[side], strict=True)
                        ]
                        for side in SIDES
                    }
                    module = load_dags(home, manifest)
                for side in order:
                    when += timedelta(seconds=1)
                    m = run_dag(module, action, side, emulator, when)
                    results[action][side] = m
                    print(m.line(), file=sys.stderr, flush=True)  # kept if a long run is stopped later
    finally:
        shutil.rmtree(home, ignore_errors=True)
    print(f"machine: {machine()}")
    print(
        f"{args.count:,} mapped tasks per DAG run, {args.tables:,} connector tables seeded; one run of each "
        f"(imports: operator first; replaces: bare first) after a warm-up; {time.perf_counter() - started:.0f} s in all"
    )
    rows = report("import", results["import"], args.tables) + report("replace", results["replace"], args.tables)
    print("| case | operator | bare @task | ratio | target | met |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        ratio = "" if row.ratio is None else f"{row.ratio:.2f}x"
        print(f"| {row.case} | {row.ours} | {row.anchor} | {ratio} | {row.target} | {'yes' if row.met else 'NO'} |")
    met = all(row.met for row in rows)
    print("targets: " + ("all met" if met else "MISSED"))
    write_rows(args.json, rows)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
