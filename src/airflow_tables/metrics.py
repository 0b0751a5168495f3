"""Credit accounting you can watch: the provider's metrics, through Airflow's ``Stats``.

Names (all prefixed with Airflow's ``[metrics] statsd_prefix``), each tagged with the department
(``project_id``; plain StatsD drops tags): ``datatables.imports``, ``credits_spent``,
``bytes_uploaded``, ``imports_skipped`` (counters) and ``wait_seconds`` (a timer). docs/metrics.md
says what each counts and when; tests/lineage/test_metrics.py receives them with a StatsD listener.

Metrics never fail a task: where Airflow's ``Stats`` is not to be had, nothing is sent.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

log = logging.getLogger(__name__)

PREFIX = "datatables"


def _stats() -> Any:
    try:
        from airflow.sdk.observability.stats import Stats  # Airflow 3.2+
    except ImportError:
        try:
            from airflow.stats import Stats  # Airflow 3.1
        except ImportError:
            return None
    return Stats


def incr(name: str, count: int = 1, *, project_id: str | None = None) -> None:
    """Add ``count`` to counter ``datatables.<name>``."""
    stats = _stats()
    if stats is None:
        return
    try:
        stats.incr(f"{PREFIX}.{name}", count, tags=_tags(project_id))
    except Exception:  # a metrics backend must never fail an import that succeeded
        log.debug("could not send metric %s.%s", PREFIX, name, exc_info=True)


def timing(name: str, seconds: float, *, project_id: str | None = None) -> None:
    """Record ``seconds`` in timer ``datatables.<name>``."""
    stats = _stats()
    if stats is None:
        return
    try:
        stats.timing(f"{PREFIX}.{name}", timedelta(seconds=seconds), tags=_tags(project_id))
    except Exception:
        log.debug("could not send metric %s.%s", PREFIX, name, exc_info=True)


def _tags(project_id: str | None) -> dict[str, str]:
    return {"project_id": project_id} if project_id else {}
