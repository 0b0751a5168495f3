"""``airflow-tables plan``: what a DAG run would do to the Data Tables Service, and cost, before it runs.

The DAG is loaded as ``airflow dags test`` loads it; each Data Tables task of the run (an operator
with ``decide``: import, replace, delete, the SQL transfer) has its templates rendered for that run
and is asked for its decision by the very code a dry run executes (:mod:`airflow_tables.operators._dry_run`),
so a plan is what the run would do. Only free requests reach the service (list, fetch).

What the task would read of Airflow (Variables, connections, asset events, XComs) it reads as it
would in a task, through Airflow's in-process Execution API (the one ``dag.test()`` uses), so this
runs where the Airflow CLI runs: with the deployment's configuration and its metadata database.

What the run would learn first is not known: a task whose arguments come from an upstream task's
result (an ``XComArg``, ``ti.xcom_pull`` in a template), or that is mapped over one, is reported as
``unknown`` (no decision, no credit counted), naming that task. Tasks run one after another in the
DAG's order, as one run's instances of a mapped task would see each other (a mapped import's two
instances of one name are refused as the run would refuse the later one).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

#: A decision the planner could not make: the task needs what the run learns first.
UNKNOWN = "unknown"
#: The logger Airflow's templating logs a failed template on, with its traceback.
TEMPLATER_LOGGER = "airflow.sdk.definitions._internal.templater"


class NotKnownBeforeTheRun(Exception):  # noqa: N818 - a fact about the run, reported as such
    """A task's argument (or its mapping) needs an upstream task's result, which only the run has."""

    def __init__(self, task_ids: Any) -> None:
        names = [task_ids] if isinstance(task_ids, str) else list(task_ids or [])
        upstream = ", ".join(names) or "an upstream task"
        super().__init__(f"needs the result of {upstream}, known only once the run has it")


@dataclass(frozen=True)
class Decision:
    """One task instance's line of the plan: its decision (``plan``), or why there is none (``unknown``)."""

    task_id: str
    map_index: int | None
    plan: Any | None  # operators._dry_run.Plan
    unknown: str | None = None

    @property
    def refused(self) -> bool:
        return self.plan is not None and self.plan.refused

    def to_json(self) -> dict[str, Any]:
        if self.plan is None:
            head = {"action": UNKNOWN, "card_id": None, "credits": None, "reason": self.unknown, "project_id": None}
        else:
            head = self.plan.to_json()
        return {"task_id": self.task_id, "map_index": self.map_index, **head}


@dataclass(frozen=True)
class RunPlan:
    """The decisions of one run, in the DAG's order, and what they cost."""

    dag_id: str
    run_id: str
    logical_date: datetime | None
    decisions: list[Decision]

    @property
    def credits(self) -> int:
        return sum(d.plan.credits for d in self.decisions if d.plan is not None)

    def credits_by_department(self) -> dict[str, int]:
        found: dict[str, int] = {}
        for decision in self.decisions:
            plan = decision.plan
            if plan is not None and plan.credits:
                found[plan.project_id or "?"] = found.get(plan.project_id or "?", 0) + plan.credits
        return found

    @property
    def refused(self) -> bool:
        return any(d.refused for d in self.decisions)

    def to_json(self) -> dict[str, Any]:
        return {
            "dag_id": self.dag_id,
            "run_id": self.run_id,
            "logical_date": self.logical_date.isoformat() if self.logical_date else None,
            "tasks": [d.to_json() for d in self.decisions],
            "credits": self.credits,
            "credits_by_department": self.credits_by_department(),
            "refused": self.refused,
        }

    def to_text(self) -> str:
        when = self.logical_date.isoformat() if self.logical_date else "none"
        lines = [f"Plan of DAG {self.dag_id}, run {self.run_id} (logical date {when}):"]
        width = max((len(_label(d)) for d in self.decisions), default=0)
        for decision in self.decisions:
            row = decision.to_json()
            cost = "" if row["credits"] is None else f"{row['credits']} credit{'' if row['credits'] == 1 else 's'}"
            # A reason of several lines (a validation report's problems) stays in its column.
            reason = str(row["reason"]).replace("\n", "\n" + " " * (width + 23))
            lines.append(f"  {_label(decision):<{width}}  {row['action']:<8} {cost:<9} {reason}")
        if not self.decisions:
            lines.append("  (no Data Tables task)")
        by_department = ", ".join(f"{p}: {n}" for p, n in sorted(self.credits_by_department().items()))
        total = f"Total: {self.credits} credit{'' if self.credits == 1 else 's'}"
        lines.append(total + (f" ({by_department})" if by_department else ""))
        refused = sum(d.refused for d in self.decisions)
        if refused:
            lines.append(f"{refused} task(s) would be refused: the run would fail there.")
        unknown = sum(d.plan is None for d in self.decisions)
        if unknown:
            lines.append(f"{unknown} task(s) depend on what the run learns first: not counted.")
        return "\n".join(lines)


def _label(decision: Decision) -> str:
    return decision.task_id if decision.map_index is None else f"{decision.task_id}[{decision.map_index}]"


def plan_dag_run(dag_id: str, logical_date: datetime | None = None, conf: dict[str, Any] | None = None) -> RunPlan:
    """The plan of a manual run of ``dag_id`` at ``logical_date`` (default: now) with ``conf``."""
    from airflow.utils.cli import get_bagged_dag

    dag = get_bagged_dag(None, dag_id)
    when = logical_date or datetime.now(UTC)
    run_id = f"manual__{when.isoformat()}"
    run = _PlannedRun(dag, run_id, when, conf or {})
    with _execution_api(dag):
        decisions = [decision for task in _in_order(dag) if _decides(task) for decision in run.decide(task)]
    return RunPlan(dag.dag_id, run_id, when, decisions)


def _decides(task: Any) -> bool:
    """A Data Tables task with a decision to make (the sensor only looks: it costs nothing and is not listed)."""
    cls = getattr(task, "operator_class", type(task))
    ours = isinstance(cls, type) and cls.__module__.startswith("airflow_tables")
    return ours and callable(getattr(cls, "decide", None))


def _literal_map_length(task: Any) -> int | None:
    """How many instances a task mapped over literal values has (``expand``: the product of the lists' lengths,
    ``expand_kwargs``: the list's); ``None`` when it is mapped over what an upstream task returns."""
    value = getattr(task._get_specified_expand_input(), "value", None)
    if isinstance(value, dict):
        count = 1
        for values in value.values():
            if not isinstance(values, list | tuple | dict):
                return None
            count *= len(values)
        return count
    return len(value) if isinstance(value, list | tuple) else None


def _in_order(dag: Any) -> list[Any]:
    sort = getattr(dag, "topological_sort", None)
    return list(sort()) if callable(sort) else list(dag.tasks)


@contextlib.contextmanager
def _execution_api(dag: Any) -> Iterator[None]:
    """What a task asks of Airflow (Variables, connections, asset events) answered in-process, as in ``dag.test()``."""
    import os

    import psutil
    import structlog
    from airflow.sdk.execution_time.supervisor import (
        InProcessSupervisorComms,
        InProcessTestSupervisor,
        set_supervisor_comms,
    )

    supervisor = InProcessTestSupervisor(
        id=uuid.uuid4(),
        pid=os.getpid(),
        process=psutil.Process(),
        process_log=structlog.get_logger(logger_name="airflow_tables.plan"),
        client=InProcessTestSupervisor._api_client(dag),
    )
    supervisor.comms = InProcessSupervisorComms(supervisor=supervisor)
    with set_supervisor_comms(supervisor.comms):
        yield


class _PlannedRun:
    """One run that never happens: its template context, and the XComs its Data Tables tasks push to each other."""

    def __init__(self, dag: Any, run_id: str, logical_date: datetime, conf: dict[str, Any]) -> None:
        self.dag = dag
        self.run_id = run_id
        self.logical_date = logical_date
        self.conf = conf
        self.xcoms: dict[tuple[str, str], dict[int, Any]] = {}
        self.budgets = _BudgetsLeft()

    def decide(self, task: Any) -> list[Decision]:
        from airflow.sdk.definitions.mappedoperator import MappedOperator

        if not isinstance(task, MappedOperator):
            return [self._decide_one(task, None)]
        count = _literal_map_length(task)
        if count is None:  # mapped over an upstream result
            upstream = sorted(getattr(task, "upstream_task_ids", ()) or ())
            return [Decision(task.task_id, None, None, str(NotKnownBeforeTheRun(upstream)) + " (it is mapped over it)")]
        return [self._decide_one(task, index) for index in range(count)]

    def _decide_one(self, task: Any, map_index: int | None) -> Decision:
        from airflow_tables.exceptions import CsvUnfinishedError

        context = self._context(task, -1 if map_index is None else map_index)
        try:
            with _quiet(TEMPLATER_LOGGER):  # a template that needs an upstream result is a fact here, not an error
                task.render_template_fields(context)
        except NotKnownBeforeTheRun as unknown:
            return Decision(task.task_id, map_index, None, str(unknown))
        except Exception as err:  # the run would fail there too, before its first check
            from airflow_tables.operators._dry_run import Plan

            reason = f"its templates do not render ({type(err).__name__}: {err})"
            return Decision(task.task_id, map_index, Plan("refuse", None, 0, reason, error=err))
        rendered = context["task"]  # a mapped task's rendering puts its unmapped form here
        # A plan is a dry run of the task: what asks for it (an approval's form) decides instead of asking.
        rendered.dry_run_only = True
        try:
            return Decision(task.task_id, map_index, self.budgets.applied(rendered, rendered.decide(context)))
        except NotKnownBeforeTheRun as unknown:
            return Decision(task.task_id, map_index, None, str(unknown))
        except CsvUnfinishedError as unfinished:  # what the file will hold is known once its writer is done
            reason = (
                f"{unfinished.path} looks still being written (its last record cut short, modified "
                f"{unfinished.age:.0f} s ago): the run's retries read it again"
            )
            return Decision(task.task_id, map_index, None, reason)

    def _context(self, task: Any, map_index: int) -> Any:
        """The template context the run's task instance would have (Airflow's own, built for a run not stored)."""
        from airflow.sdk.api.datamodels._generated import DagRun, TIRunContext

        start, end = _manual_data_interval(self.dag, self.logical_date)
        now = datetime.now(UTC)
        dag_run = DagRun.model_construct(
            dag_id=self.dag.dag_id,
            run_id=self.run_id,
            logical_date=self.logical_date,
            data_interval_start=start,
            data_interval_end=end,
            run_after=self.logical_date,
            start_date=now,
            end_date=None,
            clear_number=0,
            run_type="manual",
            state="running",
            conf=self.conf,
            consumed_asset_events=[],
            triggering_user_name=None,
            partition_key=None,
        )
        ti_context = TIRunContext.model_construct(
            dag_run=dag_run,
            task_reschedule_count=0,
            max_tries=getattr(task, "retries", 0) or 0,
            variables=[],
            connections=[],
            upstream_map_indexes=None,
            next_method=None,
            next_kwargs=None,
            xcom_keys_to_clear=[],
            should_retry=False,
        )
        ti = _planned_task_instance(self, task, map_index, ti_context, now)
        return ti.get_template_context()


class _BudgetsLeft:
    """What each budgeted department has left today (its ledger, read once), spent by the plan's paid tasks in order.

    A paid task past its department's budget is refused, as the run would refuse it (or, with
    ``on_budget_exhausted="wait"``, keeps its action and says it would wait for the next UTC day).
    """

    def __init__(self) -> None:
        self.left: dict[tuple[str, str], int | str | None] = {}

    def applied(self, task: Any, plan: Any) -> Any:
        from dataclasses import replace

        if plan.credits < 1 or not plan.project_id:
            return plan
        left = self._left(task, plan.project_id)
        if left is None:
            return plan
        key = (task.hook.settings.base_url, plan.project_id)
        if isinstance(left, str):  # the ledger could not be read: the run would send nothing either
            return replace(plan, action="refuse", credits=0, reason=left)
        if left > 0:
            self.left[key] = left - 1
            return plan
        spent = f"the credit budget of department {plan.project_id} would be spent by the tasks before it"
        if getattr(task, "on_budget_exhausted", "fail") == "wait":
            return replace(plan, reason=f"{plan.reason}, on the next UTC day ({spent}; on_budget_exhausted='wait')")
        return replace(plan, action="refuse", credits=0, reason=f"{spent}; nothing would be sent")

    def _left(self, task: Any, project: str) -> int | str | None:
        from airflow_tables import budget
        from airflow_tables.assets import service_of

        settings = task.hook.settings
        key = (settings.base_url, project)
        if key not in self.left:
            limit = budget.Budgets.from_conf().limit(project)
            if limit is None:
                self.left[key] = None
            else:
                self.left[key] = _ledger_left(service_of(settings.base_url), project, settings.api_key, limit)
        return self.left[key]


def _ledger_left(service: str, project: str, secret: str, limit: int) -> int | str:
    """What the department's budget has left today, from its ledger in the metadata database; why not, as text."""
    from airflow.utils.session import create_session

    from airflow_tables import budget

    day = budget.day_of(budget.utc_now())
    try:
        with create_session() as session:
            return max(0, limit - len(budget.spent_in(session, service, project, day, secret)))
    except budget.LedgerError as err:
        return f"the credit budget of department {project} cannot be counted: {err}"


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    """The stdlib logger ``name`` silent for the block."""
    import logging

    logger = logging.getLogger(name)
    was, logger.disabled = logger.disabled, True
    try:
        yield
    finally:
        logger.disabled = was


def _manual_data_interval(dag: Any, logical_date: datetime) -> tuple[datetime, datetime]:
    """A manual run's data interval, as its timetable infers it (Airflow's 3.1 DAG), else the instant itself
    (a timetable without the method, as the Task SDK's from 3.2: what a manual run of a cron trigger gets)."""
    infer = getattr(dag.timetable, "infer_manual_data_interval", None)
    if infer is None:
        return logical_date, logical_date
    interval = infer(run_after=logical_date)
    return interval.start, interval.end


def _planned_task_instance(run: _PlannedRun, task: Any, map_index: int, ti_context: Any, now: datetime) -> Any:
    """A ``RuntimeTaskInstance`` of ``run`` whose XComs stay in the plan: an upstream result is not known."""
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance
    from airflow.utils.state import TaskInstanceState

    class PlannedTaskInstance(RuntimeTaskInstance):
        def xcom_push(self, key: str, value: Any) -> None:
            run.xcoms.setdefault((self.task_id, key), {})[self.map_index or -1] = value

        def xcom_pull(  # the same arguments; only this task's own XComs are answered
            self, task_ids: Any = None, dag_id: Any = None, key: str = "return_value", *args: Any, **kwargs: Any
        ) -> Any:
            if task_ids is None or task_ids in (self.task_id, [self.task_id]):  # this task's instances, in the plan
                values = run.xcoms.get((self.task_id, key), {})
                found = [values[index] for index in sorted(values)]
                return found if isinstance(task_ids, list) else (found[0] if found else kwargs.get("default"))
            raise NotKnownBeforeTheRun(task_ids)

    return PlannedTaskInstance.model_construct(
        id=uuid.uuid4(),
        task_id=task.task_id,
        dag_id=run.dag.dag_id,
        run_id=run.run_id,
        try_number=1,
        map_index=map_index,
        hostname="airflow-tables-plan",
        dag_version_id=uuid.uuid4(),
        task=task,
        _ti_context_from_server=ti_context,
        max_tries=ti_context.max_tries,
        start_date=now,
        state=TaskInstanceState.RUNNING,
        rendered_map_index=None,
    )


def print_plan(dag_id: str, logical_date: datetime | None, conf: dict[str, Any] | None, as_json: bool) -> int:
    """``airflow-tables plan``: the plan on standard output; 0, or 1 when a task would be refused."""
    with _output_apart() as out:
        plan = plan_dag_run(dag_id, logical_date, conf)
        out.write((json.dumps(plan.to_json(), indent=2) if as_json else plan.to_text()) + "\n")
    return 1 if plan.refused else 0


@contextlib.contextmanager
def _output_apart() -> Iterator[Any]:
    """Standard output for the plan alone: what Airflow and the tasks log goes to standard error.

    Also after the plan is written, for the rest of the command: what Airflow prints as the
    process shuts down (a database connection closed late) must not follow the JSON.
    """
    import os
    import sys

    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    with os.fdopen(saved, "w") as out:
        yield out


__all__ = ["Decision", "NotKnownBeforeTheRun", "RunPlan", "plan_dag_run", "print_plan"]
