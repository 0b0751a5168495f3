"""Every example DAG imports cleanly, quickly, and without pandas or Great Expectations at parse time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

DAGS = sorted((Path(__file__).resolve().parents[2] / "dags").glob("example_*.py"))

PROBE = """
import importlib.util, json, sys, time
start = time.perf_counter()
import airflow.sdk
# Airflow's own cost for any DAG with an asset: it loads every installed provider's asset handlers
# (the amazon provider's import boto3 and requests). Paid here, so only what the DAG file adds is counted.
try:  # Airflow 3.2+: the task runtime's own providers manager
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime as Providers
except ImportError:  # Airflow 3.1
    from airflow.providers_manager import ProvidersManager as Providers
Providers().asset_uri_handlers
# Airflow's own cost of a first DAG and operator (0.5 s on 3.1, nothing on 3.3) is not the file's.
with airflow.sdk.DAG("probe_warm_up", schedule=None):
    airflow.sdk.BaseOperator(task_id="warm_up")
airflow_done = time.perf_counter()
before = set(sys.modules)
spec = importlib.util.spec_from_file_location("dag_under_test", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
end = time.perf_counter()
from airflow.sdk import DAG
dags = [v.dag_id for v in vars(module).values() if isinstance(v, DAG)]
new = set(sys.modules) - before  # what the DAG file added to what Airflow itself imports
heavy = [m for m in ("pandas", "great_expectations", "pyarrow", "numpy", "httpx", "requests") if m in new]
print(json.dumps({"total": end - start, "ours": end - airflow_done, "dags": dags, "heavy": heavy}))
"""


def test_there_are_examples():
    assert {p.stem for p in DAGS} >= {
        "example_datatables_import",
        "example_datatables_daily_replace",
        "example_datatables_on_refresh",
        "example_datatables_cleanup",
        "example_datatables_dataframe",
    }


@pytest.mark.parametrize("path", DAGS, ids=lambda p: p.stem)
def test_dag_imports_fast_and_light(path):
    out = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    probe = json.loads(out.stdout.strip().splitlines()[-1])
    assert probe["dags"] == [path.stem]
    assert probe["heavy"] == [], f"imported at parse time: {probe['heavy']}"
    # How long a parse takes (< 2 s, most of it Airflow's own import) is a speed claim, measured
    # against Airflow alone in benchmarks/parse.py; here, what the file pulls in.


def test_dags_have_doc_markers():
    for path in DAGS:
        text = path.read_text()
        assert "# [START howto_" in text and "# [END howto_" in text, path.name
