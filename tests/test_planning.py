"""``airflow-tables plan``, run as users run it (the venv's script, in a process of its own), against the emulator.

The command reads what the session's fixtures set up: AIRFLOW_HOME (its dags folder holds
tests/operators/dags, its metadata DB is migrated) and the ``datatables_default`` connection of
``datatables_conn``, both inherited through the environment. Each plan is then checked against a
real run (dag.test()) of the same DAG with the same conf and logical date: the same decisions,
the same credits. During a plan only GETs reach the service and no credit is spent.

Each invocation loads Airflow (seconds): one DAG, ``pl_outcomes`` (tests/operators/dags/plan_test_dags.py),
holds a task for each decision, so that two plans of it (text, JSON) cover them all.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.operators import test_schema_change
from tests.operators._runs import orders_csv, run, state, xcom, xcom_all
from tests.operators.test_dry_run import (
    ORDERS,
    decisions_match,
    ended_as_expected,
    mapped_files,
    outcomes_scenario,
    paid_requests,
    ready_table,
    table_of,
    write_csv,
)
from tests.operators.test_dry_run import pl_dags as pl_dags  # noqa: PLC0414 - the fixture, shared
from tests.operators.test_schema_change import sw_dags as sw_dags  # noqa: PLC0414 - the fixture, shared
from tests.operators.test_schema_change import (  # noqa: F401 - an autouse fixture (Airflow < 3.3's triggerer)
    triggerer_answers_hitl_requests,
)
from tests.operators.test_unfinished import CUTS, cut_file

PLAN = Path(sys.executable).with_name("airflow-tables")
pytestmark = pytest.mark.timeout(600)  # the approval's run waits for its answer


def plan(dag_id: str, *args: str) -> subprocess.CompletedProcess:
    """``airflow-tables plan DAG_ID ARGS...`` in a process of its own, with the test's environment."""
    return subprocess.run(
        [str(PLAN), "plan", dag_id, *args], capture_output=True, text=True, env=dict(os.environ), timeout=300
    )


def planned(dag_id: str, *args: str, exit_status: int = 0) -> dict:
    """The plan's JSON (``--json``), once the command exited with ``exit_status``."""
    done = plan(dag_id, "--json", *args)
    assert done.returncode == exit_status, done.stderr[-3000:]
    return json.loads(done.stdout)


def by_task(found: dict) -> dict[tuple[str, int | None], dict]:
    return {(t["task_id"], t["map_index"]): t for t in found["tasks"]}


def only_free_requests(emulator) -> None:
    """Since the last ``reset_stats``: some requests reached the service, and every one was a GET."""
    requests = emulator.stats()["requests"]
    assert requests and {r["method"] for r in requests} == {"GET"}
    assert paid_requests(emulator) == []


def test_a_plan_of_every_outcome_is_what_the_run_then_does(pl_dags, datatables_conn, tmp_path):
    emulator = datatables_conn
    scenario = outcomes_scenario(pl_dags, emulator, tmp_path)
    conf, when = json.dumps(scenario.conf), scenario.logical_date.isoformat()
    rejects = tmp_path / "ragged.rejects.csv"
    emulator.reset_stats()
    credits = emulator.credits()

    found = planned("pl_outcomes", "--logical-date", when, "--conf", conf, exit_status=1)
    assert (found["dag_id"], found["run_id"], found["logical_date"]) == ("pl_outcomes", f"manual__{when}", when)
    decisions_match(by_task(found), scenario)
    assert found["credits"] == scenario.credits == 6
    assert found["credits_by_department"] == {emulator.project_id: 5, emulator.other_project_id: 1}
    assert found["refused"] is True
    only_free_requests(emulator)
    assert emulator.credits() == credits
    assert table_of(emulator, scenario.conf["delete_card"]) is not None
    assert len(rejects.read_text().splitlines()) == 2  # the quarantine's rejects file: a header and the bad row

    text = plan("pl_outcomes", "--logical-date", when, "--conf", conf)
    assert text.returncode == 1, text.stderr[-3000:]
    lines = text.stdout.splitlines()
    assert lines[0] == f"Plan of DAG pl_outcomes, run manual__{when} (logical date {when}):"
    task_rows = [line for line in lines[1:] if line.startswith("  ") and line[2] != " "]  # further in: a reason's
    rows = {line.split()[0]: line.split(None, 4)[1:] for line in task_rows}
    assert rows["create"][:3] == ["create", "1", "credit"]
    assert rows["unchanged"][:3] == ["skip", "0", "credits"]
    assert rows["delete"][:3] == ["delete", "0", "credits"]
    assert rows["schema"][:3] == ["refuse", "0", "credits"]
    assert [name for name in rows if name.startswith("mapped")] == ["mapped[0]", "mapped[1]"]
    assert len(rows) == len(scenario.expected)
    invalid = next(line for line in task_rows if line.startswith("  invalid "))
    problem = lines[lines.index(invalid) + 1]  # the validation report's problem, under the reason it belongs to
    column = invalid.index(scenario.conf["bad_file"])  # where the reason starts
    assert problem.startswith(" " * column + "  - line 4 (record 4): 1 row does not have the header's 4 fields")
    assert lines[-2:] == [
        f"Total: 6 credits ({emulator.other_project_id}: 1, {emulator.project_id}: 5)",
        "4 task(s) would be refused: the run would fail there.",
    ]
    only_free_requests(emulator)
    assert emulator.credits() == credits

    real = run(pl_dags, "pl_outcomes", logical_date=scenario.logical_date, **scenario.conf)
    ended_as_expected(real, scenario)
    assert credits - emulator.credits() == found["credits"]
    made = xcom(real, "create")
    assert table_of(emulator, made)["CardName"] == f"orders_{scenario.logical_date:%Y%m%d}"
    assert table_of(emulator, xcom(real, "create_other"), emulator.other_project_id) is not None
    assert table_of(emulator, scenario.conf["delete_card"]) is None


def test_what_only_the_run_learns_is_unknown_and_not_counted(pl_dags, datatables_conn, tmp_path):
    emulator = datatables_conn
    directory = tmp_path / "mapped"
    directory.mkdir()
    for name, rows in (("a.csv", 3), ("b.csv", 4)):
        orders_csv(directory, name, rows=rows)
    conf = {"dir": str(directory), "file_path": str(orders_csv(tmp_path, "pulled.csv", rows=5))}
    emulator.reset_stats()
    credits = emulator.credits()

    text = plan("pl_upstream", "--conf", json.dumps(conf))  # no logical date: now
    assert text.returncode == 0, text.stderr[-3000:]
    lines = text.stdout.splitlines()
    assert lines[0].startswith("Plan of DAG pl_upstream, run manual__")
    assert lines[1].split(None, 2)[:2] == ["mapped", "unknown"]
    assert "needs the result of listed, known only once the run has it (it is mapped over it)" in lines[1]
    assert lines[2].split(None, 2)[:2] == ["pulled", "unknown"]
    assert "needs the result of where, known only once the run has it" in lines[2]
    assert lines[3:] == ["Total: 0 credits", "2 task(s) depend on what the run learns first: not counted."]
    assert emulator.stats()["requests"] == []  # nothing was looked at either: there was nothing to decide
    assert emulator.credits() == credits

    real = run(pl_dags, "pl_upstream", **conf)
    assert {str(ti.state) for ti in real.get_task_instances()} == {"success"}
    assert credits - emulator.credits() == 3
    assert table_of(emulator, xcom(real, "pulled"))["Rows"] == 5
    assert len(xcom_all(real, "mapped")) == 2


def test_a_file_still_being_written_is_unknown_not_refused(pl_dags, datatables_conn, tmp_path):
    """A cut last record written moments ago: the run would retry, so the plan decides nothing and counts nothing."""
    path, _ = cut_file(tmp_path, CUTS["inside a quote"])
    datatables_conn.reset_stats()

    found = planned("pl_import", "--conf", json.dumps({"file_path": str(path)}))

    (task,) = found["tasks"]
    assert (task["task_id"], task["action"], task["credits"]) == ("import", "unknown", None)
    assert f"{path} looks still being written" in task["reason"] and "retries read it again" in task["reason"]
    assert found["credits"] == 0 and found["refused"] is False
    assert paid_requests(datatables_conn) == []


def test_a_plan_names_the_approval_a_replace_waits_for_then_the_approved_run_pays_it(
    pl_dags, sw_dags, datatables_conn, tmp_path, caplog, capfd
):
    emulator = datatables_conn
    card_id = ready_table(emulator, orders_csv(tmp_path, "orders.csv", rows=20))
    path = write_csv(tmp_path / "narrow.csv", ORDERS[:3], [[1, "North", 10]])
    emulator.reset_stats()
    credits = emulator.credits()

    found = planned("pl_approve", "--conf", json.dumps({"file_path": str(path), "card_id": card_id}))
    (task,) = found["tasks"]
    assert (task["task_id"], task["action"], task["card_id"], task["credits"]) == ("replace", "replace", card_id, 1)
    assert "once a person approves the schema change: note: removed" in task["reason"]
    assert (found["credits"], found["refused"]) == (1, False)
    only_free_requests(emulator)

    real, form, _ = test_schema_change.answered(pl_dags, "pl_approve", card_id, path, "Approve", caplog, capfd)
    assert "`note: removed`" in form["body"]
    assert state(real, "replace") == "success"
    assert credits - emulator.credits() == found["credits"]
    emulator.wait_until_processed(emulator.project_id, card_id)
    assert table_of(emulator, card_id)["Rows"] == 1


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--conf", "[1]"], "argument --conf: a JSON object, not list"),
        (["--conf", "{"], "argument --conf: not JSON"),
        (["--logical-date", "yesterday"], "argument --logical-date: 'yesterday' is not an ISO 8601 date"),
    ],
    ids=["conf-not-object", "conf-not-json", "date"],
)
def test_a_wrong_argument_is_a_usage_error(args, says):
    done = plan("pl_outcomes", *args)
    assert done.returncode == 2 and says in done.stderr and done.stdout == ""


def test_a_plan_spends_what_the_budget_has_left_and_refuses_past_it(pl_dags, datatables_conn, tmp_path, monkeypatch):
    """Budget 2, one credit claimed by a run: the plan of two mapped imports sends one and refuses the other."""
    emulator = datatables_conn
    monkeypatch.setenv("AIRFLOW__DATATABLES__CREDIT_BUDGET", json.dumps({emulator.project_id: 2, "*": 100}))
    spent = run(pl_dags, "pl_import", file_path=str(orders_csv(tmp_path, "spent_first.csv")))
    assert state(spent, "import") == "success"
    directory = mapped_files(tmp_path / "mapped")
    emulator.reset_stats()
    credits = emulator.credits()

    found = planned("pl_mapped", "--conf", json.dumps({"dir": str(directory)}), exit_status=1)
    tasks = by_task(found)
    assert (tasks["import", 0]["action"], tasks["import", 0]["credits"]) == ("create", 1)
    refused = tasks["import", 1]
    assert (refused["action"], refused["credits"]) == ("refuse", 0)
    assert f"the credit budget of department {emulator.project_id} would be spent" in refused["reason"]
    assert (found["credits"], found["refused"]) == (1, True)
    assert emulator.credits() == credits and paid_requests(emulator) == []

    real = run(pl_dags, "pl_mapped", dir=str(directory))
    ended = sorted(str(ti.state) for ti in real.get_task_instances() if ti.task_id == "import")
    assert ended == ["failed", "success"]  # the run sends one and refuses the other, as planned
    assert credits - emulator.credits() == found["credits"]
