"""Credit budgets (``airflow_tables.budget``): the setting, the day's ledger, and claims raced by separate processes.

The ledger is Airflow's own metadata database (the tests' SQLite), written by compare-and-swap.
The race runs 8 processes, each claiming at the same instant (a barrier) in 50 rounds, once
writing the database themselves (as ``dag.test()`` and the plan command do) and once through
the provider's plugin served over HTTP (as a task on a worker does): no round grants more
than the budget, and none grants less (every claim is answered).
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import socket
import time
from datetime import UTC, datetime

import pytest

from airflow_tables import budget
from airflow_tables.exceptions import DataTablesBudgetExceededError, DataTablesBudgetUnavailableError

KEY = "sk-budget-0123456789"
SERVICE = "127.0.0.1:1"
RACERS = 8
ROUNDS = 50
LIMIT = 3


# -- the setting ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "department", "limit"),
    [
        ("", "PRJ-1", None),
        ("10", "PRJ-1", 10),
        ("0", "PRJ-1", 0),
        ('{"PRJ-1": 4, "*": 50}', "PRJ-1", 4),
        ('{"PRJ-1": 4, "*": 50}', "PRJ-2", 50),
        ('{"PRJ-1": 4}', "PRJ-2", None),
    ],
)
def test_a_budget_is_read_per_department(text, department, limit):
    assert budget.Budgets.parse(text).limit(department) == limit


@pytest.mark.parametrize("text", ["ten", "-1", "2.5", "true", '{"PRJ-1": "4"}', '{"*": -3}', "[1]"])
def test_a_budget_no_day_could_use_is_refused_by_name(text):
    with pytest.raises(ValueError, match=r"\[datatables\] credit_budget"):
        budget.Budgets.parse(text)


def test_days_are_utc_and_end_at_midnight():
    late = datetime(2026, 11, 30, 23, 59, 59, tzinfo=UTC)
    assert budget.day_of(late) == "2026-11-30"
    assert budget.next_day(late) == datetime(2026, 12, 1, tzinfo=UTC)


def test_a_refusal_names_the_budget_what_was_spent_and_by_whom():
    verdict = budget.Verdict(False, 3, 3, {"daily.import": 2, "adhoc.replace": 1})
    said = verdict.refusal("PRJ-1", "2026-11-30")
    assert "department PRJ-1 is 3 a day" in said
    assert "3 spent on 2026-11-30 by daily.import (2), adhoc.replace (1)" in said
    assert "nothing was sent" in said and "2026-12-01T00:00:00+00:00" in said


# -- the ledger, in the metadata database -----------------------------------------------------------------------------


def _claim(project: str, by: str = "daily", day: str = "2026-11-30") -> budget.Claim:
    import uuid

    return budget.Claim(uuid.uuid4().hex, SERVICE, project, day, dag_id=by, task_id="import", run_id="r", at="now")


@pytest.fixture
def session(dags_module):  # dags_module migrates the tests' metadata database
    from airflow.utils.session import create_session

    with create_session() as session:
        yield session


def test_the_ledger_grants_up_to_the_budget_then_refuses(session):
    project = f"PRJ-{time.monotonic_ns()}"
    granted = [budget.claim_in(session, _claim(project), 2, KEY) for _ in range(3)]
    assert [v.granted for v in granted] == [True, True, False]
    assert (granted[-1].spent, granted[-1].by) == (2, {"daily.import": 2})
    assert len(budget.spent_in(session, SERVICE, project, "2026-11-30", KEY)) == 2
    # Another day, another department: their own ledgers.
    assert budget.claim_in(session, _claim(project, day="2026-12-01"), 2, KEY).granted
    assert budget.claim_in(session, _claim(project + "b"), 2, KEY).granted


def test_a_claim_sent_twice_counts_once_and_a_release_gives_it_back(session):
    project = f"PRJ-{time.monotonic_ns()}"
    claim = _claim(project)
    assert budget.claim_in(session, claim, 1, KEY).spent == 1
    assert budget.claim_in(session, claim, 1, KEY).granted  # the same claim again (its answer was lost)
    assert not budget.claim_in(session, _claim(project), 1, KEY).granted
    assert budget.release_in(session, claim, KEY)
    assert not budget.release_in(session, claim, KEY)
    assert budget.claim_in(session, _claim(project), 1, KEY).granted


@pytest.mark.parametrize("how", ["edited", "other key", "not json"])
def test_a_ledger_not_written_by_the_provider_with_this_key_fails_closed(session, how):
    from airflow.models.variable import Variable
    from sqlalchemy import select

    project = f"PRJ-{time.monotonic_ns()}"
    claim = _claim(project)
    budget.claim_in(session, claim, 5, "another key" if how == "other key" else KEY)
    row = session.scalar(select(Variable).where(Variable.key == claim.ledger_key))
    if how == "edited":  # someone made the day look unspent
        stored = json.loads(row.val)
        stored["claims"] = []
        row.set_val(json.dumps(stored))
    elif how == "not json":
        row.set_val("{")
    session.commit()
    with pytest.raises(budget.LedgerError, match=claim.ledger_key):
        budget.claim_in(session, _claim(project), 5, KEY)


# -- racing processes -------------------------------------------------------------------------------------------------


def _race(barrier, results, mode: str, token: str) -> None:
    """One of the racing processes: in each round, claim one credit of that round's department at once."""
    if mode == "database":
        os.environ["_AIRFLOW_PROCESS_CONTEXT"] = "server"
    from airflow_tables.hooks._budget import credit_claimed
    from airflow_tables.hooks.tables import DataTablesHook

    settings = DataTablesHook("datatables_default").settings
    log = logging.getLogger("racer")
    for round_ in range(ROUNDS):
        barrier.wait(timeout=60)
        try:
            with credit_claimed(settings, "datatables_default", f"PRJ-race-{token}-{round_}", log):
                outcome = "granted"
        except DataTablesBudgetExceededError:
            outcome = "refused"
        except DataTablesBudgetUnavailableError as err:
            outcome = f"unavailable: {err}"
        results.put((round_, outcome))


@pytest.fixture
def plugin_server(dags_module, budget_conn):
    """The provider's plugin app (what the api-server mounts at /datatables), served on 127.0.0.1 over HTTP."""
    from airflow_tables.plugins.testing import PluginAppProcess

    with PluginAppProcess() as app:
        yield app.url


@pytest.fixture
def budget_conn(monkeypatch):
    conn = {"conn_type": "datatables", "host": "http://127.0.0.1:1", "password": KEY, "extra": {"project_id": "PRJ"}}
    monkeypatch.setenv("AIRFLOW_CONN_DATATABLES_DEFAULT", json.dumps(conn))
    monkeypatch.setenv("AIRFLOW__DATATABLES__CREDIT_BUDGET", str(LIMIT))


@pytest.mark.parametrize("mode", ["database", "api-server"])
def test_eight_processes_racing_at_the_edge_never_spend_past_the_budget(request, dags_module, budget_conn, mode):
    if mode == "api-server":
        url = request.getfixturevalue("plugin_server")
        os.environ["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] = f"{url}/execution/"
        request.addfinalizer(lambda: os.environ.pop("AIRFLOW__CORE__EXECUTION_API_SERVER_URL", None))
    spawn = multiprocessing.get_context("spawn")
    barrier, results = spawn.Barrier(RACERS), spawn.Queue()
    token = f"{mode}-{time.monotonic_ns()}"  # departments of this run's own: no ledger of an earlier one
    racers = [spawn.Process(target=_race, args=(barrier, results, mode, token)) for _ in range(RACERS)]
    for racer in racers:
        racer.start()
    outcomes: dict[int, list[str]] = {}
    for _ in range(RACERS * ROUNDS):
        round_, outcome = results.get(timeout=120)
        outcomes.setdefault(round_, []).append(outcome)
    for racer in racers:
        racer.join(60)
        assert racer.exitcode == 0
    assert len(outcomes) == ROUNDS
    for round_, seen in sorted(outcomes.items()):
        assert sorted(seen) == ["granted"] * LIMIT + ["refused"] * (RACERS - LIMIT), (round_, seen)


def test_a_claim_signed_with_another_key_is_refused_and_writes_nothing(plugin_server, dags_module):
    import requests

    claim = _claim(f"PRJ-{time.monotonic_ns()}")
    body = json.dumps({"conn_id": "datatables_default", "claim": claim.to_json(), "limit": 5}).encode()
    forged = {"X-DataTables-Signature": budget.request_signature("not the key", body)}
    answer = requests.post(f"{plugin_server}/datatables/api/budget/claim", data=body, headers=forged, timeout=10)
    assert answer.status_code == 403
    assert "not signed with the connection's key" in answer.json()["detail"]
    from airflow.utils.session import create_session

    with create_session() as session:
        assert budget.spent_in(session, claim.service, claim.project_id, claim.day, KEY) == []


def test_an_unreachable_ledger_sends_nothing(dags_module, budget_conn, monkeypatch):
    from airflow_tables.hooks._budget import credit_claimed
    from airflow_tables.hooks.tables import DataTablesHook

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("AIRFLOW__CORE__EXECUTION_API_SERVER_URL", f"http://127.0.0.1:{port}/execution/")
    monkeypatch.delenv("_AIRFLOW_PROCESS_CONTEXT", raising=False)
    settings = DataTablesHook("datatables_default").settings
    sent = []
    claimed = credit_claimed(settings, "datatables_default", "PRJ", logging)
    with pytest.raises(DataTablesBudgetUnavailableError, match="could not be reached"), claimed:
        sent.append(True)
    assert sent == []
