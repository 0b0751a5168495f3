"""Dry runs (``dry_run=True``, ``[datatables] dry_run``) in real DAG runs (dag.test()) against the emulator.

A dry run pushes its decision to XCom ``plan`` and sends nothing: only GETs reach the service,
no credit is spent, no table changes, no asset event is recorded; the task ends as the real run
would (succeeded, or failed or skipped for a refusal or a hold). Each test then runs the same
DAG for real (the ``_dry`` twin's original, tests/operators/dags/plan_test_dags.py) and checks
that it did what the dry run said, at the credits it said.

:func:`outcomes_scenario` sets up ``pl_outcomes``, one task per decision, for this file's
deployment-wide dry run and for tests/test_planning.py's plan of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from tests._dag_files import imported
from tests.operators._runs import import_table, orders_csv, run, state, xcom, xcom_all
from tests.operators.test_schema_change import write_csv
from tests.operators.test_unfinished import CUTS, cut_file

#: The real run that holds ``held_card`` (now) is newer than the scenario's run (ten days ago).
OLD = (datetime.now(UTC) - timedelta(days=10)).replace(microsecond=0)
GONE = "CRD-00000000-0000-4000-8000-00000000dead"
ORDERS = ["order_id", "region", "amount", "note"]


@pytest.fixture(scope="module")
def pl_dags(dags_module):
    """tests/operators/dags/plan_test_dags.py, as installed in Airflow's dags folder by ``dags_module``."""
    return imported("plan_test_dags.py")


# -- what the emulator and Airflow saw ---------------------------------------------------------------------


def paid_requests(emulator) -> list[dict]:
    """Every request since the last ``reset_stats`` that is not a free look (a GET): imports, deletes."""
    return [r for r in emulator.stats()["requests"] if r["method"] != "GET"]


def asset_events() -> int:
    """How many asset events Airflow has recorded, on any asset (a new table's asset has no name yet)."""
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session
    from sqlalchemy import func, select

    with create_session() as session:
        return session.scalar(select(func.count()).select_from(AssetEvent))


def table_of(emulator, card_id: str, project_id: str | None = None) -> dict | None:
    return next((c for c in emulator.list_cards(project_id) if c["CardID"] == card_id), None)


def ready_table(emulator, path: Path) -> str:
    card_id = import_table(emulator, path)
    emulator.wait_until_processed(emulator.project_id, card_id)
    return card_id


def ragged_csv(path: Path) -> Path:
    """Five orders, the third of which has a field too many: refused whole, or set aside in a quarantine."""
    rows: list[list[Any]] = [[i, "North", 10 + i, ""] for i in range(1, 6)]
    rows[2].append("extra")
    return write_csv(path, ORDERS, rows)


def mapped_files(directory: Path) -> Path:
    directory.mkdir(exist_ok=True)
    orders_csv(directory, "a.csv", rows=3)
    orders_csv(directory, "b.csv", rows=4)
    return directory


def quiet_from_now(emulator) -> dict:
    """The emulator's request log emptied; the credits and Airflow's asset events as they are now."""
    emulator.reset_stats()
    return {"credits": emulator.credits(), "events": asset_events()}


@pytest.fixture
def quiet(datatables_conn):
    return quiet_from_now(datatables_conn)


def assert_dry(emulator, quiet: dict, *, looked: bool = True) -> None:
    """Since ``quiet``: only free looks (some, when ``looked``; a new table needs none), no credit, no asset event."""
    assert paid_requests(emulator) == []
    assert bool([r for r in emulator.stats()["requests"] if r["method"] == "GET"]) is looked
    assert emulator.credits() == quiet["credits"]
    assert asset_events() == quiet["events"]


# -- the four operators' dry runs, then the real runs ---------------------------------------------------------


def test_a_dry_import_decides_a_new_table_and_the_real_run_makes_it(pl_dags, datatables_conn, quiet, tmp_path):
    emulator = datatables_conn
    path = orders_csv(tmp_path, "daily.csv", rows=6)
    dry = run(pl_dags, "pl_import_dry", file_path=str(path))
    assert state(dry, "import") == "success"
    plan = xcom(dry, "import", "plan")
    assert {k: plan[k] for k in ("action", "card_id", "credits", "project_id")} == {
        "action": "create",
        "card_id": None,
        "credits": 1,
        "project_id": emulator.project_id,
    }
    assert plan["reason"] == f"import daily.csv as a new table in department {emulator.project_id}"
    assert xcom(dry, "import") is None  # no CardID: nothing was made
    assert_dry(emulator, quiet, looked=False)  # a new table is decided on the file alone

    real = run(pl_dags, "pl_import", file_path=str(path))
    assert state(real, "import") == "success"
    card_id = xcom(real, "import")
    assert table_of(emulator, card_id)["Rows"] == 6
    assert quiet["credits"] - emulator.credits() == plan["credits"]
    assert xcom(real, "import", "plan") is None  # a real run pushes no plan
    # The table's event and the user's own outlet's: the two a dry run leaves out.
    assert asset_events() - quiet["events"] == 2


def dry_replace(pl_dags, emulator, card_id: str, path: Path) -> tuple[dict, dict]:
    """A dry run of ``pl_replace_dry`` that succeeded and sent nothing: what was before it, and its plan."""
    before = quiet_from_now(emulator)
    dry = run(pl_dags, "pl_replace_dry", file_path=str(path), card_id=card_id)
    assert state(dry, "replace") == "success"
    assert_dry(emulator, before)
    return before, xcom(dry, "replace", "plan")


def test_a_dry_replace_decides_the_replacement_then_the_skip_once_the_real_run_sent_it(
    pl_dags, datatables_conn, tmp_path
):
    emulator = datatables_conn
    card_id = ready_table(emulator, orders_csv(tmp_path, "orders.csv", rows=20))
    path = orders_csv(tmp_path, "new.csv", rows=5)
    before, plan = dry_replace(pl_dags, emulator, card_id, path)
    assert (plan["action"], plan["card_id"], plan["credits"]) == ("replace", card_id, 1)
    assert plan["reason"].startswith(f"replace the data of {card_id} (orders) in department {emulator.project_id}")
    assert table_of(emulator, card_id)["Rows"] == 20

    real = run(pl_dags, "pl_replace", file_path=str(path), card_id=card_id)
    assert state(real, "replace") == "success"
    emulator.wait_until_processed(emulator.project_id, card_id)
    assert table_of(emulator, card_id)["Rows"] == 5
    assert before["credits"] - emulator.credits() == 1

    # The same file again: the table holds it (skip_if_unchanged), and the real run then sends nothing either.
    again, plan = dry_replace(pl_dags, emulator, card_id, path)
    assert (plan["action"], plan["card_id"], plan["credits"]) == ("skip", card_id, 0)
    assert "skip_if_unchanged" in plan["reason"]
    real = run(pl_dags, "pl_replace", file_path=str(path), card_id=card_id)
    assert state(real, "replace") == "success"
    assert paid_requests(emulator) == [] and emulator.credits() == again["credits"]


def test_a_dry_delete_decides_the_delete_and_a_gone_table_fails_as_the_real_run_does(
    pl_dags, datatables_conn, tmp_path
):
    emulator = datatables_conn
    card_id = ready_table(emulator, orders_csv(tmp_path, "doomed.csv", rows=3))
    before = quiet_from_now(emulator)

    dry = run(pl_dags, "pl_delete_dry", card_id=card_id)
    assert state(dry, "delete") == "success"
    plan = xcom(dry, "delete", "plan")
    assert plan == {
        "action": "delete",
        "card_id": card_id,
        "credits": 0,
        "reason": f"delete {card_id} (doomed) from department {emulator.project_id}",
        "project_id": emulator.project_id,
    }
    assert_dry(emulator, before)
    assert table_of(emulator, card_id) is not None

    real = run(pl_dags, "pl_delete", card_id=card_id)
    assert state(real, "delete") == "success"
    assert table_of(emulator, card_id) is None
    assert [r["method"] for r in paid_requests(emulator)] == ["DELETE"]

    # Gone now: the dry run is refused and fails at once, as the real run then does.
    emulator.reset_stats()
    dry = run(pl_dags, "pl_delete_dry", card_id=card_id)
    ti = dry.get_task_instance("delete")
    assert str(ti.state) == "failed" and ti.try_number == 1
    plan = xcom(dry, "delete", "plan")
    assert (plan["action"], plan["credits"]) == ("refuse", 0)
    assert card_id in plan["reason"] and "not in department" in plan["reason"]
    assert paid_requests(emulator) == []
    assert state(run(pl_dags, "pl_delete", card_id=card_id), "delete") == "failed"


def test_a_dry_mapped_import_decides_each_file_and_the_real_run_pays_for_each(
    pl_dags, datatables_conn, quiet, tmp_path
):
    emulator = datatables_conn
    directory = mapped_files(tmp_path / "mapped")
    dry = run(pl_dags, "pl_mapped_dry", dir=str(directory))
    plans = xcom_all(dry, "import", "plan")
    assert {i: (p["action"], p["card_id"], p["credits"]) for i, p in plans.items()} == {
        0: ("create", None, 1),
        1: ("create", None, 1),
    }
    assert "import a.csv" in plans[0]["reason"] and "import b.csv" in plans[1]["reason"]
    assert {str(ti.state) for ti in dry.get_task_instances()} == {"success"}
    assert_dry(emulator, quiet, looked=False)

    real = run(pl_dags, "pl_mapped", dir=str(directory))
    made = xcom_all(real, "import")
    assert sorted(table_of(emulator, made[i])["Rows"] for i in (0, 1)) == [3, 4]
    assert quiet["credits"] - emulator.credits() == sum(p["credits"] for p in plans.values())


def test_a_dry_run_refused_by_validation_fails_without_retry_and_says_why(pl_dags, datatables_conn, quiet, tmp_path):
    path = ragged_csv(tmp_path / "ragged.csv")
    dry = run(pl_dags, "pl_import_dry", file_path=str(path))
    ti = dry.get_task_instance("import")
    assert str(ti.state) == "failed" and ti.try_number == 1  # retries=1: a refusal is not retried
    plan = xcom(dry, "import", "plan")
    assert (plan["action"], plan["card_id"], plan["credits"]) == ("refuse", None, 0)
    assert "ragged.csv" in plan["reason"] and "(line 4) has 5 fields" in plan["reason"]
    assert_dry(datatables_conn, quiet, looked=False)
    real = run(pl_dags, "pl_import", file_path=str(path))
    assert str(real.get_task_instance("import").state) == "failed"
    assert datatables_conn.credits() == quiet["credits"] and paid_requests(datatables_conn) == []


def test_a_dry_run_of_a_file_still_being_written_is_retried_as_the_run_would_be(
    pl_dags, datatables_conn, quiet, tmp_path
):
    """Not a refusal: the real run leaves a file with a cut last record, changed moments ago, to its retries."""
    path, _ = cut_file(tmp_path, CUTS["between fields"])
    dry = run(pl_dags, "pl_import_dry", file_path=str(path))
    ti = dry.get_task_instance("import")
    assert str(ti.state) == "failed" and ti.try_number == 2  # retried (retries=1); its writer never came back
    assert xcom(dry, "import", "plan") is None  # no decision was made
    assert_dry(datatables_conn, quiet, looked=False)


def test_a_dry_run_asks_nobody_to_approve_a_schema_change(pl_dags, datatables_conn, tmp_path):
    from airflow.models.hitl import HITLDetail
    from airflow.utils.session import create_session
    from sqlalchemy import func, select

    emulator = datatables_conn
    card_id = ready_table(emulator, orders_csv(tmp_path, "orders.csv", rows=20))
    path = write_csv(tmp_path / "narrow.csv", ORDERS[:3], [[1, "North", 10]])
    before = quiet_from_now(emulator)
    with create_session() as session:
        forms = session.scalar(select(func.count()).select_from(HITLDetail))

    dry = run(pl_dags, "pl_approve_dry", file_path=str(path), card_id=card_id)
    assert state(dry, "replace") == "success"
    plan = xcom(dry, "replace", "plan")
    assert (plan["action"], plan["card_id"], plan["credits"]) == ("replace", card_id, 1)
    assert "once a person approves the schema change" in plan["reason"] and "note: removed" in plan["reason"]
    assert_dry(emulator, before)
    with create_session() as session:
        assert session.scalar(select(func.count()).select_from(HITLDetail)) == forms


# -- pl_outcomes: every decision, dry for the whole deployment ---------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What a task of ``pl_outcomes`` would do (its plan) and how its real run then ends."""

    action: str
    card_id: str | None
    credits: int
    ends: str  # the task instance's state
    says: str  # a part of the plan's reason
    project_id: str | None = None


@dataclass(frozen=True)
class Outcomes:
    conf: dict[str, str]
    logical_date: datetime
    expected: dict[tuple[str, int | None], Outcome]

    @property
    def credits(self) -> int:
        return sum(o.credits for o in self.expected.values())


def outcomes_scenario(pl_dags, emulator, tmp_path: Path) -> Outcomes:
    """Tables and files for each task of ``pl_outcomes``, and what a run of it at :data:`OLD` would do.

    ``unchanged_card`` and ``held_card`` were replaced by real runs of ``pl_replace`` today: the first
    holds its file (skip_if_unchanged), the second holds back the scenario's older run (if_older).
    """
    project, other = emulator.project_id, emulator.other_project_id
    cards = {name: ready_table(emulator, orders_csv(tmp_path, f"{name}.csv", rows=20)) for name in ("replace", "ddl")}
    cards["delete"] = ready_table(emulator, orders_csv(tmp_path, "doomed.csv", rows=2))
    for name in ("unchanged", "held"):
        cards[name] = ready_table(emulator, orders_csv(tmp_path, f"{name}.csv", rows=20))
        sent = orders_csv(tmp_path, f"{name}_today.csv", rows=7)
        assert state(run(pl_dags, "pl_replace", file_path=str(sent), card_id=cards[name]), "replace") == "success"
        emulator.wait_until_processed(project, cards[name])
    conf = {
        "new": str(orders_csv(tmp_path, "fresh.csv", rows=4)),
        "other_project": other,
        "replace_card": cards["replace"],
        "replace_file": str(orders_csv(tmp_path, "replacement.csv", rows=9)),
        "unchanged_card": cards["unchanged"],
        "unchanged_file": str(tmp_path / "unchanged_today.csv"),
        "held_card": cards["held"],
        "held_file": str(orders_csv(tmp_path, "backfill.csv", rows=3)),
        "bad_file": str(ragged_csv(tmp_path / "ragged.csv")),
        "schema_card": cards["ddl"],
        "schema_file": str(write_csv(tmp_path / "narrow.csv", ORDERS[:3], [[1, "North", 10]])),
        "delete_card": cards["delete"],
        "gone_card": GONE,
        "locked_card": emulator.connector_card_id,
        "dir": str(mapped_files(tmp_path / "mapped")),
    }
    day = OLD.strftime("%Y%m%d")
    expected = {
        ("create", None): Outcome("create", None, 1, "success", f"import orders_{day}.csv as a new table", project),
        ("create_other", None): Outcome("create", None, 1, "success", f"in department {other}", other),
        ("replace", None): Outcome("replace", cards["replace"], 1, "success", "with replacement.csv", project),
        ("unchanged", None): Outcome("skip", cards["unchanged"], 0, "success", "skip_if_unchanged", project),
        ("older", None): Outcome("skip", cards["held"], 0, "skipped", "of DAG pl_replace", project),
        ("invalid", None): Outcome("refuse", None, 0, "failed", "ragged.csv", project),
        ("schema", None): Outcome("refuse", None, 0, "failed", "note: removed", project),
        ("quarantine", None): Outcome("create", None, 1, "success", "1 bad row(s) set aside", project),
        ("delete", None): Outcome("delete", cards["delete"], 0, "success", "(doomed) from department", project),
        ("delete_gone", None): Outcome("refuse", None, 0, "failed", GONE, project),
        ("delete_locked", None): Outcome("refuse", None, 0, "failed", "locked from delete", project),
        ("delete_locked_skip", None): Outcome("skip", emulator.connector_card_id, 0, "skipped", "locked", project),
        ("mapped", 0): Outcome("create", None, 1, "success", "import a.csv", project),
        ("mapped", 1): Outcome("create", None, 1, "success", "import b.csv", project),
    }
    return Outcomes(conf, OLD, expected)


def decisions_match(found: dict[tuple[str, int | None], dict], expected: Outcomes) -> None:
    """Each task's plan (``task_id``, ``map_index`` -> its JSON) is the one expected, reason included in part."""
    assert sorted(found, key=str) == sorted(expected.expected, key=str)
    for key, outcome in expected.expected.items():
        plan = found[key]
        got = (plan["action"], plan["card_id"], plan["credits"], plan["project_id"])
        assert got == (outcome.action, outcome.card_id, outcome.credits, outcome.project_id), (key, plan)
        assert outcome.says in plan["reason"], (key, plan["reason"])


def ended_as_expected(dag_run, expected: Outcomes) -> None:
    instances = dag_run.get_task_instances()
    states = {(ti.task_id, None if ti.map_index < 0 else ti.map_index): str(ti.state) for ti in instances}
    assert states == {key: outcome.ends for key, outcome in expected.expected.items()}


def test_the_deployment_wide_switch_makes_every_task_a_dry_run_that_ends_as_the_real_run(
    pl_dags, datatables_conn, tmp_path, monkeypatch
):
    emulator = datatables_conn
    scenario = outcomes_scenario(pl_dags, emulator, tmp_path)
    before = quiet_from_now(emulator)
    monkeypatch.setenv("AIRFLOW__DATATABLES__DRY_RUN", "True")
    dry = run(pl_dags, "pl_outcomes", logical_date=scenario.logical_date, **scenario.conf)
    found = {}
    for ti in dry.get_task_instances():
        for index, plan in xcom_all(dry, ti.task_id, "plan").items():
            found[(ti.task_id, None if index < 0 else index)] = plan
    decisions_match(found, scenario)
    ended_as_expected(dry, scenario)
    assert_dry(emulator, before)
    assert table_of(emulator, scenario.conf["delete_card"]) is not None

    monkeypatch.delenv("AIRFLOW__DATATABLES__DRY_RUN")
    real = run(pl_dags, "pl_outcomes", logical_date=scenario.logical_date, **scenario.conf)  # the same run, again
    ended_as_expected(real, scenario)
    assert before["credits"] - emulator.credits() == scenario.credits == 6
    assert table_of(emulator, scenario.conf["delete_card"]) is None
