"""The provider on a distributed Airflow under faults: CeleryExecutor, two workers, two triggerers.

One run of ``e2e_distributed_import`` (``dags_distributed/``) imports 40 files (every second one from
an S3 bucket, the others from a shared directory), 30 into
one department and 10 into another (whose tasks and deferred waits use a queue of their
own), with the import operator mapped, deferrable and retried. While it runs:

1. worker-1's answers to imports are held back at its wire tap; once the service has
   imported at least two files whose answers worker-1 is still waiting for, worker-1 and
   every process under it (its task processes are in process groups of their own) are
   SIGKILLed, then it is started again. The scheduler fails the killed tries for their
   missing heartbeats; their retries must adopt the tables already made, not pay again.
2. Once both triggerers have polled for a few intervals, triggerer-1 (with everything under
   it) is SIGKILLed while tasks wait in it; triggerer-2 must take its waits over.

Afterwards every mapped task succeeded, the service holds exactly one table per file,
and the credits spent equal the files. Measured on the way, from the triggerers' wire
taps: list requests per department per poll interval with two triggerers (the default
queue's department is waited on in both, the other in one), and after the kill (one).
The figures are printed and written to ``artifacts/e2e/logs/distributed/figures.json``;
the component logs stay in ``artifacts/e2e/logs/distributed/``.

Then, on the same stack, ``e2e_distributed_budget`` imports 12 files, mapped over both workers,
into a third department whose ``[datatables] credit_budget`` is 5: exactly 5 are sent, the
others fail without retry naming the budget, and the Data Tables page reports it spent.
"""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from tests._s3 import S3Server

from .distributed import DISTRIBUTED_LOGS, CeleryStack, Killed, Redis, WireTap
from .harness import AirflowApi, Postgres, StackError, wait_until

if TYPE_CHECKING:
    from airflow_tables.emulator.testing import EmulatorProcess

HERE = Path(__file__).resolve().parent
DAG_ID = "e2e_distributed_import"
TEST_FILES, OTHER_FILES = 30, 10
POLL_INTERVAL = 3.0  # the DAG's poll_interval
OTHER_QUEUE = "datatables-other"
#: Long enough that waits outlast the import phase, both faults and a few measured intervals.
PROCESSING_DELAY = 60.0
HOLD = 10.0  # seconds worker-1's import answers are held before the kill
MEASURED_INTERVALS = 3
WORKERS = {"worker-1": ["default", OTHER_QUEUE], "worker-2": ["default", OTHER_QUEUE]}
TRIGGERERS = {"triggerer-1": ["default"], "triggerer-2": ["default", OTHER_QUEUE]}
#: Each triggerer takes every unassigned trigger it may (about once a second): a burst of deferrals
#: (40 waits in about a second on a fast machine) went to triggerer-2 alone, and triggerer-1 had
#: nothing to lose when killed. Held to the other department's waits and two thirds of the test
#: department's, triggerer-2 leaves triggerer-1 at least a third of them; the other department's
#: tasks weigh more (the DAG's priority_weight), so their waits come first into triggerer-2's room.
CAPACITIES = {"triggerer-2": OTHER_FILES + 2 * TEST_FILES // 3}
#: A third department, with a credit budget smaller than the files its run imports (the others have none).
BUDGET_DAG, BUDGET_DEPARTMENT, BUDGET, BUDGET_FILES = "e2e_distributed_budget", "PRJ-budget", 5, 12

pytestmark = pytest.mark.timeout(1200)


# -- where the files come from --------------------------------------------------------------


@dataclass
class SharedDirectory:
    """Files in a directory every worker reads (here all processes share one machine; elsewhere a mount)."""

    root: Path
    name: str = "shared-dir"

    def put(self, name: str, data: bytes) -> str:
        path = self.root / name
        path.write_bytes(data)
        return str(path)

    def component_env(self) -> dict[str, str]:
        return {}


@dataclass
class S3Bucket:
    """Files in an S3 bucket (moto's server on loopback), reached through an ``aws`` connection on every component."""

    server: S3Server
    bucket: str = "landing"
    conn_id: str = "aws_e2e"
    name: str = "s3"

    def put(self, name: str, data: bytes) -> str:
        self.server.put(self.bucket, name, data)
        return f"s3://{self.conn_id}@{self.bucket}/{name}"

    def component_env(self) -> dict[str, str]:
        return dict([self.server.connection_env(self.conn_id)])


@dataclass
class EverySecondFile:
    """Both places at once, alternating file by file, so one run imports from each (and mixes them in a department)."""

    places: tuple[SharedDirectory, S3Bucket]

    @property
    def name(self) -> str:
        return " + ".join(place.name for place in self.places)

    def __post_init__(self) -> None:
        self.counts = Counter[str]()

    def put(self, name: str, data: bytes) -> str:
        place = self.places[sum(self.counts.values()) % len(self.places)]
        self.counts[place.name] += 1
        return place.put(name, data)

    def component_env(self) -> dict[str, str]:
        return {key: value for place in self.places for key, value in place.component_env().items()}


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    with S3Server() as s3:
        s3.create_bucket(S3Bucket.bucket)
        yield EverySecondFile((SharedDirectory(tmp_path_factory.mktemp("shared-files")), S3Bucket(s3)))


# -- the stack ------------------------------------------------------------------------------


@dataclass
class Distributed:
    stack: CeleryStack
    api: AirflowApi
    emulator: EmulatorProcess
    taps: dict[str, WireTap]


@pytest.fixture(scope="module")
def distributed(system_deps, e2e_marker, source, request):
    from airflow_tables.emulator.testing import EmulatorProcess, make_test_config

    failures_before = request.session.testsfailed
    shutil.rmtree(DISTRIBUTED_LOGS, ignore_errors=True)
    DISTRIBUTED_LOGS.mkdir(parents=True, exist_ok=True)
    data_dir = DISTRIBUTED_LOGS / "emulator"
    postgres = Postgres(e2e_marker, log_dir=DISTRIBUTED_LOGS)
    redis = Redis(e2e_marker)
    config = make_test_config()
    config["departments"][BUDGET_DEPARTMENT] = {"name": "Budgeted department", "domain": "Testing"}
    config["api_keys"][0]["manage"].append(BUDGET_DEPARTMENT)
    emulator = EmulatorProcess(data_dir, config=config, processing_delay=PROCESSING_DELAY)
    taps: dict[str, WireTap] = {}
    stack: CeleryStack | None = None
    try:
        postgres.start()
        redis.start()
        emulator.start()
        taps = {name: WireTap(name, emulator.port) for name in (*WORKERS, *TRIGGERERS)}
        connection = {
            "conn_type": "datatables",
            "host": emulator.base_url,
            "password": emulator.api_key,
            "extra": {"project_id": emulator.project_id},
        }
        env = {
            "AIRFLOW_CONN_DATATABLES_DEFAULT": json.dumps(connection),
            "AIRFLOW__DATATABLES__CREDIT_BUDGET": json.dumps({BUDGET_DEPARTMENT: BUDGET}),
            **source.component_env(),
        }
        stack = CeleryStack(
            postgres,
            redis,
            HERE / "dags_distributed",
            marker=e2e_marker,
            workers=WORKERS,
            triggerers=TRIGGERERS,
            capacities=CAPACITIES,
            connection=connection,
            taps={name: tap.url for name, tap in taps.items()},
            extra_env=env,
        )
        try:
            stack.start()
        except StackError as err:
            raise StackError(f"{err}\n{stack.log_tails()}") from err
        yield Distributed(stack, AirflowApi(stack.base_url, token=stack.token), emulator, taps)
    finally:
        if stack is not None:
            if request.session.testsfailed > failures_before:
                print(f"\ndistributed e2e: component logs kept in {DISTRIBUTED_LOGS}")
            stack.stop()
        for tap in taps.values():
            tap.close()
        emulator.stop()
        redis.stop()
        postgres.stop()


# -- helpers --------------------------------------------------------------------------------


def write_csv(index: int, department: str) -> bytes:
    rows = [["id", "department", "value"], *[[r, department, r * index] for r in range(index % 5 + 2)]]
    lines = [",".join(str(v) for v in row) for row in rows]
    return ("\r\n".join(lines) + "\r\n").encode()


def listings(tap: WireTap, department: str, since: float, until: float | None = None) -> int:
    until = time.monotonic() if until is None else until
    return sum(1 for r in tap.snapshot() if r.is_listing and r.department == department and since <= r.at < until)


def deferred_count(api: AirflowApi, run_id: str) -> int:
    return sum(1 for ti in all_task_instances(api, run_id) if ti.get("state") == "deferred")


def all_task_instances(api: AirflowApi, run_id: str) -> list[dict]:
    tis: list[dict] = []
    while True:
        page = api.get(
            f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances", params={"limit": 100, "offset": len(tis)}
        )["task_instances"]
        tis += page
        if len(page) < 100:
            return tis


def query(stack: CeleryStack, sql: str, *args) -> list[tuple]:
    import psycopg2

    conn = psycopg2.connect(
        host="127.0.0.1", port=stack.postgres.port, user="postgres", dbname="airflow", connect_timeout=5
    )
    try:
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall()
    finally:
        conn.close()


def still_running(stack: CeleryStack, api: AirflowApi, run_id: str) -> None:
    """Raise when a component died or the run ended before a fault could be injected (stops a wait)."""
    stack.check_alive()
    state = api.dag_run(DAG_ID, run_id)["state"]
    if state in ("failed", "success"):
        raise StackError(f"the run ended ({state}) before the fault could be injected")


# -- the test -------------------------------------------------------------------------------


def test_distributed_import_survives_a_killed_worker_and_a_killed_triggerer(distributed, source):
    stack, api, emulator, taps = distributed.stack, distributed.api, distributed.emulator, distributed.taps
    departments = {"test": emulator.project_id, "other": emulator.other_project_id}
    counts = {"test": TEST_FILES, "other": OTHER_FILES}
    files = {
        kind: {f"dist_{kind}_{i:02d}": source.put(f"dist_{kind}_{i:02d}.csv", write_csv(i, kind)) for i in range(n)}
        for kind, n in counts.items()
    }
    assert all(source.counts[place.name] >= 15 for place in source.places), source.counts
    credits_before = emulator.credits()

    api.wait_for_dag(DAG_ID, timeout=180, check=stack.check_alive)
    api.unpause(DAG_ID)
    taps["worker-1"].hold_imports(HOLD)
    conf = {
        "test_files": list(files["test"].values()),
        "other_files": list(files["other"].values()),
        "test_project": departments["test"],
        "other_project": departments["other"],
    }
    started = time.monotonic()
    run_id = api.trigger(DAG_ID, conf=conf)

    # Fault 1: worker-1 dies, with everything under it, while the service holds imports it sent.
    def running() -> None:
        still_running(stack, api, run_id)

    def two_answers_held() -> bool:
        return len(taps["worker-1"].held()) >= 2

    wait_until(two_answers_held, 300, "worker-1 to have two import answers in flight", 0.2, running)
    lost = [r.card_id for r in taps["worker-1"].held()]
    worker_kill: Killed = stack.kill("worker-1")
    worker_killed_at = time.monotonic() - started
    taps["worker-1"].hold_imports(0)
    stack.restart("worker-1")

    # Fault 2, and the measurement before it: both triggerers polling, then triggerer-1 dies.
    window = MEASURED_INTERVALS * POLL_INTERVAL

    def both_triggerers_polling() -> bool:
        since = time.monotonic() - window
        return (
            listings(taps["triggerer-1"], departments["test"], since) >= MEASURED_INTERVALS
            and listings(taps["triggerer-2"], departments["test"], since) >= MEASURED_INTERVALS
            and listings(taps["triggerer-2"], departments["other"], since) >= MEASURED_INTERVALS
        )

    wait_until(both_triggerers_polling, 300, "both triggerers to poll both departments", 0.2, running)
    triggers_before = dict(query(stack, "SELECT id, triggerer_id FROM trigger"))
    deferred_at_kill = deferred_count(api, run_id)
    killed_at = time.monotonic()
    triggerer_kill = stack.kill("triggerer-1")
    before = {
        name: {dept: listings(tap, dept, killed_at - window, killed_at) for dept in departments.values()}
        for name, tap in taps.items()
        if name.startswith("triggerer")
    }

    # Which triggerer job died: the one whose heartbeat stops. Its waits must move to the other.
    def dead_triggerer_job():
        rows = query(
            stack,
            "SELECT id, EXTRACT(EPOCH FROM (now() - latest_heartbeat)) FROM job "
            "WHERE job_type = 'TriggererJob' AND state = 'running'",
        )
        stale = [job_id for job_id, age in rows if age > 8]
        return stale[0] if len(rows) == 2 and len(stale) == 1 else None

    dead_job = wait_until(dead_triggerer_job, 60, "triggerer-1's heartbeat to go stale", 0.5)
    orphaned = {trigger for trigger, job in triggers_before.items() if job == dead_job}
    assert orphaned, f"triggerer-1 held no trigger when it was killed: {triggers_before}"

    def orphans_adopted():
        rows = dict(query(stack, "SELECT id, triggerer_id FROM trigger"))
        return all(rows.get(trigger) != dead_job for trigger in orphaned)

    wait_until(orphans_adopted, 120, "triggerer-2 to take over triggerer-1's waits", 0.5, stack.check_alive)
    adopted_at = time.monotonic()

    state = api.wait_for_run(DAG_ID, run_id, timeout=900, interval=2.0, check=stack.check_alive)
    took = time.monotonic() - started
    report = api.run_report(DAG_ID, run_id)
    assert state == "success", report

    # Every mapped task succeeded.
    tis = [ti for ti in all_task_instances(api, run_id) if ti["task_id"] in ("import_test", "import_other")]
    states = Counter(ti["state"] for ti in tis)
    assert states == Counter({"success": TEST_FILES + OTHER_FILES}), f"{states}\n{report}"
    retried = sorted(f"{ti['task_id']}[{ti['map_index']}]" for ti in tis if ti["try_number"] > 1)

    # Exactly one table per file in each department, each the one its task returned; credits = files.
    returned = {}
    for ti in tis:
        returned[(ti["task_id"], ti["map_index"])] = api.xcom(DAG_ID, run_id, ti["task_id"], map_index=ti["map_index"])
    for kind, department in departments.items():
        cards = [c for c in emulator.list_cards(department) if c["CardName"].startswith(f"dist_{kind}_")]
        names = Counter(c["CardName"] for c in cards)
        assert names == Counter(dict.fromkeys(files[kind], 1)), f"{kind}: tables per file {names}"
        assert all(c["Processed"] and c["SuccessfulUpload"] for c in cards), cards
        mine = {v for (task, _), v in returned.items() if task == f"import_{kind}"}
        assert mine == {c["CardID"] for c in cards}, f"{kind}: tasks returned {mine}"
    spent = credits_before - emulator.credits()
    assert spent == TEST_FILES + OTHER_FILES, f"credits spent {spent} for {TEST_FILES + OTHER_FILES} files"

    # The imports whose answers died with worker-1 were adopted by the retries, not paid again.
    assert all(lost), f"a held answer without a CardID: {lost}"
    assert set(lost) <= set(returned.values()), f"lost answers {lost} not adopted: {returned}"
    assert len(retried) >= len(lost), f"retried {retried}, lost answers {lost}"
    assert worker_kill.other_groups, f"no task process outside worker-1's process group among {worker_kill.pids}"
    task_logs = DISTRIBUTED_LOGS / "tasks" / f"dag_id={DAG_ID}"
    adopted = [log for log in task_logs.rglob("attempt=*.log") if "reached the service as" in log.read_text()]
    assert len(adopted) >= len(lost), f"{len(lost)} answers lost, {len(adopted)} retries adopted their tables"

    # Waiting stays coalesced: one listing per department per interval in each triggerer that waits in it.
    rate = {name: {dept: n / MEASURED_INTERVALS for dept, n in per.items()} for name, per in before.items()}
    after = {
        dept: listings(taps["triggerer-2"], dept, adopted_at, adopted_at + window) for dept in departments.values()
    }
    figures = {
        "source": source.name,
        "files_by_source": dict(source.counts),
        "files": TEST_FILES + OTHER_FILES,
        "mapped_tasks_succeeded": states["success"],
        "tables_per_file": 1,
        "credits_spent": spent,
        "retried_tasks": len(retried),
        "worker_kill": {
            "after_s": round(worker_killed_at, 1),
            "processes_killed": len(worker_kill.pids),
            "outside_worker_group": len(worker_kill.other_groups),
            "import_answers_lost": len(lost),
            "tables_adopted_by_retries": len(adopted),
        },
        "triggerer_kill": {
            "processes_killed": len(triggerer_kill.pids),
            "deferred_tasks_at_kill": deferred_at_kill,
            "waits_moved": len(orphaned),
        },
        "poll_interval_s": POLL_INTERVAL,
        "lists_per_interval_two_triggerers": {
            f"{dept} ({'own queue' if dept == departments['other'] else 'default queue'})": round(
                sum(rate[name][dept] for name in rate), 2
            )
            for dept in departments.values()
        },
        "lists_per_interval_by_triggerer": rate,
        "lists_per_interval_after_triggerer_kill": {
            dept: round(n / MEASURED_INTERVALS, 2) for dept, n in after.items()
        },
        "run_seconds": round(took, 1),
    }
    (DISTRIBUTED_LOGS / "figures.json").write_text(json.dumps(figures, indent=2))
    print(f"\ndistributed e2e figures: {json.dumps(figures, indent=2)}")

    for name, per in rate.items():
        for dept, value in per.items():
            assert value <= 1.34, f"{name} listed {dept} {value} times per interval: {rate}"
    assert rate["triggerer-1"][departments["other"]] == 0, "the other department's waits left their queue"


def test_a_credit_budget_holds_across_two_celery_workers(distributed, source):
    """12 mapped imports race on two workers into a department budgeted 5 credits a day: 5 are sent, 7 refused.

    Each worker's task claims its credit through the api-server (the workers have no database); the
    refused ones fail without retry, naming the budget; the page reports the budget spent.
    """
    stack, api, emulator = distributed.stack, distributed.api, distributed.emulator
    files = [source.put(f"budget_{i:02d}.csv", write_csv(i, "budget")) for i in range(BUDGET_FILES)]
    credits_before = emulator.credits()
    api.wait_for_dag(BUDGET_DAG, timeout=180, check=stack.check_alive)
    api.unpause(BUDGET_DAG)
    run_id = api.trigger(BUDGET_DAG, conf={"files": files, "project": BUDGET_DEPARTMENT})
    api.wait_for_run(BUDGET_DAG, run_id, timeout=600, interval=2.0, check=stack.check_alive)

    tis = [
        ti
        for ti in api.get(f"/api/v2/dags/{BUDGET_DAG}/dagRuns/{run_id}/taskInstances", params={"limit": 100})[
            "task_instances"
        ]
        if ti["task_id"] == "import_budget"
    ]
    states = Counter(ti["state"] for ti in tis)
    assert states == Counter({"success": BUDGET, "failed": BUDGET_FILES - BUDGET}), states
    assert all(ti["try_number"] == 1 for ti in tis), [(ti["map_index"], ti["try_number"]) for ti in tis]
    assert credits_before - emulator.credits() == BUDGET
    made = [c for c in emulator.list_cards(BUDGET_DEPARTMENT) if c["CardName"].startswith("budget_")]
    assert len(made) == BUDGET
    task_logs = DISTRIBUTED_LOGS / "tasks" / f"dag_id={BUDGET_DAG}"
    said = f"the credit budget of department {BUDGET_DEPARTMENT} is {BUDGET} a day"
    refusals = [log for log in task_logs.rglob("attempt=*.log") if said in log.read_text()]
    assert len(refusals) == BUDGET_FILES - BUDGET, [str(log) for log in refusals]
    page = api.get("/datatables/api/tables", params={"conn_id": "datatables_default", "project_id": BUDGET_DEPARTMENT})
    credits = page["credits"]
    assert (credits["budget"], credits["budget_spent"], credits["budget_left"]) == (BUDGET, BUDGET, 0), credits
