"""The provider's metrics reach a StatsD server, and its spans OpenTelemetry, as a deployment runs them (issue 43).

A UDP socket on 127.0.0.1 is the StatsD server; `airflow dags test` runs
tests/lineage/dags/datatables_metrics.py with Airflow's StatsD settings pointed at it (their
defaults otherwise: no tags, prefix ``airflow``). Every metric docs/metrics.md lists must arrive,
with the value the run implies. The same run has ``[traces] otel_on`` with OpenTelemetry's
console exporter (``OTEL_TRACES_EXPORTER=console``): on Airflow 3.3 and later, whose task SDK
sets up the tracer provider, the validation, send and wait spans come out with their attributes.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from tests.operators._runs import orders_csv

from airflow_tables.version_compat import AIRFLOW_V_3_3_PLUS

DAG_FILE = Path(__file__).parent / "dags" / "datatables_metrics.py"


def test_every_datatables_metric_arrives_at_a_statsd_server(dags_module, datatables_conn, tmp_path):
    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(DAG_FILE, dags / DAG_FILE.name)
    path = orders_csv(tmp_path, name="metrics_orders.csv", rows=12)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as server:
        server.bind(("127.0.0.1", 0))
        server.settimeout(0.1)
        env = {
            **os.environ,
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__METRICS__STATSD_ON": "True",
            "AIRFLOW__METRICS__STATSD_HOST": "127.0.0.1",
            "AIRFLOW__METRICS__STATSD_PORT": str(server.getsockname()[1]),
            "DT_METRICS_FILE": str(path),
            "AIRFLOW__TRACES__OTEL_ON": "True",
            "OTEL_TRACES_EXPORTER": "console",
        }
        airflow = str(Path(sys.executable).with_name("airflow"))
        command = [airflow, "dags", "test", "dt_metrics"]
        run = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        received: list[str] = []
        while run.poll() is None:  # the run's own end is the deadline (the test's timeout bounds it)
            try:
                received.extend(server.recv(65535).decode().splitlines())
            except TimeoutError:
                continue
        output = run.stdout.read() if run.stdout else ""
    assert run.returncode == 0, output[-3000:]

    def values(name: str, kind: str) -> list[float]:
        found = []
        for line in received:
            metric, _, rest = line.partition(":")
            value, _, rest = rest.partition("|")
            if metric == f"airflow.datatables.{name}" and rest.split("|")[0] == kind:
                found.append(float(value))
        return found

    size = path.stat().st_size
    assert values("imports", "c") == [1, 1], received  # the import, and the first replace
    assert values("credits_spent", "c") == [1, 1]
    assert values("bytes_uploaded", "c") == [size, size]
    assert values("imports_skipped", "c") == [1]  # the second replace: the same bytes
    waits = values("wait_seconds", "ms")
    assert len(waits) == 2 and all(w > 0 for w in waits)

    if AIRFLOW_V_3_3_PLUS:  # below, Airflow sets up no tracer provider in a task's process: the spans are no-ops
        spans = [s for s in _printed_spans(output) if s["name"].startswith("datatables.")]
        sent = [s["attributes"] for s in spans if s["name"] == "datatables.send"]
        assert [a["datatables.bytes"] for a in sent] == [size, size], [s["name"] for s in spans]
        assert {s["name"] for s in spans} == {"datatables.validate", "datatables.send", "datatables.wait"}
        validated = [s["attributes"]["datatables.file"] for s in spans if s["name"] == "datatables.validate"]
        assert validated == [str(path)] * 3  # the import and both replaces check the file


def _printed_spans(output: str) -> list[dict]:
    """The spans OpenTelemetry's console exporter printed: each a JSON object from a line "{" to a line "}"."""
    spans, lines = [], []
    for line in output.splitlines():
        if line == "{" or lines:
            lines.append(line)
        if line == "}" and lines:
            spans.append(json.loads("\n".join(lines)))
            lines = []
    return spans
