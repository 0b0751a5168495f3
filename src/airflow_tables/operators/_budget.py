"""``on_budget_exhausted``: a department's spent credit budget fails the task, or waits for the next UTC day.

The budget itself is claimed by the hook before its one paid request (:mod:`airflow_tables.hooks._budget`);
what a task does when the claim is refused is decided here: ``"fail"`` is a row of
:mod:`~airflow_tables.operators._refusals` (no retry), ``"wait"`` defers the task until the budget's
next day (UTC midnight by :func:`airflow_tables.budget.utc_now`), then runs it again from its checks.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

from airflow_tables import budget
from airflow_tables.exceptions import DataTablesBudgetExceededError

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_tables.operators.tables import DataTablesImportOperator

CHOICES = ("fail", "wait")
#: The method a task waiting for its budget resumes in.
RESUME_METHOD = "execute_after_budget"


def check_choice(on_budget_exhausted: str) -> None:
    if on_budget_exhausted not in CHOICES:
        raise ValueError(f"on_budget_exhausted must be 'fail' or 'wait', not {on_budget_exhausted!r}")


@contextlib.contextmanager
def waiting_for_budget(task: DataTablesImportOperator) -> Iterator[None]:
    """Around the send: with ``on_budget_exhausted="wait"``, a spent budget defers the task to the next UTC day."""
    try:
        yield
    except DataTablesBudgetExceededError as spent:
        if task.on_budget_exhausted != "wait":
            raise
        from airflow.providers.standard.triggers.temporal import DateTimeTrigger

        now = budget.utc_now()
        tomorrow = budget.next_day(now)
        task.log.warning("%s; waiting until %s (on_budget_exhausted='wait')", spent.msg, tomorrow.isoformat())
        # The budget's midnight, on the triggerer's clock (the same, unless the budget's clock was replaced).
        task.defer(trigger=DateTimeTrigger(moment=datetime.now(UTC) + (tomorrow - now)), method_name=RESUME_METHOD)


class BudgetResume:
    """The import operator's resume at the budget's next day (``on_budget_exhausted="wait"``)."""

    def execute_after_budget(self, context: Context, event: Any = None) -> str | None:
        """Run the task again, checked and sent as a first run would be: the claim is made afresh."""
        return cast("DataTablesImportOperator", self).execute(context)


__all__ = ["CHOICES", "RESUME_METHOD", "BudgetResume", "check_choice", "waiting_for_budget"]
