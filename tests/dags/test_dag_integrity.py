"""Every example DAG imports cleanly, quickly, and without pandas or Great Expectations at parse time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

DAGS = sorted((Path(__file__).resolve().parents[2] / "dags").glob("example_*.py"))

PROBE = """
import importlib.util, json, os, sys, time, traceback
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
sys.stdout.flush()
for path in sys.argv[1:]:
    # Each file in a child forked from this warmed-up process: what one file imports is seen
    # alone, as a fresh parse would see it, without paying Airflow's import once per file.
    child = os.fork()
    if child:
        os.waitpid(child, 0)
        continue
    try:
        before = set(sys.modules)
        start = time.perf_counter()
        spec = importlib.util.spec_from_file_location("dag_under_test", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        seconds = time.perf_counter() - start
        dags = [v.dag_id for v in vars(module).values() if isinstance(v, airflow.sdk.DAG)]
        new = set(sys.modules) - before  # what the DAG file added to what Airflow itself imports
        heavy = [m for m in ("pandas", "great_expectations", "pyarrow", "numpy", "httpx", "requests") if m in new]
        print(json.dumps({"path": path, "seconds": seconds, "dags": dags, "heavy": heavy}))
    except BaseException:
        print(json.dumps({"path": path, "error": traceback.format_exc()}))
    sys.stdout.flush()
    os._exit(0)
"""


def test_there_are_examples():
    assert {p.stem for p in DAGS} >= {
        "example_datatables_import",
        "example_datatables_daily_replace",
        "example_datatables_on_refresh",
        "example_datatables_cleanup",
        "example_datatables_dataframe",
    }


@pytest.fixture(scope="module")
def parsed() -> dict[str, dict]:
    """Each example parsed in a fresh child of one process that imported Airflow once."""
    out = subprocess.run([sys.executable, "-c", PROBE, *map(str, DAGS)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    probes = [json.loads(line) for line in out.stdout.splitlines() if line.startswith('{"path"')]
    return {probe["path"]: probe for probe in probes}


@pytest.mark.parametrize("path", DAGS, ids=lambda p: p.stem)
def test_dag_imports_fast_and_light(path, parsed):
    probe = parsed.get(str(path))
    assert probe is not None, f"the probe reported nothing for {path.name} (its child died)"
    assert "error" not in probe, probe.get("error")
    assert probe["dags"] == [path.stem]
    assert probe["heavy"] == [], f"imported at parse time: {probe['heavy']}"
    # How long a parse takes (< 2 s, most of it Airflow's own import) is a speed claim, measured
    # against Airflow alone in benchmarks/parse.py; here, what the file pulls in.


def test_dags_have_doc_markers():
    for path in DAGS:
        text = path.read_text()
        assert "# [START howto_" in text and "# [END howto_" in text, path.name
