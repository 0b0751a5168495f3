"""``on_schema_change``: a replacement never changes a table's columns by mistake.

People ask questions of a table by its columns' names, and a column's type decides which
questions work (a sum needs numbers). Before a replacement is sent, the file's columns, named as
the service will name them and typed by the service's rule (``long`` when every non-empty value is
a 64-bit integer and one is present, else ``string``; both from the validation scan), are compared
with the ready table's columns (one fetch of the table, which costs no credit).

* A column the file adds passes under ``"allow_new_columns"`` (the default): no question breaks.
* A column removed, renamed (a removed column whose place and type a new one takes: the service
  cannot tell, so both names are shown) or retyped (``id: long -> string``) fails the task, without
  retry and before any paid request, listing each difference.
* Reordered columns pass under ``"allow_new_columns"``: the service describes and questions name
  columns by name, and the table's ``Columns`` record gives no meaning to their order. ``"fail"``
  refuses them with any other difference (the table must come back exactly as it is).
* ``"allow"`` checks nothing and fetches nothing.
* ``"approve"``: a change ``"allow_new_columns"`` refuses waits for a person's answer in the Airflow
  UI (the standard provider's human-in-the-loop: the task's "Required actions"), the differences in
  the form. As the provider's ``HITLOperator`` does, the task waits in the "awaiting input" state on
  Airflow 3.3 (no trigger: the api-server's answer or the scheduler's timeout sweep resumes it),
  and defers to its ``HITLTrigger`` on 3.1 and 3.2. "Approve" sends the file; "Reject", or no answer within
  ``approval_timeout``, sends nothing and fails the task (no retry): the table keeps its data and
  the run shows that it did not get this file. An approval holds for what was shown: after it the
  file is validated again and must have the same bytes (its fingerprint), and the table must be
  unchanged since the check (the same last read and the same differences); otherwise the task fails
  without sending, and a clear asks again.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from airflow_tables.operators._dry_run import approval_needed, dry_run_enabled
from airflow_tables.version_compat import AIRFLOW_V_3_3_PLUS, AirflowFailException

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from airflow.sdk import Context

    from airflow_tables.model import Column, TableDetail, TableSummary
    from airflow_tables.operators.tables import DataTablesImportOperator
    from airflow_tables.sources import Source
    from airflow_tables.validation import CsvReport

POLICIES = ("allow_new_columns", "fail", "allow", "approve")
#: The options of the approval form, and the method the deferred task resumes in.
APPROVE, REJECT = "Approve", "Reject"
RESUME_METHOD = "execute_schema_approval"
#: The durable note of the change shown for approval (the task's store: it survives the deferral).
APPROVAL_KEY = "datatables_schema_approval"
#: What ``"allow_new_columns"`` (and ``"approve"`` without an answer) refuses.
BREAKING = ("removed", "renamed", "retyped")


def check_policy(on_schema_change: object, approval_timeout: object) -> None:
    """Refuse, when the DAG is parsed (``ValueError``), a policy no run could follow."""
    if on_schema_change not in POLICIES:
        raise ValueError(f"on_schema_change must be one of {', '.join(map(repr, POLICIES))}, not {on_schema_change!r}")
    if approval_timeout is not None and (
        isinstance(approval_timeout, bool) or not isinstance(approval_timeout, (int, float)) or approval_timeout <= 0
    ):
        raise ValueError(f"approval_timeout must be a number of seconds > 0, or None, not {approval_timeout!r}")
    if on_schema_change == "approve":
        try:
            from airflow.providers.standard.triggers.hitl import HITLTrigger  # noqa: F401
        except ImportError as err:
            raise ValueError(
                "on_schema_change='approve' needs Airflow's human-in-the-loop, from the standard provider "
                f"(apache-airflow-providers-standard, Airflow 3.1+): {err}"
            ) from None


@dataclass(frozen=True)
class Difference:
    """One difference between the table's columns and the file's: ``change`` is one of
    ``added``, ``removed``, ``renamed``, ``retyped``, ``moved``; ``was`` and ``now`` what it was and is."""

    column: str
    change: str
    was: str | None = None
    now: str | None = None
    #: A retyped column that has no value in this file: the rule types it ``string`` for want of values.
    empty: bool = False

    def __str__(self) -> str:
        if self.change == "retyped" and self.empty:
            return (
                f"{self.column}: {self.was} -> {self.now} (the column is empty in this file, and a column with no "
                "value is read as string)"
            )
        if self.change == "retyped":
            return f"{self.column}: {self.was} -> {self.now}"
        if self.change == "renamed":
            return f"{self.was}: renamed to {self.column}"
        if self.change == "moved":
            return f"{self.column}: moved from column {self.was} to {self.now}"
        if self.change == "added":
            return f"{self.column}: added" + (f" ({self.now})" if self.now else "")
        return f"{self.column}: {self.change}"


def compare(table: Sequence[Column], names: Sequence[str], types: Sequence[str] | None) -> list[Difference]:
    """Every difference between the table's columns and the file's ``names`` (typed ``types`` when known).

    A removed column and a new one at the same place, of the same type, are one rename.
    """
    file_types = dict(zip(names, types, strict=False)) if types is not None else {}
    old = [c.name or "" for c in table]
    old_types = {c.name or "": c.data_type for c in table}
    removed = [n for n in old if n not in set(names)]
    added = [n for n in names if n not in set(old)]
    found: list[Difference] = []
    for name in removed:
        place = old.index(name)
        newcomer = names[place] if place < len(names) else None
        if newcomer in added and (not file_types or file_types.get(newcomer) == old_types.get(name)):
            added.remove(newcomer)
            found.append(Difference(newcomer, "renamed", was=name, now=newcomer))
        else:
            found.append(Difference(name, "removed"))
    for name in names:
        was, now = old_types.get(name), file_types.get(name)
        if name in old_types and was is not None and now is not None and was != now:
            found.append(Difference(name, "retyped", was=was, now=now))
    found.extend(Difference(name, "added", now=file_types.get(name)) for name in added)
    kept_old = [n for n in old if n in set(names)]
    kept_new = [n for n in names if n in set(old)]
    if kept_old != kept_new:
        found.extend(
            Difference(name, "moved", was=str(old.index(name) + 1), now=str(names.index(name) + 1))
            for name, before in zip(kept_new, kept_old, strict=True)
            if name != before
        )
    return found


def refused_by(policy: str, differences: Sequence[Difference]) -> list[Difference]:
    """The differences ``policy`` does not let through (``"approve"``: those a person must approve)."""
    if policy == "allow":
        return []
    if policy == "fail":
        return list(differences)
    return [d for d in differences if d.change in BREAKING]


@dataclass(frozen=True)
class SchemaCheck:
    """What :class:`SchemaGuard` found: every difference, and those its policy refuses."""

    differences: list[Difference]
    refused: list[Difference]

    @property
    def accepted(self) -> list[str]:
        """The differences let through, as the log says them."""
        return [str(d) for d in self.differences if d not in self.refused]

    @property
    def shown(self) -> list[str]:
        """The refused differences, as the failure and the approval form say them."""
        return [str(d) for d in self.refused]


@dataclass(frozen=True)
class SchemaGuard:
    """``on_schema_change``, deciding on the table's columns and the file's (no I/O: both are handed in)."""

    policy: str

    @property
    def checks(self) -> bool:
        """Whether anything is compared (and the table fetched): not under ``"allow"``."""
        return self.policy != "allow"

    def decide(
        self, table: Sequence[Column], names: Sequence[str], types: Sequence[str] | None, empty: Collection[str] = ()
    ) -> SchemaCheck:
        """The differences between ``table``'s columns and the file's ``names``.

        ``types`` are the file's columns' types when known; ``empty`` the columns without a value.
        """
        differences = [
            replace(d, empty=True) if d.change == "retyped" and d.column in empty else d
            for d in compare(table, names, types)
        ]
        return SchemaCheck(differences, refused_by(self.policy, differences))

    def refusal(self, found: SchemaCheck, file_path: Any, card_id: str, name: str | None, project: str) -> str:
        """Why the task fails when the policy refuses the change (not ``"approve"``)."""
        return (
            f"{file_path} would change the columns of table {card_id} ({name}) in department {project}: "
            f"{'; '.join(found.shown)}. Nothing was sent, no credit was spent, and the task is not retried. "
            "Correct the file, or pass on_schema_change='approve' (a person decides in the Airflow UI) "
            "or 'allow' (no check) to the task, then clear it."
        )


def needs_column_types(task: DataTablesImportOperator) -> bool:
    """Whether the task's validation scan must type the columns (a replacement that checks them)."""
    return task.replaces and SchemaGuard(task.on_schema_change).checks


@dataclass(frozen=True)
class Approval:
    """The change shown for approval, and what must still hold when the answer comes back."""

    card_id: str
    differences: list[str]
    completion_time: str | None
    fingerprint: str | None
    approved_by: str | None = None

    @classmethod
    def from_json(cls, value: Any) -> Approval | None:
        if not isinstance(value, dict):
            return None
        try:
            return cls(**value)
        except TypeError:
            return None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """The change, as the log and the failures name it."""
        return f"the change of the columns of table {self.card_id} ({'; '.join(self.differences)})"

    def answers(self, card_id: str | None) -> bool:
        """Whether this is a person's approval of a change of table ``card_id``."""
        return self.approved_by is not None and self.card_id == card_id

    def changed_since(self, now: Approval, file_path: Any) -> list[str]:
        """What no longer holds of what was approved, ``now`` being what the check sees: empty when it all holds."""
        changed = []
        if self.fingerprint is None or self.fingerprint != now.fingerprint:
            changed.append(f"the file {file_path} is not the one checked (its bytes differ)")
        if self.completion_time != now.completion_time:
            changed.append(
                f"table {self.card_id} was read again (at {now.completion_time}, not {self.completion_time})"
            )
        if self.differences != now.differences:
            changed.append(f"the differences are now {'; '.join(now.differences)}")
        return changed


def check_schema(
    task: DataTablesImportOperator,
    context: Context,
    project: str,
    card_id: str,
    source: Source,
    table: TableSummary | None,
    report: CsvReport | None = None,
) -> None:
    """Compare the file's columns with the table's, right before a replacement is sent; refuse as the policy says.

    ``table`` is the look that found the table idle; ``report`` the task's validation report (its
    columns, and their types when the scan typed them). Costs one fetch of the table (no credit),
    none under ``"allow"``. Under ``"approve"`` a refused change waits for a person.
    """
    guard = SchemaGuard(task.on_schema_change)
    if not guard.checks:
        return
    detail = task.hook.table(project, card_id)
    if not detail.columns:
        task.log.info("Table %s has no columns on record (not read yet?): nothing to compare", card_id)
        return
    names, types, empty = _file_schema(source, report)
    if types is None:
        task.log.warning("%s: the columns' types are unknown, so only their names are compared", task.file_path)
    found = guard.decide(detail.columns, names, types, empty)
    if found.accepted:
        task.log.info(
            "Schema of %s: %s (on_schema_change=%r lets it through)", card_id, "; ".join(found.accepted), guard.policy
        )
    if not found.refused:
        if not found.differences:
            task.log.info("Schema of %s unchanged: %d columns, same names and types", card_id, len(names))
        return
    if guard.policy != "approve":
        raise AirflowFailException(guard.refusal(found, task.file_path, card_id, detail.name, project))
    if dry_run_enabled(task):  # a dry run asks nobody: it would replace once a person approves
        raise approval_needed(card_id, project, found.shown)
    _approved_or_ask(task, context, source, detail, found.shown, table)


def _file_schema(source: Source, report: CsvReport | None) -> tuple[list[str], list[str] | None, set[str]]:
    """The file's columns as the service will name them, their types, and those empty, from the validation scan.

    The task's own scan gives them when it typed the columns (:func:`needs_column_types`);
    otherwise (``validate=False``) the file is scanned here, once, for them.
    """
    if report is None or report.column_types is None:
        from airflow_tables.validation import validate_source

        report = validate_source(source, column_types=True)
    return list(report.columns), report.column_types, set(report.empty_columns or ())


def _fingerprint(source: Source) -> str | None:
    if source.local_path is None:
        return None
    from airflow_tables.sources.fingerprint import fingerprint_file

    return fingerprint_file(source.local_path)


def _approved_or_ask(
    task: DataTablesImportOperator,
    context: Context,
    source: Source,
    detail: TableDetail,
    shown: list[str],
    table: TableSummary | None,
) -> None:
    """Return when a person approved exactly this change; otherwise defer to ask, or fail when it no longer holds."""
    from airflow_tables._durable import durable_store

    store = durable_store(context, task.hook.settings.api_key, task.log)
    completion_time = table.completion_time if table is not None else detail.completion_time
    now = Approval(detail.card_id, shown, completion_time, _fingerprint(source))
    asked = Approval.from_json(store.get(APPROVAL_KEY))
    if asked is not None and asked.answers(detail.card_id):
        changed = asked.changed_since(now, task.file_path)
        if not changed:
            task.log.info("Schema change of %s approved by %s: %s", detail.card_id, asked.approved_by, "; ".join(shown))
            return
        store.delete(APPROVAL_KEY)
        raise AirflowFailException(
            f"{asked.approved_by} approved a change of the columns of table {detail.card_id}, but since then "
            f"{' and '.join(changed)}. Nothing was sent and no credit was spent; clear the task to ask again."
        )
    if now.fingerprint is None:
        raise AirflowFailException(
            f"{task.file_path} would change the columns of table {detail.card_id}: {'; '.join(shown)}; an approval "
            "must hold for the bytes shown, and this file is streamed unchecked. Pass validate=True so that it is "
            "checked and kept, then clear the task. Nothing was sent."
        )
    store.set(APPROVAL_KEY, now.to_json())
    _ask(task, context, detail, shown)


def _code(value: str) -> str:
    """``value`` as a Markdown code span that nothing in it can end: shown as written, never as Markdown.

    Column names come from the file's producer and table names from the service: a heading, a link
    or an external image in one must not reach the form a reviewer reads as such. A code span
    interprets nothing inside it; its fence is one backtick longer than the longest run of
    backticks in the value (CommonMark), and a line break (which would end the list item) is shown
    as a space.
    """
    text = " ".join(value.splitlines()) or " "
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def approval_form(
    file_path: Any, detail: TableDetail, department: str, shown: list[str], approval_timeout: float | None
) -> tuple[str, str]:
    """The approval form's subject and body (Markdown, every name quoted so that none is read as Markdown)."""
    name = f"{detail.name} ({detail.card_id})" if detail.name else detail.card_id
    lines = "\n".join(f"- {_code(line)}" for line in shown)
    body = (
        f"The file {_code(str(file_path))} would change the columns of table {_code(name)} in department "
        f"{_code(department)}:\n\n{lines}\n\n"
        "Questions people ask of these columns may stop working or answer differently.\n\n"
        "**Approve** sends the file (one credit). **Reject** sends nothing and fails the task; "
        "so does no answer" + (f" within {timedelta(seconds=approval_timeout)}." if approval_timeout else ".")
    )
    return f"Replace table {name} with a file whose columns changed?", body


def _ask(task: DataTablesImportOperator, context: Context, detail: TableDetail, shown: list[str]) -> None:
    """Write the approval form (the task's human-in-the-loop detail) and defer until it is answered."""
    from airflow.providers.standard.triggers.hitl import HITLTrigger
    from airflow.sdk.execution_time.hitl import upsert_hitl_detail
    from airflow.sdk.timezone import utcnow

    subject, body = approval_form(task.file_path, detail, task.department, shown, task.approval_timeout)
    ti_id = context["task_instance"].id
    upsert_hitl_detail(
        ti_id=ti_id,
        options=[APPROVE, REJECT],
        subject=subject,
        body=body,
        defaults=None,
        multiple=False,
        params={},
    )
    timeout = task.approval_timeout
    task.log.warning(
        "%s would change the columns of %s: %s. Waiting for a person's answer in the Airflow UI (Required actions)",
        task.file_path,
        detail.card_id,
        "; ".join(shown),
    )
    if AIRFLOW_V_3_3_PLUS:
        # As the standard provider's HITLOperator on 3.3: the task waits in "awaiting input", with no
        # trigger; the api-server's answer (or the scheduler's timeout sweep) resumes it.
        from airflow.sdk.exceptions import TaskAwaitingInput

        raise TaskAwaitingInput(
            method_name=RESUME_METHOD, timeout=None if timeout is None else timedelta(seconds=timeout)
        )
    task.defer(
        trigger=HITLTrigger(
            ti_id=ti_id,
            options=[APPROVE, REJECT],
            params={},
            defaults=None,
            multiple=False,
            timeout_datetime=None if timeout is None else utcnow() + timedelta(seconds=timeout),
            poke_interval=min(task.poll_interval, 5.0),
        ),
        method_name=RESUME_METHOD,
    )


def resume(asked: Approval | None, event: dict[str, Any], task_id: str, approval_timeout: float | None) -> Approval:
    """The person's answer (``event``) to the change shown (``asked``): the approval on "Approve", else fail.

    No I/O: the operator reads the note, keeps the approval this returns, and runs the task again
    (the checks then hold the file and the table to what was shown).
    """
    if asked is None:
        raise AirflowFailException(f"{task_id}: resumed with no schema change on record; nothing was sent")
    what = asked.describe()
    if "error" in event:
        if event.get("error_type") == "timeout":
            raise AirflowFailException(
                f"nobody answered whether to approve {what} within {timedelta(seconds=approval_timeout or 0)}"
                "; nothing was sent and no credit was spent. Clear the task to ask again."
            )
        raise AirflowFailException(f"the approval of {what} failed: {event.get('error')}; nothing was sent")
    chosen = list(event.get("chosen_options") or [])
    user = event.get("responded_by_user") or {}
    who = (user.get("name") if isinstance(user, dict) else None) or "the timeout default"
    if chosen != [APPROVE]:
        raise AirflowFailException(
            f"{who} rejected {what}; nothing was sent and no credit was spent. The table keeps its data."
        )
    return replace(asked, approved_by=who)


class ApprovalResume:
    """The import operator's resume after a person answered the ``on_schema_change="approve"`` form."""

    # What it reads of the operator.
    log: Any
    task_id: str
    approval_timeout: float | None

    def execute_schema_approval(self, context: Context, event: dict[str, Any]) -> str | None:
        """Resume after a person answered the form: send on approval, else fail.

        The approval is kept (the task's store) and the task runs again: its checks hold the file
        and the table to what the person saw (:func:`check_schema`).
        """
        from airflow_tables._durable import forgotten_when_ended

        task = cast("DataTablesImportOperator", self)
        with forgotten_when_ended(context, task, (APPROVAL_KEY,)):
            store = task._store(context)
            approval = resume(Approval.from_json(store.get(APPROVAL_KEY)), event, self.task_id, self.approval_timeout)
            self.log.info(
                "%s approved %s; validating the file again before sending it", approval.approved_by, approval.describe()
            )
            store.set(APPROVAL_KEY, approval.to_json())
            return task.execute(context)


__all__ = [
    "POLICIES",
    "Approval",
    "Difference",
    "SchemaCheck",
    "SchemaGuard",
    "approval_form",
    "check_policy",
    "check_schema",
    "compare",
    "needs_column_types",
    "resume",
]
