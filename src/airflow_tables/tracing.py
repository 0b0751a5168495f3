"""OpenTelemetry spans around what takes a task's time: the validation, the send, the wait.

Airflow 3.3 and later run a task inside a span of its own (``worker.<task_id>``) when
``[traces] otel_on`` is set, through OpenTelemetry's global tracer provider; a span started here
while the task runs is its child, so a trace shows where an import's time went. Where no provider
is configured (``otel_on`` off, or Airflow 3.1 and 3.2, whose task SDK sets none up in the task's
process) OpenTelemetry's own API makes these spans no-ops that cost a few microseconds. A
deferred wait runs in the triggerer, outside any task span, and has none.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

#: The instrumentation scope the spans are reported under.
TRACER_NAME = "airflow_tables"


@contextlib.contextmanager
def span(name: str, **attributes: Any) -> Iterator[None]:
    """A span ``datatables.<name>``, a child of the current one, with the attributes given (but ``None``'s)."""
    try:
        from opentelemetry import trace
    except ImportError:  # OpenTelemetry's API comes with Airflow; without it there is nothing to report to
        yield
        return
    shown = {f"datatables.{key}": value for key, value in attributes.items() if value is not None}
    with trace.get_tracer(TRACER_NAME).start_as_current_span(f"datatables.{name}", attributes=shown):
        yield
