"""What Airflow knows about the table of one import or replace task instance.

The operators push the CardID to XCom (key ``card_id``) as soon as the service has accepted
the file, before any wait; a successful task also records an asset event naming the table's
service and department. While the task still waits there is no event yet, so the
department is the task's rendered ``project_id`` (or, when it has none, the connection's).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from airflow_tables.plugins.events import task_event_ref

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from airflow_tables.assets import TableRef

CARD_ID_KEY = "card_id"


@dataclass(frozen=True)
class TaskFacts:
    """The task instance's CardID (and when it was pushed), its rendered department and its event's table."""

    card_id: str | None
    pushed_at: datetime | None
    project_id: str | None
    event_ref: TableRef | None


def _text(value: Any) -> str | None:
    """A string XCom or rendered field, whether stored as JSON text or already decoded."""
    if isinstance(value, str):
        try:
            decoded = json.loads(value)
        except ValueError:
            return value or None
        return decoded if isinstance(decoded, str) and decoded else None
    return None


def task_facts(session: Session, dag_id: str, run_id: str, task_id: str, map_index: int) -> TaskFacts:
    """Read the task instance's ``card_id`` XCom, its rendered ``project_id`` and its latest table event."""
    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.models.xcom import XComModel
    from sqlalchemy import select

    xcom = session.execute(
        select(XComModel.value, XComModel.timestamp).where(
            XComModel.dag_id == dag_id,
            XComModel.run_id == run_id,
            XComModel.task_id == task_id,
            XComModel.map_index == map_index,
            XComModel.key == CARD_ID_KEY,
        )
    ).first()
    rendered = session.scalar(
        select(RenderedTaskInstanceFields.rendered_fields).where(
            RenderedTaskInstanceFields.dag_id == dag_id,
            RenderedTaskInstanceFields.run_id == run_id,
            RenderedTaskInstanceFields.task_id == task_id,
            RenderedTaskInstanceFields.map_index == map_index,
        )
    )
    project = _text(rendered.get("project_id")) if isinstance(rendered, dict) else None
    return TaskFacts(
        card_id=_text(xcom.value) if xcom is not None else None,
        pushed_at=xcom.timestamp if xcom is not None else None,
        project_id=project,
        event_ref=task_event_ref(session, dag_id, run_id, task_id, map_index),
    )
