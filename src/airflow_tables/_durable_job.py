"""The stand-in for Airflow 3.3's ``ResumableJobMixin`` below 3.3, and the Variables it keeps a job in.

:mod:`airflow_tables.version_compat` chooses this mixin below 3.3, so this module imports
nothing of ours (in particular not :mod:`airflow_tables._durable`, which imports
``version_compat``): the choice is then made without an import cycle. The notes, their
signatures and their deletion are :mod:`airflow_tables._durable`'s, over the same
:class:`_VariableStore`.
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

    def __init__(self, context: Context | None, prefix: str | None = None) -> None:
        if prefix is None:
            assert context is not None
            ti = context["ti"]
            prefix = f"airflow_tables.state.{ti.dag_id}.{ti.run_id}.{ti.task_id}.{ti.map_index}."
        self.prefix = prefix
        self.description: str | None = None

    def get(self, key: str) -> Any:
        from airflow.sdk import Variable

        value = Variable.get(self.prefix + key, default=None)
        return None if value is None else json.loads(value)

    def set(self, key: str, value: Any) -> None:
        from airflow.sdk import Variable

        Variable.set(self.prefix + key, json.dumps(value), description=self.description)

    def delete(self, key: str) -> None:
        from airflow.sdk import Variable

        Variable.delete(self.prefix + key)


class DurableJobMixin:
    """``ResumableJobMixin``'s decisions for Airflow < 3.3, over :class:`_VariableStore`.

    Submit once per task instance, whatever the number of tries: a later try that finds the
    job of an earlier one waits on it (or returns its result) instead of submitting again. A
    Variable is writable by any DAG author, so a job the operator cannot authenticate
    (``is_job_authentic``: its signature, :class:`~airflow_tables._durable.SignedStore`) is
    deleted and taken as none.
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

        def is_job_authentic(self, external_id: JsonValue, context: Context) -> bool: ...

    # Operators' __init__ methods are wrapped by BaseOperatorMeta; a mixin's must be too (as the SDK's is).
    @BaseOperatorMeta._apply_defaults  # type: ignore[type-var]
    def __init__(self, *, durable: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.durable = durable

    def execute_resumable(self, context: Context) -> Any:
        store = _VariableStore(context) if self.durable else None
        external_id = store.get(self.external_id_key) if store is not None else None
        if store is not None and external_id is not None and not self.is_job_authentic(external_id, context):
            store.delete(self.external_id_key)  # forged or edited (see SignedStore): as if there were none
            external_id = None
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


__all__ = ["DurableJobMixin"]
