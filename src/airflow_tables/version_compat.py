"""Every difference between the Airflow minors we support, in one place (as the ASF providers' ``version_compat``).

The provider supports Airflow 3.1, 3.2 and 3.3, and is tested on 3.4's pre-release
(``constraints/airflow-3.N.txt``). Modules
import from here what is not the same on all of them, instead of testing versions or
catching ``ImportError`` themselves:

* ``conf``: ``airflow.sdk`` has it from 3.2; on 3.1 it is ``airflow.configuration.conf``.
* ``AirflowException``, ``AirflowFailException``, ``AirflowSkipException``, ``TaskDeferred``: the
  Task SDK's own from 3.2. On 3.1 ``airflow.sdk.exceptions`` lacks the last three and the task
  runner catches (and ``defer()`` raises) ``airflow.exceptions``' classes, so those are the ones
  a task must raise, and catch, there.
* :func:`newest_asset_events`: a task reads any asset's events, newest first, through the
  Task SDK's ``InletEventsAccessor`` from 3.2; 3.1 has no such accessor, only the message
  under it, which returns every event, oldest first.
* :func:`rendered_fields_query`: a task instance's rendered template fields are keyed by its
  DAG, run, task and map index up to 3.3, and by the task instance's id from 3.4.
* ``ResumableJobMixin``: the Task SDK's from 3.3 (its task state store keeps the CardID
  across retries); below 3.3, :class:`~airflow_tables._durable_job.DurableJobMixin`
  takes the same decisions over an Airflow Variable.
"""

from __future__ import annotations

from typing import Any


def get_base_airflow_version_tuple() -> tuple[int, int, int]:
    """The installed Airflow's (major, minor, micro), pre-release and local parts ignored."""
    from airflow import __version__
    from packaging.version import Version

    version = Version(__version__)
    return version.major, version.minor, version.micro


AIRFLOW_V_3_2_PLUS = get_base_airflow_version_tuple() >= (3, 2, 0)
AIRFLOW_V_3_3_PLUS = get_base_airflow_version_tuple() >= (3, 3, 0)
AIRFLOW_V_3_4_PLUS = get_base_airflow_version_tuple() >= (3, 4, 0)

if AIRFLOW_V_3_2_PLUS:
    from airflow.sdk import conf
    from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowSkipException, TaskDeferred
else:
    from airflow.configuration import conf  # type: ignore[assignment]  # 3.1's config object, the same API
    from airflow.exceptions import (  # type: ignore[no-redef]  # 3.1's classes, which its task runner catches
        AirflowException,
        AirflowFailException,
        AirflowSkipException,
        TaskDeferred,
    )

if AIRFLOW_V_3_3_PLUS:
    from airflow.sdk import ResumableJobMixin
else:
    from airflow_tables._durable_job import DurableJobMixin as ResumableJobMixin  # type: ignore[assignment]


def newest_asset_events(name: str, uri: str, limit: int) -> list:
    """The asset's newest ``limit`` events (``AssetEventResult``), newest first; read from inside a task."""
    if AIRFLOW_V_3_2_PLUS:
        from airflow.sdk.execution_time.context import InletEventsAccessor

        return list(InletEventsAccessor(asset_name=name, asset_uri=uri).ascending(False).limit(limit))
    from airflow.sdk.exceptions import AirflowRuntimeError
    from airflow.sdk.execution_time.comms import AssetEventsResult, ErrorResponse, GetAssetEventByAsset
    from airflow.sdk.execution_time.task_runner import SUPERVISOR_COMMS

    answer = SUPERVISOR_COMMS.send(GetAssetEventByAsset(name=name, uri=uri))
    if isinstance(answer, ErrorResponse):
        raise AirflowRuntimeError(answer)
    if not isinstance(answer, AssetEventsResult):
        raise TypeError(f"the supervisor answered a request for asset events with {type(answer).__name__}")
    events = sorted(answer.iter_asset_event_results(), key=lambda event: event.timestamp, reverse=True)
    return events[:limit]


def rendered_fields_query(dag_id: str, run_id: str, task_id: str, map_index: int) -> Any:
    """The select of a task instance's rendered template fields (a dict), for the api-server's session.

    Up to 3.3 the table is keyed by the task instance's DAG, run, task and map index; from 3.4 by
    the task instance's id, so the task instance is joined.
    """
    from airflow.models.renderedtifields import RenderedTaskInstanceFields as Rendered
    from sqlalchemy import select

    if not AIRFLOW_V_3_4_PLUS:
        return select(Rendered.rendered_fields).where(
            Rendered.dag_id == dag_id,
            Rendered.run_id == run_id,
            Rendered.task_id == task_id,
            Rendered.map_index == map_index,
        )
    from airflow.models.taskinstance import TaskInstance

    return (
        select(Rendered.rendered_fields)
        .join(TaskInstance, TaskInstance.id == Rendered.task_instance_id)
        .where(
            TaskInstance.dag_id == dag_id,
            TaskInstance.run_id == run_id,
            TaskInstance.task_id == task_id,
            TaskInstance.map_index == map_index,
        )
    )


__all__ = [
    "AIRFLOW_V_3_2_PLUS",
    "AIRFLOW_V_3_3_PLUS",
    "AIRFLOW_V_3_4_PLUS",
    "AirflowException",
    "AirflowFailException",
    "AirflowSkipException",
    "ResumableJobMixin",
    "TaskDeferred",
    "conf",
    "newest_asset_events",
    "rendered_fields_query",
]
