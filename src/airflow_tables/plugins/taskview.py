"""What Airflow knows about the table of one import or replace task instance.

The operators push the CardID to XCom (key ``card_id``) as soon as the service has accepted
the file, before any wait; a successful task also records an asset event naming the table's
service and department. While the task still waits there is no event yet, so the
department is the task's rendered ``project_id`` (or, when it has none, the connection's).

The connection the task used (:func:`used_connection`) is not among its rendered fields;
the task's "Open table" link XCom (``{app_url}/projects/<ProjectID>/cards/<CardID>``) and its
event's service tell it, and a ``datatables_conn_id`` XCom names it outright when present.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from airflow_tables.links import CARD_ID_XCOM_KEY
from airflow_tables.plugins.events import task_event_ref
from airflow_tables.plugins.events import xcom_text as _text

if TYPE_CHECKING:
    from collections.abc import Sequence

    from sqlalchemy.orm import Session

    from airflow_tables.assets import TableRef
    from airflow_tables.plugins.models import ConnectionInfo

CONN_ID_KEY = "datatables_conn_id"


@dataclass(frozen=True)
class TaskFacts:
    """The task instance's CardID (and when it was pushed), its rendered department and its event's table."""

    card_id: str | None
    pushed_at: datetime | None
    project_id: str | None
    event_ref: TableRef | None
    link: str | None = None
    conn_id: str | None = None


def task_facts(session: Session, dag_id: str, run_id: str, task_id: str, map_index: int) -> TaskFacts:
    """Read the task instance's ``card_id`` XCom, its rendered ``project_id`` and its latest table event."""
    from airflow.models.xcom import XComModel
    from sqlalchemy import select

    from airflow_tables.links import DataTablesTableLink
    from airflow_tables.version_compat import rendered_fields_query

    link_key = DataTablesTableLink().xcom_key
    pushed = {
        key: (value, timestamp)
        for key, value, timestamp in session.execute(
            select(XComModel.key, XComModel.value, XComModel.timestamp).where(
                XComModel.dag_id == dag_id,
                XComModel.run_id == run_id,
                XComModel.task_id == task_id,
                XComModel.map_index == map_index,
                XComModel.key.in_([CARD_ID_XCOM_KEY, CONN_ID_KEY, link_key]),
            )
        )
    }
    xcom = pushed.get(CARD_ID_XCOM_KEY)
    rendered = session.scalar(rendered_fields_query(dag_id, run_id, task_id, map_index))
    project = _text(rendered.get("project_id")) if isinstance(rendered, dict) else None
    return TaskFacts(
        card_id=_text(xcom[0]) if xcom is not None else None,
        pushed_at=xcom[1] if xcom is not None else None,
        project_id=project,
        event_ref=task_event_ref(session, dag_id, run_id, task_id, map_index),
        link=_text(pushed[link_key][0]) if link_key in pushed else None,
        conn_id=_text(pushed[CONN_ID_KEY][0]) if CONN_ID_KEY in pushed else None,
    )


def used_connection(facts: TaskFacts, connections: Sequence[ConnectionInfo]) -> tuple[ConnectionInfo, str] | None:
    """The connection the task used and the department of its table, or ``None`` when none can be told.

    In order: the connection its ``datatables_conn_id`` XCom names; the one whose link to the
    table is the task's "Open table" link; the one of the service its event names (or, with no
    event yet, the only connection there is). Only usable connections are passed.
    """
    from airflow_tables.links import table_url

    card_id = facts.card_id or ""
    ref = facts.event_ref

    def department(info: ConnectionInfo) -> str | None:
        return ref.project_id if ref is not None else (facts.project_id or info.project_id)

    if facts.conn_id:
        named = next((info for info in connections if info.conn_id == facts.conn_id), None)
        project = None if named is None else department(named)
        return (named, project) if named is not None and project else None
    if facts.link:
        for info in connections:
            project = department(info)
            if project and info.app_url and table_url(info.app_url, project, card_id) == facts.link:
                return info, project
        return None  # the task's connection has an app_url that no connection here has
    same_service = [info for info in connections if ref is None or info.service == ref.service]
    # No link (the task's connection has no app_url, or the task is older than the link): those
    # of the service without app_url first.
    for info in [info for info in same_service if not info.app_url] or same_service:
        project = department(info)
        if project:
            return info, project
    return None
