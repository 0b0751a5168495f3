"""Which ``datatables`` connections the page shows, and what it may say about each (never the key).

Airflow lists connections from its database only; deployments often keep them in
``AIRFLOW_CONN_*`` variables instead (so does this project's own test stack), so both are
read. Connections that only a secrets backend holds cannot be enumerated; the page says so
in docs/ui.md rather than guessing.
"""

from __future__ import annotations

import json
import os
from urllib.parse import urlsplit

from airflow_tables.plugins.models import ConnectionInfo

CONN_TYPE = "datatables"
ENV_PREFIX = "AIRFLOW_CONN_"


def _is_datatables_value(value: str) -> bool:
    """Whether an ``AIRFLOW_CONN_*`` value (JSON or URI form) is a ``datatables`` connection."""
    text = value.strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError:
            return False
        return isinstance(data, dict) and data.get("conn_type") == CONN_TYPE
    return urlsplit(text).scheme.replace("-", "_") == CONN_TYPE


def env_conn_ids(environ: dict[str, str] | None = None) -> list[str]:
    """Ids of the ``datatables`` connections defined as environment variables (Airflow's ids are lower case)."""
    environ = dict(os.environ if environ is None else environ)
    return sorted(
        name[len(ENV_PREFIX) :].lower()
        for name, value in environ.items()
        if name.startswith(ENV_PREFIX) and len(name) > len(ENV_PREFIX) and _is_datatables_value(value)
    )


def db_conn_ids() -> list[str]:
    """Ids of the ``datatables`` connections in Airflow's database."""
    from airflow.models.connection import Connection
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        return sorted(session.scalars(select(Connection.conn_id).where(Connection.conn_type == CONN_TYPE)))


def discover() -> list[str]:
    """Every ``datatables`` connection id Airflow can enumerate: its database and its environment."""
    return sorted(set(db_conn_ids()) | set(env_conn_ids()))


def describe(conn_id: str) -> ConnectionInfo:
    """Resolve one connection as the hook would; a connection that cannot be used gets a reason, not a traceback."""
    from airflow_tables.assets import service_of
    from airflow_tables.hooks.tables import DataTablesHook

    try:
        settings = DataTablesHook(conn_id).settings
    except ValueError as err:  # the hook's own checks: messages name the field, never the key
        return ConnectionInfo(conn_id=conn_id, error=str(err))
    except Exception as err:  # noqa: BLE001 - a missing or unreadable connection is shown, not raised
        return ConnectionInfo(conn_id=conn_id, error=f"the connection could not be read ({type(err).__name__})")
    return ConnectionInfo(
        conn_id=conn_id,
        service=service_of(settings.base_url),
        project_id=settings.project_id,
        app_url=settings.app_url,
    )
