"""The harness's own DAG: one plain task, then one that defers to the triggerer for a few seconds.

Loaded by the end-to-end stack as a DAG bundle of its own (``e2e-smoke``), never from
the repo's ``dags/`` folder.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.providers.standard.triggers.temporal import DateTimeTrigger
from airflow.sdk import DAG, BaseOperator, task

WAIT_SECONDS = 6


class WaitInTriggerer(BaseOperator):
    """Defer until ``seconds`` after the task starts: deterministic, whatever the run's dates."""

    def __init__(self, *, seconds: float, **kwargs) -> None:
        super().__init__(**kwargs)
        self.seconds = seconds

    def execute(self, context):
        moment = datetime.now(UTC) + timedelta(seconds=self.seconds)
        self.defer(trigger=DateTimeTrigger(moment=moment), method_name="resume")

    def resume(self, context, event=None):
        return "woke up"


with DAG(dag_id="e2e_smoke", schedule=None, start_date=datetime(2024, 1, 1), catchup=False, tags=["e2e"]):

    @task
    def hello() -> str:
        print("hello is written to the task's log")
        return "hello from a worker"

    hello() >> WaitInTriggerer(task_id="wait_in_triggerer", seconds=WAIT_SECONDS)
