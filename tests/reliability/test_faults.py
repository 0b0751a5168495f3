"""200 imports through the operator while the service misbehaves: nothing lost, nothing paid twice.

The emulator answers 20 % of requests with 500/502/503, 5 % with 429 and a Retry-After,
drops 5 % of connections after it has done the work (an import that happened but whose
answer never arrives), and delays another 10 % of requests. Waits give up after one
second, so tasks whose looks run into the delays fail mid-wait and are retried. Runs as
one DAG of 200 mapped import tasks with dag.test().
"""

from __future__ import annotations

import csv
from collections import Counter

from tests.operators._runs import run

TASKS = 200


def faults() -> list[dict]:
    """Rules are tried in order, so each probability is conditional on the earlier rules not firing."""
    wanted = [
        ({"status": 500}, 0.20 / 3),
        ({"status": 502}, 0.20 / 3),
        ({"status": 503}, 0.20 / 3),
        ({"status": 429, "retry_after": 0.05}, 0.05),
        ({"drop": "after"}, 0.05),
        ({"latency": 0.4}, 0.10),
    ]
    rules, left = [], 1.0
    for rule, share in wanted:
        rules.append({**rule, "probability": share / left})
        left -= share
    return rules


def test_two_hundred_imports_under_faults(dags_module, datatables_conn, tmp_path):
    emulator = datatables_conn
    for i in range(TASKS):
        with open(tmp_path / f"fault_{i:03d}.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["id", "task", "value"])
            writer.writerows([r, i, r * i] for r in range(i % 7 + 1))
    before = {c["CardID"] for c in emulator.list_cards()}
    credits = emulator.credits()
    emulator.reset_stats()
    emulator.set_processing_delay(0.1)
    emulator.set_faults(faults(), seed=7)
    try:
        dag_run = run(dags_module, "dt_fault_suite", file_path=str(tmp_path))
        injected = Counter(r["fault"] for r in emulator.stats()["requests"] if r["fault"])
    finally:
        emulator.clear_faults()

    imports = [ti for ti in dag_run.get_task_instances() if ti.task_id == "import"]
    assert len(imports) == TASKS
    states = Counter(str(ti.state) for ti in imports)
    retried = sum(1 for ti in imports if ti.try_number > 1)
    print(f"faults injected: {dict(injected)}; task states: {dict(states)}; retried tasks: {retried}")
    assert sum(injected.values()) > TASKS  # the faults really happened
    assert retried > 0

    from tests.operators._runs import xcom_all

    returned = xcom_all(dag_run, "import")  # map index -> CardID of each successful task
    tables = {c["CardID"]: c for c in emulator.list_cards() if c["CardID"] not in before}

    # Every table that exists belongs to exactly one successful task...
    assert sorted(returned.values()) == sorted(tables), "a table without its task, or a task without its table"
    assert len(set(returned.values())) == len(returned)
    # ...credits spent equal tables created...
    assert credits - emulator.credits() == len(tables)
    # ...no task succeeded without its table being ready...
    succeeded = {ti.map_index for ti in imports if str(ti.state) == "success"}
    assert succeeded == set(returned)
    for map_index, card_id in returned.items():
        table = tables[card_id]
        assert table["Processed"] is True and table["SuccessfulUpload"] is True
        assert table["CardName"] == f"fault_{map_index:03d}"
    # ...and every task succeeded in the end (six retries are plenty at these rates).
    assert states == Counter({"success": TASKS})
