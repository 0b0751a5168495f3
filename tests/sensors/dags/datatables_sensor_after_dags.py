"""DAGs for the sensor's ``completed_after``: wait for a read that finished after the run's data interval."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG

from airflow_tables.sensors.tables import DataTablesProcessedSensor
from airflow_tables.version_compat import TaskDeferred


class _SaysWhenItDefers(DataTablesProcessedSensor):
    """Touches the file ``deferred_flag`` in the run's conf when it defers, for a test to act after its instant."""

    def execute(self, context):
        try:
            return super().execute(context)
        except TaskDeferred:
            flag = context["dag_run"].conf.get("deferred_flag")
            if flag:
                Path(flag).touch()
            raise


def _dag(dag_id: str, completed_after: str, *, deferrable: bool) -> DAG:
    with DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
        _SaysWhenItDefers(
            task_id="wait",
            card_id="{{ params.card_id }}",
            completed_after=completed_after,
            deferrable=deferrable,
            poke_interval=0.2,
            # Generous: a wait ends as soon as the read is seen; under CI's load the test's replacement
            # (a process of its own that starts Airflow) took over 30 s to land on Airflow 3.2.
            timeout=120,
        )
    return dag


poke_dag = _dag("dt_sensor_after_poke", "{{ data_interval_end }}", deferrable=False)
deferrable_dag = _dag("dt_sensor_after_deferrable", "{{ data_interval_end }}", deferrable=True)
# An instant that reads the clock (issue 37, point 5): rendered anew on each resume, it never held still.
since_now_dag = _dag("dt_sensor_since_now", "{{ macros.datetime.utcnow() }}", deferrable=True)
