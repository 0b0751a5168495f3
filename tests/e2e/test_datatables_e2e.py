"""The project's example DAGs on the real stack, against the emulator, and the provider in the UI.

* ``example_datatables_import`` through the REST API: it succeeds, a task was seen
  ``deferred`` (the wait ran in the triggerer), and the emulator lists the new table
  read and accepted (``Processed`` and ``SuccessfulUpload`` true).
* The import task's page shows the "Open table" link.
* ``example_datatables_cleanup`` (pattern ``*``): it succeeds and the table is gone.
* The add-connection form for "Data Tables" shows the provider's labelled fields.

Skipped, with the reason, while the DAGs, the operators or the emulator's test helper
do not exist yet.
"""

from __future__ import annotations

import importlib.util
import re
from urllib.parse import quote

import pytest
import requests

from .conftest import APP_URL
from .harness import REPO

IMPORT_DAG = "example_datatables_import"
CLEANUP_DAG = "example_datatables_cleanup"


def _missing() -> list[str]:
    missing = []
    if not (REPO / "dags" / f"{IMPORT_DAG}.py").exists():
        missing.append(f"dags/{IMPORT_DAG}.py")
    for module in ("airflow_tables.operators.tables", "airflow_tables.emulator.testing"):
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:
            found = False
        if not found:
            missing.append(module)
    return missing


MISSING = _missing()
pytestmark = [
    pytest.mark.skipif(bool(MISSING), reason=f"not written yet: {', '.join(MISSING)}"),
    pytest.mark.timeout(600),
]


def list_cards(emulator) -> list[dict]:
    """``GET /v1.0/projects/{project_id}/cards`` with the X-API-Key header, as a client would."""
    resp = requests.get(
        f"{emulator.base_url}/v1.0/projects/{quote(emulator.project_id)}/cards",
        headers={"X-API-Key": emulator.api_key},
        timeout=30,
    )
    resp.raise_for_status()
    return resp.json()["Cards"]


def find_task(task_instances: list[dict], pattern: str) -> dict:
    """The task instance whose operator (or else task id) matches ``pattern``."""
    regex = re.compile(pattern, re.IGNORECASE)
    for field in ("operator", "task_id"):
        for ti in task_instances:
            if regex.search(ti.get(field) or ""):
                return ti
    raise AssertionError(f"no task matching {pattern!r} in {[t['task_id'] for t in task_instances]}")


@pytest.fixture(scope="module")
def emulator(datatables_emulator):
    if datatables_emulator is None:
        pytest.skip("airflow_tables.emulator.testing is missing")
    return datatables_emulator


@pytest.fixture(scope="module")
def import_run(airflow_stack, airflow_api, emulator):
    """Trigger the import DAG once; the tests below look at what it did."""
    before = {card["CardID"] for card in list_cards(emulator)}
    airflow_api.wait_for_dag(IMPORT_DAG, timeout=120, check=airflow_stack.check_alive)
    airflow_api.unpause(IMPORT_DAG)
    run_id = airflow_api.trigger(IMPORT_DAG)
    state = airflow_api.wait_for_run(IMPORT_DAG, run_id, timeout=300, check=airflow_stack.check_alive)
    cards = list_cards(emulator)
    return {
        "run_id": run_id,
        "state": state,
        "report": airflow_api.run_report(IMPORT_DAG, run_id),
        "new_cards": [card for card in cards if card["CardID"] not in before],
        "task_instances": airflow_api.task_instances(IMPORT_DAG, run_id),
    }


def test_import_dag_defers_and_the_emulator_holds_the_table(airflow_api, import_run):
    report = import_run["report"]
    assert import_run["state"] == "success", report

    seen = airflow_api.observed_states(IMPORT_DAG, import_run["run_id"])
    deferred = [task for task, states in seen.items() if "deferred" in states]
    assert deferred, f"no task was seen deferred: {seen}"

    new_cards = import_run["new_cards"]
    assert new_cards, f"the emulator lists no new table after the run\n{report}"
    for card in new_cards:
        assert card["Processed"] is True, card
        assert card["SuccessfulUpload"] is True, card

    importer = find_task(import_run["task_instances"], r"Import")
    card_id = airflow_api.xcom(IMPORT_DAG, import_run["run_id"], importer["task_id"])
    if isinstance(card_id, str) and card_id.startswith("CRD-"):
        assert card_id in {card["CardID"] for card in new_cards}, (card_id, new_cards)


def test_import_task_page_shows_open_table_link(airflow_stack, airflow_api, import_run, page, browser):
    assert import_run["state"] == "success", import_run["report"]
    importer = find_task(import_run["task_instances"], r"Import")
    run_id = import_run["run_id"]

    links = airflow_api.get(
        f"/api/v2/dags/{IMPORT_DAG}/dagRuns/{quote(run_id, safe='')}"
        f"/taskInstances/{quote(importer['task_id'], safe='')}/links"
    )["extra_links"]
    assert links.get("Open table"), f"extra links from the API: {links}"

    # The task instance's "Details" tab carries the "Extra Links" buttons.
    page.goto(
        f"{airflow_stack.base_url}/dags/{IMPORT_DAG}/runs/{quote(run_id, safe='')}"
        f"/tasks/{quote(importer['task_id'], safe='')}/details",
        wait_until="domcontentloaded",
    )
    link = page.get_by_role("link", name=re.compile(r"open table", re.IGNORECASE))
    link.first.wait_for(timeout=30_000)
    browser.screenshot("datatables-import-task-open-table.png")
    href = link.first.get_attribute("href") or ""
    assert href.startswith(APP_URL), href


def test_cleanup_dag_deletes_the_imported_table(airflow_stack, airflow_api, emulator, import_run):
    if not (REPO / "dags" / f"{CLEANUP_DAG}.py").exists():
        pytest.skip(f"dags/{CLEANUP_DAG}.py not written yet")
    assert import_run["state"] == "success", import_run["report"]
    imported = {card["CardID"] for card in import_run["new_cards"]}
    assert imported

    details = airflow_api.wait_for_dag(CLEANUP_DAG, timeout=120, check=airflow_stack.check_alive)
    params = airflow_api.get(f"/api/v2/dags/{CLEANUP_DAG}/details").get("params") or {}
    conf = {"pattern": "*"} if "pattern" in params else None
    airflow_api.unpause(details["dag_id"])
    run_id = airflow_api.trigger(CLEANUP_DAG, conf=conf)
    state = airflow_api.wait_for_run(CLEANUP_DAG, run_id, timeout=300, check=airflow_stack.check_alive)
    assert state == "success", airflow_api.run_report(CLEANUP_DAG, run_id)

    left = imported & {card["CardID"] for card in list_cards(emulator)}
    assert not left, f"still listed after the cleanup: {left}\n{airflow_api.run_report(CLEANUP_DAG, run_id)}"


def _expected_labels() -> dict[str, str]:
    """Field -> label, from the provider's own description (what the form must show)."""
    from airflow_tables import get_provider_info

    (conn_type,) = [c for c in get_provider_info()["connection-types"] if c["connection-type"] == "datatables"]
    labels = dict(conn_type["ui-field-behaviour"]["relabeling"])
    labels.update({name: field["label"] for name, field in conn_type["conn-fields"].items()})
    return labels


def test_connection_form_shows_datatables_fields(airflow_stack, page, browser):
    expected = _expected_labels()
    # What issue 6 names, found in the provider's labels (case-insensitive).
    for field, words in {
        "host": "base url",
        "password": "api key",
        "timeout": "timeout",
        "verify": "verify",
        "max_retries": "max retries",
        "project_id": "projectid",
        "app_url": "application url",
    }.items():
        assert words in expected[field].lower(), (field, expected[field])

    page.goto(f"{airflow_stack.base_url}/connections", wait_until="domcontentloaded")
    page.get_by_role("button", name="Add Connection").click()
    dialog = page.get_by_role("dialog")
    combo = dialog.get_by_role("combobox")
    combo.click()
    combo.fill("Data Tables")
    page.get_by_role("option", name="Data Tables", exact=True).click()

    def label(text: str):
        return dialog.locator("label").filter(has_text=re.compile(rf"^\s*{re.escape(text)}\s*\*?\s*$", re.I))

    standard = [expected["host"], expected["password"]]
    extras = [text for field, text in expected.items() if field not in ("host", "password")]
    label(standard[0]).first.wait_for(timeout=30_000)
    browser.screenshot("datatables-connection-form-standard.png")
    hidden = [text for text in standard if not label(text).first.is_visible()]
    assert not hidden, f"standard fields not visible: {hidden}"

    # The extras sit in the "Extra Fields" section of an accordion that shows one section at a time.
    dialog.get_by_role("button", name=re.compile(r"^\s*Extra Fields\s*$", re.I)).click()
    label(extras[0]).first.wait_for(timeout=10_000)
    browser.screenshot("datatables-connection-form-extras.png")
    hidden = [text for text in extras if not label(text).first.is_visible()]
    assert not hidden, f"extra fields not visible: {hidden}"
