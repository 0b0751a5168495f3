"""The schema check's cost in requests: a replace with ``on_schema_change`` against one without.

    .venv/bin/python benchmarks/replace_requests.py [--repeat 3]

One table in the emulator is replaced by real DAG runs (``dag.test()`` in a throwaway Airflow
home), with the same file, under ``on_schema_change="allow"`` (no check: the anchor) and under
the default ``"allow_new_columns"``. The emulator counts every request by kind. Target (issue 26,
point 4): the check adds one fetch of the table (``GET .../cards/{CardID}``, no credit) and nothing
else: the same lists, the same single import, no other request, the same credits.
``wait_for_completion=False`` keeps the count exact: the wait after the import polls as long as
the reading takes, which has nothing to do with the check.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import os
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _common import Row, airflow_home, machine, write_rows  # noqa: E402

DAGS = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_tables.operators.tables import DataTablesReplaceOperator

DAGS = {}
for policy in ("allow", "allow_new_columns"):
    with DAG(f"bench_replace_{policy}", schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
             params={"file_path": "", "card_id": ""}) as dag:
        DataTablesReplaceOperator(task_id="replace", card_id="{{ params.card_id }}",
            file_path="{{ params.file_path }}", on_schema_change=policy, wait_for_completion=False,
            poll_interval=0.2, timeout=60)
    DAGS[policy] = dag
"""


def kinds(requests: list[dict], card_id: str) -> Counter:
    counted: Counter = Counter()
    for r in requests:
        if r["method"] == "GET" and r["path"].endswith(f"/cards/{card_id}"):
            counted["fetch"] += 1
        elif r["method"] == "GET" and r["path"].endswith("/cards"):
            counted["list"] += 1
        elif r["method"] == "POST" and r["path"].endswith("/data/import"):
            counted["import"] += 1
        else:
            counted["other"] += 1
    return counted


def shown(counted: Counter) -> str:
    return ", ".join(f"{counted[k]} {k}" for k in ("list", "fetch", "import", "other"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", help="also write the report's rows here (for run_all.py)")
    args = parser.parse_args(argv)
    home = airflow_home("bench_replace_requests.py", DAGS)
    from airflow_tables.emulator.testing import EmulatorProcess
    from airflow_tables.hooks.tables import DataTablesHook

    spec = importlib.util.spec_from_file_location("bench_replace_requests", home / "dags" / "bench_replace_requests.py")
    module = importlib.util.module_from_spec(spec)
    with EmulatorProcess() as emulator:
        os.environ["AIRFLOW_CONN_DATATABLES_DEFAULT"] = json.dumps(
            {
                "conn_type": "datatables",
                "host": emulator.base_url,
                "password": emulator.api_key,
                "extra": {"project_id": emulator.project_id},
            }
        )
        spec.loader.exec_module(module)
        path = home / "orders.csv"
        with open(path, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["order_id", "region", "amount"])
            writer.writerows([i, "North", i * 3] for i in range(100))
        card_id = DataTablesHook().import_csv(emulator.project_id, path)
        totals: dict[str, Counter] = {"allow": Counter(), "allow_new_columns": Counter()}
        credits: dict[str, int] = {"allow": 0, "allow_new_columns": 0}
        when = datetime.now(UTC)
        for _ in range(args.repeat):
            for policy in totals:
                emulator.wait_until_processed(emulator.project_id, card_id)
                emulator.reset_stats()
                before = emulator.credits()
                when += timedelta(seconds=1)
                conf = {"file_path": str(path), "card_id": card_id}
                dag_run = module.DAGS[policy].test(run_conf=conf, logical_date=when, run_after=when)
                state = str(dag_run.get_task_instance("replace").state)
                if state != "success":
                    raise RuntimeError(f"the {policy} replace ended {state}")
                totals[policy] += kinds(emulator.stats()["requests"], card_id)
                credits[policy] += before - emulator.credits()
        ours = Counter({k: v / args.repeat for k, v in totals["allow_new_columns"].items()})
        anchor = Counter({k: v / args.repeat for k, v in totals["allow"].items()})
        extra = ours - anchor
        met = (
            extra == Counter({"fetch": 1}) and not (anchor - ours) and credits["allow"] == credits["allow_new_columns"]
        )
        print(f"machine: {machine()}")
        print(f"one replace, mean of {args.repeat}: checked {shown(ours)}; unchecked {shown(anchor)}")
        print(f"credits: checked {credits['allow_new_columns']}, unchecked {credits['allow']}")
        print("target (one fetch more, nothing else): " + ("met" if met else "MISSED"))
        write_rows(
            args.json,
            [
                Row(
                    "replace requests",
                    "one replace, on_schema_change='allow_new_columns' vs 'allow', requests by kind",
                    shown(ours),
                    shown(anchor),
                    sum(ours.values()) / sum(anchor.values()),
                    "",
                    "+1 fetch, nothing else",
                    met,
                )
            ],
        )
        return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
