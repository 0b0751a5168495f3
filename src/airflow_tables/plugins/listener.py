"""The provider's listener: a task's own notes go when its task instance has ended.

``import_csv`` inside a ``@task`` keeps a note of each import until the task instance ends
(a retry that follows a later step's failure returns the CardID instead of paying again:
:meth:`~airflow_tables.hooks.tables.DataTablesHook.import_csv`). Below Airflow 3.3 those notes
are Variables, which stay for ever unless deleted, and the user's own code has no place to
delete them: the operators wrap their steps (``_durable.forgotten_when_ended``), a ``@task``
does not. Airflow calls this listener in the task's process when the try has ended; the notes
this process wrote go once no later try can read them (the task succeeded, was skipped, or
failed for good), and stay while a retry may follow.
"""

from __future__ import annotations

from typing import Any

try:
    from airflow.listeners import hookimpl
except ImportError:  # a worker with the Task SDK only
    from airflow.sdk._shared.listeners import hookimpl

from airflow_tables._durable import task_instance_ended


@hookimpl
def on_task_instance_success(previous_state: Any, task_instance: Any) -> None:
    task_instance_ended(task_instance, final=True)


@hookimpl
def on_task_instance_skipped(previous_state: Any, task_instance: Any) -> None:
    task_instance_ended(task_instance, final=True)


@hookimpl
def on_task_instance_failed(previous_state: Any, task_instance: Any, error: Any) -> None:
    state = str(getattr(task_instance, "state", "") or "").rsplit(".", 1)[-1].lower()
    if state in ("failed", "up_for_retry"):
        final = state == "failed"
    else:  # an Airflow that does not set the state before its listeners: Airflow's own rule
        final = int(task_instance.try_number) > int(task_instance.max_tries)
    task_instance_ended(task_instance, final=final)
