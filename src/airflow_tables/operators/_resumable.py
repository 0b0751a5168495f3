"""``ResumableJobMixin`` on every supported Airflow: the SDK's on 3.3+, a durable stand-in below.

Airflow 3.3's mixin keeps the CardID of an accepted import in the task state store,
so a retried task re-attaches to the table instead of paying for a second import.
Below 3.3 there is no task state store, and the stand-in of
``airflow.providers.common.compat`` simply imports again on every try, which would
spend a credit per retry. This stand-in keeps the id in an Airflow Variable keyed by
the task instance instead (Airflow clears a task's XComs when it retries, so XCom
cannot hold it), and follows the SDK's decision steps.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

try:
    from airflow.sdk import ResumableJobMixin
except ImportError:  # Airflow < 3.3

    class ResumableJobMixin:  # type: ignore[no-redef]
        """Submit once per task instance, whatever the number of tries (see the module docstring)."""

        external_id_key: str = "remote_job_id"

        def __init__(self, *, durable: bool = True, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.durable = durable

        def _variable_key(self, context: Context) -> str:
            ti = context["ti"]
            return f"airflow_tables.resume.{ti.dag_id}.{ti.run_id}.{ti.task_id}.{ti.map_index}.{self.external_id_key}"

        def execute_resumable(self, context: Context) -> Any:
            from airflow.sdk import Variable

            key = self._variable_key(context)
            stored = Variable.get(key, default=None) if self.durable else None
            if stored is not None:
                external_id = json.loads(stored)
                status = self.get_job_status(external_id, context)
                if self.is_job_active(status):
                    self.log.info("Reconnecting to %s from an earlier try", external_id)
                    self.poll_until_complete(external_id, context)
                    return self.get_job_result(external_id, context)
                if self.is_job_succeeded(status):
                    return self.get_job_result(external_id, context)
            external_id = self.submit_job(context)
            if self.durable and external_id is not None:
                Variable.set(key, json.dumps(external_id))
            self.poll_until_complete(external_id, context)
            return self.get_job_result(external_id, context)


if TYPE_CHECKING:
    from airflow.sdk import Context

__all__ = ["ResumableJobMixin"]
