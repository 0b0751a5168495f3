"""State that survives a task's retries, and the stand-in for ``ResumableJobMixin`` below Airflow 3.3.

Airflow 3.3's ``ResumableJobMixin`` keeps the CardID of an accepted import in the task
state store, so a retried task re-attaches to the table instead of paying for a second
import. Below 3.3 there is no task state store, and the stand-in of
``airflow.providers.common.compat`` simply imports again on every try, which would
spend a credit per retry. Here, below 3.3, the same decisions are taken over an Airflow
Variable keyed by the task instance (Airflow clears a task's XComs when it retries, so
XCom cannot hold it). :func:`durable_store` gives the operators that same store for
their own notes (an import whose answer was lost). Which mixin the operators get is
decided in :mod:`airflow_tables.version_compat`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from airflow.sdk.bases.operator import BaseOperatorMeta

if TYPE_CHECKING:
    from logging import Logger

    from airflow.sdk import Context
    from pydantic import JsonValue


class _VariableStore:
    """``get``/``set``/``delete`` of JSON values in Airflow Variables, scoped to one task instance."""

    def __init__(self, context: Context) -> None:
        ti = context["ti"]
        self._prefix = f"airflow_tables.state.{ti.dag_id}.{ti.run_id}.{ti.task_id}.{ti.map_index}."

    def get(self, key: str) -> Any:
        from airflow.sdk import Variable

        value = Variable.get(self._prefix + key, default=None)
        return None if value is None else json.loads(value)

    def set(self, key: str, value: Any) -> None:
        from airflow.sdk import Variable

        Variable.set(self._prefix + key, json.dumps(value))

    def delete(self, key: str) -> None:
        from airflow.sdk import Variable

        Variable.delete(self._prefix + key)


def durable_store(context: Context) -> Any:
    """The task instance's store that outlives its tries: the task state store, or Variables below 3.3."""
    store = context.get("task_state_store")
    return store if store is not None else _VariableStore(context)


class DurableJobMixin:
    """``ResumableJobMixin``'s decisions for Airflow < 3.3, over :class:`_VariableStore`.

    Submit once per task instance, whatever the number of tries: a later try that finds the
    job of an earlier one waits on it (or returns its result) instead of submitting again.
    """

    external_id_key: str  # set by the operator, as with the SDK's mixin
    if TYPE_CHECKING:  # what the operator provides; declared for the checker only, so nothing here shadows it
        log: Logger

        def submit_job(self, context: Context) -> JsonValue: ...

        def get_job_status(self, external_id: JsonValue, context: Context) -> str: ...

        def is_job_active(self, status: str) -> bool: ...

        def is_job_succeeded(self, status: str) -> bool: ...

        def poll_until_complete(self, external_id: JsonValue, context: Context) -> None: ...

        def get_job_result(self, external_id: JsonValue, context: Context) -> Any: ...

    # Operators' __init__ methods are wrapped by BaseOperatorMeta; a mixin's must be too (as the SDK's is).
    @BaseOperatorMeta._apply_defaults  # type: ignore[type-var]
    def __init__(self, *, durable: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.durable = durable

    def execute_resumable(self, context: Context) -> Any:
        store = _VariableStore(context) if self.durable else None
        external_id = store.get(self.external_id_key) if store is not None else None
        if external_id is not None:
            status = self.get_job_status(external_id, context)
            if self.is_job_active(status):
                self.log.info("Reconnecting to %s from an earlier try", external_id)
                self.poll_until_complete(external_id, context)
                return self.get_job_result(external_id, context)
            if self.is_job_succeeded(status):
                return self.get_job_result(external_id, context)
        external_id = self.submit_job(context)
        if store is not None and external_id is not None:
            store.set(self.external_id_key, external_id)
        self.poll_until_complete(external_id, context)
        return self.get_job_result(external_id, context)


__all__ = ["DurableJobMixin", "durable_store"]
