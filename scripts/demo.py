"""The README's first command: a real Airflow running a real DAG against the local emulator, offline.

1. starts the emulator of the Data Tables Service on a free port with a temporary data dir;
2. prepares a project-local AIRFLOW_HOME (.airflow/, SQLite) and migrates it;
3. runs ``example_datatables_import`` end to end with ``airflow dags test`` (validate,
   import, a deferred wait run in line, describe the table);
4. prints what the service made of the file, and where the logs are; stops the emulator.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOME = ROOT / ".airflow"
DAG_ID = "example_datatables_import"

sys.path.insert(0, str(ROOT / "src"))

from airflow_tables.emulator.testing import EmulatorProcess  # noqa: E402


def airflow(*args: str, env: dict, log) -> int:
    """Run the ``airflow`` CLI of this environment, its output into the demo's log file."""
    exe = str(Path(sys.executable).with_name("airflow"))
    return subprocess.call([exe, *args], env=env, stdout=log, stderr=subprocess.STDOUT)


def main() -> int:
    started = time.monotonic()
    logs = HOME / "demo-logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"{DAG_ID}.log"
    with EmulatorProcess(processing_delay=2.0) as emulator, open(log_path, "w") as log:
        print(f"emulator of the Data Tables Service at {emulator.base_url} (department {emulator.project_id})")
        env = {
            **os.environ,
            "AIRFLOW_HOME": str(HOME),
            "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(logs / "tasks"),
            "AIRFLOW_CONN_DATATABLES_DEFAULT": json.dumps(
                {
                    "conn_type": "datatables",
                    "host": emulator.base_url,
                    "password": emulator.api_key,
                    "extra": {"project_id": emulator.project_id, "app_url": "http://localhost/tables"},
                }
            ),
        }
        print(f"preparing Airflow in {HOME} (SQLite)")
        if airflow("db", "migrate", env=env, log=log) != 0:
            print(f"airflow db migrate failed; see {log_path}")
            return 1
        print(f"running {DAG_ID}: validate, import, wait (deferred), describe")
        before = {c["CardID"] for c in emulator.list_cards()}
        code = airflow("dags", "test", DAG_ID, env=env, log=log)
        new = [c for c in emulator.list_cards() if c["CardID"] not in before]
        if code != 0 or not new:
            print(f"the DAG run failed (exit {code}); its log: {log_path}")
            return 1
        path = f"/v1.0/projects/{emulator.project_id}/cards/{new[0]['CardID']}"
        table = emulator.request("GET", path, key=emulator.api_key)[1]
    print()
    ok = "read well" if table["SuccessfulUpload"] else "read BADLY"
    print(f"table {table['CardID']} ({table['CardName']}): {table['Rows']} rows, {ok}")
    print(f"  {table.get('Description', '')}")
    for column in table.get("Columns", []):
        print(f"  {column['ColumnName']:<14} {column['DataType']:<7} {column['ColumnDescription']}")
    print()
    print(f"DAG run log: {log_path}")
    print(f"task logs:   {logs / 'tasks'}")
    print(f"done in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
