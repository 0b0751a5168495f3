"""Deferred tasks survive an upgrade of the provider (issue 28, point 4).

A deferred import and a deferred sensor are started by the previous release of this
provider (commit :data:`PREVIOUS`, the commit before trigger arguments carried a version):
its wheel is built once from ``git archive`` into ``artifacts/upgrade/`` and reused. The
triggerer is stopped, the provider upgraded to this checkout, Airflow restarted; both tasks
must resume from the triggers the previous release serialized, and succeed, and the import
must not be sent a second time.

Where it runs: a small Airflow of its own (PostgreSQL, api-server, scheduler, dag-processor,
triggerer; the e2e harness's classes), not the session's e2e stack. The upgrade restarts every
component with other code; doing that to the shared stack would run the e2e tests after it on
a stack that was restarted twice under them, and tie this test to their order. Both releases
run on the checkout's Airflow and venv: the previous one's wheel, unpacked, comes first on
``PYTHONPATH`` (the checkout's own install is a plain path entry after it); the upgrade drops
it. A venv per release would only add minutes of installing the same Airflow.
Marked ``packaging``: run once per ``make test``, on the newest Airflow; about three minutes on 2 loaded cores.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from tests._uv import uv_command
from tests.e2e.harness import AirflowApi, AirflowStack, Postgres, kill_marked, new_marker, postgres_bin_dir, wait_until

ROOT = Path(__file__).resolve().parents[2]
#: The previous release: the last commit whose triggers wrote no ``version``.
PREVIOUS = "2723615"
CACHE = ROOT / "artifacts" / "upgrade"
DAGS = Path(__file__).resolve().parent / "upgrade_dags"
DAG_ID = "datatables_upgrade"
DEFERRED = ("import_csv", "wait_for_table")

pytestmark = [pytest.mark.packaging, pytest.mark.timeout(900)]


def previous_release() -> Path:
    """The previous release's wheel, unpacked (an install without entry points), built once and kept."""
    site = CACHE / f"site-{PREVIOUS}"
    if (site / "airflow_tables" / "__init__.py").exists():
        return site
    uv = uv_command()
    if uv is None:
        pytest.fail("uv is not installed (scripts/setup.sh installs it)")
    source, wheels = CACHE / f"src-{PREVIOUS}", CACHE / f"wheel-{PREVIOUS}"
    for stale in (source, wheels):
        shutil.rmtree(stale, ignore_errors=True)
    source.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", PREVIOUS], cwd=ROOT, capture_output=True, timeout=120)
    assert archive.returncode == 0, f"git archive {PREVIOUS} failed (a shallow clone?): {archive.stderr[-500:]!r}"
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True, timeout=120)
    build = subprocess.run(
        [uv, "build", "--wheel", "--quiet", "--out-dir", str(wheels), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "UV_NO_PROGRESS": "1"},
    )
    assert build.returncode == 0, f"building {PREVIOUS}'s wheel failed:\n{build.stderr[-3000:]}"
    (wheel,) = wheels.glob("airflow_tables-*.whl")
    unpacking = CACHE / f"site-{PREVIOUS}.partial"
    shutil.rmtree(unpacking, ignore_errors=True)
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(unpacking)
    unpacking.rename(site)
    return site


@pytest.fixture(scope="module")
def emulator():
    from airflow_tables.emulator.testing import EmulatorProcess

    process = EmulatorProcess().start()
    yield process
    process.stop()


@pytest.fixture(scope="module")
def marker():
    marker = new_marker()
    yield marker
    kill_marked(marker)


@pytest.fixture(scope="module")
def postgres(marker):
    if postgres_bin_dir() is None:
        reason = "PostgreSQL is not installed (scripts/system-deps.sh installs it)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    server = Postgres(marker, log_dir=CACHE / "logs")
    try:
        yield server.start()
    finally:
        server.stop()


def service_import(emulator, csv: bytes, card_id: str | None = None) -> str:
    """An import (a replacement with ``card_id``) straight on the service, as a person would make it."""
    import requests

    data = {"ProjectID": emulator.project_id, **({"CardID": card_id} if card_id else {})}
    resp = requests.post(
        f"{emulator.base_url}/v1.0/data/import",
        headers={"X-API-Key": emulator.api_key},
        data=data,
        files={"File": ("t.csv", csv, "text/csv")},
        timeout=30,
    )
    resp.raise_for_status()
    return card_id or resp.json()["CardID"]


def imports_sent(emulator) -> int:
    return sum(r["method"] == "POST" and r["path"].endswith("/data/import") for r in emulator.stats()["requests"])


def stored_trigger_kwargs(postgres, fernet_key: str) -> dict[str, dict]:
    """The kwargs of every trigger in the database, by class name, as the triggerer will read them."""
    from cryptography.fernet import Fernet, InvalidToken

    def decrypted(kwargs: str) -> dict:  # Airflow leaves some unencrypted (see Trigger._decrypt_kwargs)
        with contextlib.suppress(ValueError):
            return json.loads(kwargs)
        try:
            return json.loads(Fernet(fernet_key.encode()).decrypt(kwargs.encode()))
        except InvalidToken:
            raise AssertionError(f"a trigger's kwargs are neither JSON nor ours to decrypt: {kwargs[:60]!r}") from None

    rows = postgres.query("SELECT classpath, kwargs FROM trigger")
    return {path.rsplit(".", 1)[-1]: decrypted(kwargs) for path, kwargs in rows}


def test_an_import_and_a_sensor_deferred_by_the_previous_release_resume_after_the_upgrade(emulator, postgres, tmp_path):
    site = previous_release()
    sensed = service_import(emulator, b"id,name\n1,a\n")
    emulator.wait_until_processed(emulator.project_id, sensed, timeout=60)
    csv = tmp_path / "upgrade.csv"
    csv.write_text("id,name\n1,a\n2,b\n3,c\n")
    # Every read now lasts until the upgrade is done (the delay is read live: lowering it ends them).
    emulator.set_processing_delay(3600)
    service_import(emulator, b"id,name\n1,a\n2,b\n", card_id=sensed)
    connection = {"conn_type": "datatables", "host": emulator.base_url, "password": emulator.api_key}
    connection["extra"] = {"project_id": emulator.project_id}
    env = {
        "PYTHONPATH": str(site),  # the previous release, ahead of the checkout's own install
        "AIRFLOW_CONN_DATATABLES_DEFAULT": json.dumps(connection),
        "UPGRADE_CSV": str(csv),
        "UPGRADE_CARD_ID": sensed,
    }
    stack = AirflowStack(postgres, DAGS, marker=postgres.marker, extra_env=env, log_dir=CACHE / "logs")
    try:
        stack.start()
        api = AirflowApi(stack.base_url, token=stack.token)
        api.wait_for_dag(DAG_ID, timeout=180, check=stack.check_alive)
        api.unpause(DAG_ID)
        run_id = api.trigger(DAG_ID)

        def deferred() -> bool:
            states = {ti["task_id"]: ti["state"] for ti in api.task_instances(DAG_ID, run_id)}
            assert "failed" not in states.values(), api.run_report(DAG_ID, run_id)
            return all(states.get(task) == "deferred" for task in DEFERRED)

        wait_until(deferred, timeout=240, what="both tasks to defer", interval=1.0, check=stack.check_alive)
        sent = imports_sent(emulator)
        written = stored_trigger_kwargs(postgres, stack.env["AIRFLOW__CORE__FERNET_KEY"])
        assert "version" not in json.dumps(written["DataTablesProcessedTrigger"]), written  # the previous release's

        # The upgrade: the triggerer stopped first, then the rest; all back on this checkout's provider.
        for name in ("triggerer", "scheduler", "dag-processor", "api-server"):
            stack.stop_component(name)
        del stack.env["PYTHONPATH"]
        for name in ("api-server", "scheduler", "dag-processor", "triggerer"):
            stack.start_component(name)
        wait_until(stack._healthy, 240, "every component to be healthy after the upgrade", 1.0, stack.check_alive)
        emulator.set_processing_delay(0.5)  # the reads end; the new triggerer sees both tables ready

        state = api.wait_for_run(DAG_ID, run_id, timeout=240, check=stack.check_alive)
        assert state == "success", api.run_report(DAG_ID, run_id)
        assert imports_sent(emulator) == sent  # resumed, not imported again
        card_id = api.xcom(DAG_ID, run_id, "import_csv")
        assert next(c for c in emulator.list_cards() if c["CardID"] == card_id)["Rows"] == 3
        tries = {ti["task_id"]: ti["try_number"] for ti in api.task_instances(DAG_ID, run_id)}
        assert tries == dict.fromkeys(DEFERRED, 1), tries  # each resumed its first try: none ran again
    finally:
        stack.stop()
