"""Credit budgets through real runs (``dag.test()``) against the emulator: spent exactly, then refused or waited out.

The budget is ``[datatables] credit_budget`` (its environment variable); each test has an emulator of
its own, so its department's ledger (keyed by the service's address) starts the day empty.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

import pytest
from tests._dag_files import imported
from tests.operators._runs import orders_csv, run, state, xcom

from airflow_tables import budget
from airflow_tables.assets import service_of


@pytest.fixture(scope="module")
def budget_dags(dags_module):
    """tests/operators/dags/budget_test_dags.py, as installed in Airflow's dags folder by ``dags_module``."""
    return imported("budget_test_dags.py")


@pytest.fixture
def budgeted(fresh_emulator, monkeypatch):
    """An emulator of the test's own, its connection, and a budget of 2 credits a day for its department."""
    emulator = fresh_emulator
    conn = {
        "conn_type": "datatables",
        "host": emulator.base_url,
        "password": emulator.api_key,
        "extra": {"project_id": emulator.project_id, "max_retries": 1, "retry_backoff": 0.02},
    }
    monkeypatch.setenv("AIRFLOW_CONN_DATATABLES_DEFAULT", json.dumps(conn))
    monkeypatch.setenv("AIRFLOW__DATATABLES__CREDIT_BUDGET", json.dumps({emulator.project_id: 2, "*": 100}))
    return emulator


def claims(emulator, day: str) -> list[budget.Claim]:
    from airflow.utils.session import create_session

    with create_session() as session:
        return budget.spent_in(session, service_of(emulator.base_url), emulator.project_id, day, emulator.api_key)


def test_a_budget_is_spent_exactly_and_the_next_import_fails_without_retry(
    budget_dags, budgeted, tmp_path, caplog, capfd
):
    emulator = budgeted
    credits = emulator.credits()
    first = run(budget_dags, "dt_budget_fail", file_path=str(orders_csv(tmp_path, "one.csv")))
    second = run(budget_dags, "dt_budget_hook", file_path=str(orders_csv(tmp_path, "two.csv")))
    assert (state(first, "import"), state(second, "import_in_a_task")) == ("success", "success")
    emulator.reset_stats()
    with caplog.at_level(logging.INFO):
        third = run(budget_dags, "dt_budget_fail", file_path=str(orders_csv(tmp_path, "three.csv")))

    ti = third.get_task_instance("import")
    assert str(ti.state) == "failed" and ti.try_number == 1  # retries=2, none used
    assert emulator.credits() == credits - 2
    assert [r["method"] for r in emulator.stats()["requests"] if r["method"] == "POST"] == []
    assert not [c for c in emulator.list_cards() if c["CardName"] == "three"]
    text = caplog.text + "".join(capfd.readouterr())
    assert f"the credit budget of department {emulator.project_id} is 2 a day" in text
    assert "by dt_budget_fail.import (1), dt_budget_hook.import_in_a_task (1)" in text
    assert "nothing was sent" in text
    today = budget.day_of(budget.utc_now())
    assert sorted(c.by for c in claims(emulator, today)) == ["dt_budget_fail.import", "dt_budget_hook.import_in_a_task"]
    assert xcom(third, "import") is None


def test_a_refused_import_gives_its_credit_back(budget_dags, budgeted, tmp_path):
    """The service refuses the file (a fault, 422): nothing was imported, so the budget's credit is released."""
    emulator = budgeted
    emulator.set_faults([{"methods": ["POST"], "path": "/data/import", "status": 422, "times": 1}])
    refused = run(budget_dags, "dt_budget_fail", file_path=str(orders_csv(tmp_path, "refused.csv")))
    assert state(refused, "import") == "failed"
    assert claims(emulator, budget.day_of(budget.utc_now())) == []
    done = [run(budget_dags, "dt_budget_fail", file_path=str(orders_csv(tmp_path, f"ok{i}.csv"))) for i in range(2)]
    assert [state(d, "import") for d in done] == ["success", "success"]


def test_wait_resumes_on_the_next_utc_day(budget_dags, budgeted, tmp_path, monkeypatch, caplog, capfd):
    """The budget's clock runs an hour before midnight while the day is spent, then eight seconds before it for
    the import that waits: it defers until the budget's midnight, then goes on, on the next day."""
    emulator = budgeted
    real = datetime.now(UTC)
    midnight = (real + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    offset = {"now": midnight - timedelta(hours=1) - real}  # the budget's clock reads 23:00 now
    monkeypatch.setattr(budget, "utc_now", lambda: datetime.now(UTC) + offset["now"])
    day = budget.day_of(budget.utc_now())
    spent = [run(budget_dags, "dt_budget_fail", file_path=str(orders_csv(tmp_path, f"d{i}.csv"))) for i in range(2)]
    assert [state(s, "import") for s in spent] == ["success", "success"]
    assert budget.day_of(budget.utc_now()) == day

    offset["now"] = midnight - timedelta(seconds=8) - datetime.now(UTC)  # now 23:59:52 on the budget's clock
    with caplog.at_level(logging.WARNING):
        waited = run(budget_dags, "dt_budget_wait", file_path=str(orders_csv(tmp_path, "next_day.csv")))

    assert state(waited, "import") == "success"
    said = caplog.text + "".join(capfd.readouterr())
    assert "; waiting until " in said and "(on_budget_exhausted='wait')" in said
    card_id = xcom(waited, "import")
    assert [c["CardID"] for c in emulator.list_cards() if c["CardName"] == "next_day"] == [card_id]
    next_day = budget.day_of(budget.next_day(datetime.fromisoformat(day).replace(tzinfo=UTC)))
    assert [c.by for c in claims(emulator, next_day)] == ["dt_budget_wait.import"]
    assert len(claims(emulator, day)) == 2
