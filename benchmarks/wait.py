"""Deferred waits: requests per poll interval, coalesced triggers vs per-task polling.

    .venv/bin/python benchmarks/wait.py [--tasks 200] [--interval 0.5] [--seconds 6]

200 DataTablesProcessedTrigger instances wait in one event loop (as in one triggerer)
for tables spread over 2 departments, against the emulator. The anchor is the design of
the Airbyte, dbt Cloud and Databricks triggers: every waiting task polls for itself, one
request per task per interval (run here with the same async client, same tables, same
interval). The emulator counts the requests. Target (issue 5): <= 1 request per department
per interval for the triggers.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _common import Row, machine, write_rows  # noqa: E402

from airflow_tables.emulator.testing import EmulatorProcess  # noqa: E402


def make_tables(emulator: EmulatorProcess, tasks: int, workdir: Path) -> list[tuple[str, str]]:
    """Import ``tasks`` small tables over the two departments; return (project, card) pairs."""
    from airflow_tables.hooks.tables import DataTablesHook

    path = workdir / "bench.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "value"])
        writer.writerows([i, i * i] for i in range(50))
    hook = DataTablesHook()
    projects = [emulator.project_id, emulator.other_project_id]
    return [(projects[i % 2], hook.import_csv(projects[i % 2], path)) for i in range(tasks)]


def list_and_fetch(stats: dict) -> int:
    return sum(1 for r in stats["requests"] if r["method"] == "GET")


async def coalesced(tables: list[tuple[str, str]], interval: float, seconds: float) -> None:
    """Every table waited on by its own trigger, all in this loop, for ``seconds``."""
    from airflow_tables.triggers.tables import DataTablesProcessedTrigger

    deadline = time.time() + seconds
    triggers = [
        DataTablesProcessedTrigger(project_id=p, card_id=c, poll_interval=interval, deadline=deadline)
        for p, c in tables
    ]
    gens = [t.run() for t in triggers]
    events = await asyncio.gather(*(anext(g) for g in gens))
    for g in gens:
        await g.aclose()
    assert {e.payload["status"] for e in events} == {"timeout"}, "tables finished before the measurement ended"


async def per_task(tables: list[tuple[str, str]], interval: float, seconds: float) -> None:
    """The anchor: each task polls its own table every interval."""
    from airflow_tables.hooks.tables import DataTablesHook

    hook = DataTablesHook()
    deadline = time.monotonic() + seconds

    async def one(project: str, card: str) -> None:
        while time.monotonic() < deadline:
            await hook.a_get_card(project, card)
            await asyncio.sleep(interval)

    async with hook.async_client():  # the anchor gets our client's connection reuse too
        await asyncio.gather(*(one(p, c) for p, c in tables))


def main(argv: list[str] | None = None) -> int:
    import logging

    logging.disable(logging.INFO)  # 200 "still being read" lines per interval say nothing here
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--interval", type=float, default=0.5)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--json", help="also write the report's rows here (for run_all.py)")
    args = parser.parse_args(argv)
    os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="airflow-tables-bench-"))
    # The triggerer's poll floor ([datatables] min_poll_interval) would stretch a shorter interval.
    os.environ["AIRFLOW__DATATABLES__MIN_POLL_INTERVAL"] = str(args.interval)
    with tempfile.TemporaryDirectory() as tmp, EmulatorProcess(processing_delay=3600) as emulator:
        os.environ["AIRFLOW_CONN_DATATABLES_DEFAULT"] = json.dumps(
            {"conn_type": "datatables", "host": emulator.base_url, "password": emulator.api_key}
        )
        tables = make_tables(emulator, args.tasks, Path(tmp))
        intervals = args.seconds / args.interval
        print(f"machine: {machine()}")
        print(f"{args.tasks} waits over 2 departments, interval {args.interval} s, {args.seconds} s each")
        results = {}
        for name, design in (("coalesced triggers", coalesced), ("per-task polling (anchor)", per_task)):
            emulator.reset_stats()
            asyncio.run(design(tables, args.interval, args.seconds))
            requests = list_and_fetch(emulator.stats())
            results[name] = requests / intervals / 2
            print(f"{name:<28} {requests:>6} GET requests = {results[name]:7.2f} per department per interval")
        ours, anchor = results["coalesced triggers"], results["per-task polling (anchor)"]
        asked = args.tasks / 2
        print(f"(per-task polling asks for {asked:.0f} per department per interval; the emulator served {anchor:.1f})")
        print(f"ratio: {ours / anchor:.4f} of the anchor's served requests, {ours / asked:.4f} of its demand")
        met = ours <= 1.0 + 1e-9 or ours <= (intervals + 1) / intervals
        print("target (<= 1 request per department per interval): " + ("met" if met else "MISSED"))
        write_rows(
            args.json,
            [
                Row(
                    "deferred waits",
                    f"{args.tasks} triggers, 2 departments, requests per department per interval",
                    f"{ours:.2f}",
                    f"{anchor:.1f} served ({asked:.0f} asked), per-task polling",
                    ours / asked,
                    "",
                    "<= 1",
                    met,
                )
            ],
        )
        return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
