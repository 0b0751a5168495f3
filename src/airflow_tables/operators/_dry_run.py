"""Dry runs: every check and free look a run makes, and, where it would pay or delete, its decision instead.

A decision is a :class:`Plan` (the XCom ``plan``: ``action``, ``card_id``, ``credits``, ``reason``).
The operators decide through the very flow a real run takes (``decide`` on each of them:
:func:`~airflow_tables.operators._send.decide_import`, the delete operator's own), so a
plan is what a run would do: the one place a paid import is sent, :class:`~airflow_tables.hooks.send_once.SendOnce`,
is stood in for by :class:`PlannedSend`, which raises :class:`Planned` where the request would go;
a delete raises it where ``delete_card`` would be called. Nothing after that point runs (no note,
no backfill record, no XCom of a CardID, no asset event). A refusal the real run would end with is
kept with its exception (:attr:`Plan.error`): a dry run inside a task ends as the run would, the
``airflow-tables plan`` command (:mod:`airflow_tables.planning`) reports it.

Waits are not waited: a replacement or delete of a table being read is decided on the one look
that found it so (the run would wait for the read to end, then do the same).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_tables.version_compat import AirflowFailException, AirflowSkipException, conf

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_tables.evidence import FileFacts
    from airflow_tables.model import Look
    from airflow_tables.sources import Source

#: The XCom key a dry run pushes its decision under.
PLAN_XCOM_KEY = "plan"
ACTIONS = ("create", "replace", "skip", "delete", "refuse")


@dataclass(frozen=True)
class Plan:
    """What a task would do to the service: the decision a dry run pushes and ``airflow-tables plan`` prints.

    :param action: ``"create"``, ``"replace"``, ``"skip"``, ``"delete"`` or ``"refuse"``.
    :param card_id: the table replaced, deleted or skipped (``None`` for a new table or an early refusal).
    :param credits: what the action would cost: 1 for an import or a replacement, else 0.
    :param reason: the sentence a person reads (for a refusal, the error the run would end with).
    :param project_id: the department, where the task got that far (per-department totals).
    :param error: the exception a real run would end with (a refusal, a skip); not published.
    """

    action: str
    card_id: str | None
    credits: int
    reason: str
    project_id: str | None = None
    error: BaseException | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"a plan's action is one of {ACTIONS}, not {self.action!r}")

    @property
    def refused(self) -> bool:
        return self.action == "refuse"

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "card_id": self.card_id,
            "credits": self.credits,
            "reason": self.reason,
            "project_id": self.project_id,
        }


class Planned(Exception):  # noqa: N818 - a decision, not an error: raised to stop the flow where it would send
    """Raised in a dry run where the paid request or the delete would be sent; carries the decision."""

    def __init__(self, plan: Plan) -> None:
        super().__init__(plan.reason)
        self.plan = plan


def dry_run_enabled(task: Any) -> bool:
    """The task's ``dry_run``, or ``[datatables] dry_run`` for the whole deployment."""
    return bool(getattr(task, "dry_run_only", False)) or conf.getboolean("datatables", "dry_run", fallback=False)


def decided(flow: Callable[[], Plan | None], project: Callable[[], str | None], nothing: Plan) -> Plan:
    """Run ``flow`` (a task's checks and looks, in dry-run form) and say what it decided.

    ``Planned`` is the decision; a refusal the run would fail with (``AirflowFailException``, a
    validation error) is ``refuse`` and a skip is ``skip`` (of ``nothing``'s table, the task's), each
    with the exception kept; ``flow``'s own plan (or ``nothing``, when it ended without one)
    otherwise. Any other error (the service unreachable, a file that looks still being written:
    ``CsvUnfinishedError``) is no decision: it is raised, as the run would leave it to its retries.
    """
    from airflow_tables.exceptions import CsvUnfinishedError, CsvValidationError

    try:
        plan = flow()
    except Planned as planned:
        return planned.plan
    except CsvUnfinishedError:  # a file still being written: the run leaves it to its retries, so does this
        raise
    except AirflowSkipException as skip:  # the table held back (if_older) or locked (if_locked="skip")
        return Plan("skip", nothing.card_id or None, 0, str(skip), _department(project), error=skip)
    except (AirflowFailException, CsvValidationError) as refusal:
        return Plan("refuse", None, 0, str(refusal), _department(project), error=refusal)
    return plan if plan is not None else nothing


def _department(project: Callable[[], str | None]) -> str | None:
    try:
        return project()
    except Exception:  # the refusal may be the department itself (an empty project_id)
        return None


def run_dry(task: Any, context: Context) -> str | None:
    """A dry run's ``execute``: the task's decision logged and pushed (XCom ``plan``), ending as the run would.

    The task's outlets are dropped for this try, so that Airflow records no asset event for it
    (nothing was written, and a DAG scheduled on the table must not run on a rehearsal).
    """
    plan = task.decide(context)
    task.outlets = []
    task.log.info(
        "Dry run: %s%s (%d credit%s): %s; nothing was sent",
        plan.action,
        f" {plan.card_id}" if plan.card_id else "",
        plan.credits,
        "" if plan.credits == 1 else "s",
        plan.reason,
    )
    context["ti"].xcom_push(key=PLAN_XCOM_KEY, value=plan.to_json())
    if plan.error is not None:
        raise plan.error
    return plan.card_id


class PlannedSend:
    """:class:`~airflow_tables.hooks.send_once.SendOnce` in a dry run: where the import would be sent, its decision.

    ``series`` is ``None`` (no job is started); ``seen`` is the look a replacement was decided on.
    """

    series = None

    def __init__(self) -> None:
        self.seen: Look | None = None

    def send_new(self, project: str, source: Source, *, table_name: str | None, facts: FileFacts | None) -> str:
        from airflow_tables.evidence import upload_name

        name = upload_name(source.name, table_name)
        raise Planned(Plan("create", None, 1, f"import {name} as a new table in department {project}", project))

    def send_replacement(
        self,
        project: str,
        source: Source,
        card_id: str,
        *,
        replaced_after: str | None,
        table_name: str | None,
        facts: FileFacts | None,
    ) -> str:
        from airflow_tables.model import TableStatus

        table = self.seen.table if self.seen is not None else None
        named = f" ({table.name})" if table is not None and table.name else ""
        when = ""
        if self.seen is not None and self.seen.status is TableStatus.BEING_READ:
            when = ", once the read under way ends"
        reason = f"replace the data of {card_id}{named} in department {project} with {source.name}{when}"
        raise Planned(Plan("replace", card_id, 1, reason, project))


def approval_needed(card_id: str, project: str, shown: list[str]) -> Planned:
    """A replacement that would wait for a person to approve a schema change (``on_schema_change="approve"``)."""
    reason = (
        f"replace the data of {card_id} in department {project} once a person approves the schema change: "
        + "; ".join(shown)
    )
    return Planned(Plan("replace", card_id, 1, reason, project))


__all__ = [
    "PLAN_XCOM_KEY",
    "Plan",
    "Planned",
    "PlannedSend",
    "approval_needed",
    "decided",
    "dry_run_enabled",
    "run_dry",
]
