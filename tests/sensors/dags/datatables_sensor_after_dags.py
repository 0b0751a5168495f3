"""DAGs for the sensor's ``completed_after``: wait for a read that finished after the run's data interval."""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_tables.sensors.tables import DataTablesProcessedSensor


def _dag(mode: str) -> DAG:
    with DAG(f"dt_sensor_after_{mode}", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
        DataTablesProcessedSensor(
            task_id="wait",
            card_id="{{ params.card_id }}",
            completed_after="{{ data_interval_end }}",
            deferrable=mode == "deferrable",
            poke_interval=0.2,
            timeout=30,
        )
    return dag


poke_dag = _dag("poke")
deferrable_dag = _dag("deferrable")

# An instant that reads the clock (issue 37, point 5): rendered anew on each resume, it never held still.
with DAG("dt_sensor_since_now", schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as since_now_dag:
    DataTablesProcessedSensor(
        task_id="wait",
        card_id="{{ params.card_id }}",
        completed_after="{{ macros.datetime.utcnow() }}",
        deferrable=True,
        poke_interval=0.2,
        timeout=20,
    )
