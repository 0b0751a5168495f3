"""How a service error ends an operator's task: one table, for import, replace and delete.

Each row says which error (:mod:`airflow_tables.exceptions`), in which action, ends the task
how (failed for good, left to Airflow's retries, skipped, or succeeded) and with which sentence.
An error no row lists is raised as it is, so Airflow's retries decide. The sentences name what a
person must look at (the connection, the department, the table, the file); none holds the API key.

A task that fails for good raises one of the static classes below: the service's error (its
type, status and message, so a caller catching ``DataTablesPermissionError`` still does) that is
also an ``AirflowFailException`` (no retry). Each is defined once, at module level, so
``pickle`` finds it again (``DataTablesError.__reduce__``): an error that crosses a process, to
a callback or a log handler, keeps its class and message.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_tables import exceptions as e
from airflow_tables.version_compat import AirflowException, AirflowFailException, AirflowSkipException

if TYPE_CHECKING:
    import logging
    from collections.abc import Callable, Iterator

    from airflow_tables.model import TableSummary

# -- the service's errors, final: each also an AirflowFailException (same name, so logs read the same) --------
# (mypy: AirflowException declares a class-wide ``status_code``; DataTablesError's is the request's, set per error.)


class DataTablesAuthenticationError(e.DataTablesAuthenticationError, AirflowFailException):  # type: ignore[misc]
    """401, final: the key is wrong, and every retry would send the same key."""


class DataTablesPermissionError(e.DataTablesPermissionError, AirflowFailException):  # type: ignore[misc]
    """403, final: the key may not do this in the department, on any try."""


class DataTablesCreditsError(e.DataTablesCreditsError, AirflowFailException):  # type: ignore[misc]
    """402, final: no credit left until someone adds some."""


class DataTablesRejectedFileError(e.DataTablesRejectedFileError, AirflowFailException):  # type: ignore[misc]
    """413, 415 or 422, final: the same file would be refused the same way."""


class DataTablesBadRequestError(e.DataTablesBadRequestError, AirflowFailException):  # type: ignore[misc]
    """400, final: the same request would be refused the same way."""


class DataTablesBusyError(e.DataTablesBusyError, AirflowFailException):  # type: ignore[misc]
    """A table being read, final: the task was told not to wait (``if_processing="fail"``)."""


class DataTablesLockedError(e.DataTablesLockedError, AirflowFailException):  # type: ignore[misc]
    """A delete refused for a table fed by a live connection, final (``if_locked="fail"``)."""


class DataTablesConflictError(e.DataTablesConflictError, AirflowFailException):  # type: ignore[misc]
    """409 for a table not being read, final: it is not sent again."""


class DataTablesNotFoundError(e.DataTablesNotFoundError, AirflowFailException):  # type: ignore[misc]
    """404, final: the table is not in the department (without ``missing_ok``)."""


class DataTablesUploadFailedError(e.DataTablesUploadFailedError, AirflowFailException):  # type: ignore[misc]
    """A read that failed, final: the file is corrected and the task cleared, not retried."""


class DataTablesReadMismatchError(e.DataTablesReadMismatchError, AirflowFailException):  # type: ignore[misc]
    """A read that differs from validation's counts, final: a retry would pay for the same reading."""


class DataTablesBudgetExceededError(e.DataTablesBudgetExceededError, AirflowFailException):  # type: ignore[misc]
    """The day's credit budget is spent, final (``on_budget_exhausted="fail"``): a retry today would be refused."""


#: The final class of each service error the table may end a task with.
FINAL: dict[type[e.DataTablesError], type[e.DataTablesError]] = {
    cls.__mro__[1]: cls
    for cls in (
        DataTablesAuthenticationError,
        DataTablesPermissionError,
        DataTablesCreditsError,
        DataTablesRejectedFileError,
        DataTablesBadRequestError,
        DataTablesBusyError,
        DataTablesLockedError,
        DataTablesConflictError,
        DataTablesNotFoundError,
        DataTablesUploadFailedError,
        DataTablesReadMismatchError,
        DataTablesBudgetExceededError,
    )
}


def final(kind: type[e.DataTablesError]) -> type[e.DataTablesError]:
    """``kind`` that also fails the task without retry: always the same class, defined once."""
    return FINAL[kind]


# -- the table ---------------------------------------------------------------------------------------------------

FAIL, RETRY, SKIP, SUCCEED = "fail", "retry", "skip", "succeed"
WRITES = frozenset({"import", "replace"})
SENDS = frozenset({"replace", "delete"})  # those that wait for a table to be idle, then send
ALL = WRITES | {"delete"}


@dataclass(frozen=True)
class Refused:
    """The task a refusal ends, as its sentence names it, and the options that decide how it ends.

    ``where`` is the department as the delete names it (with where the id came from); ``table``
    the last look that found the table (its name, its connection).
    """

    action: str  # "import", "replace" or "delete"
    conn_id: str
    project: str
    card_id: str | None = None
    file_path: Any = None
    validate: bool = True
    if_processing: str = "wait"
    if_locked: str = "fail"
    missing_ok: bool = False
    where: str = ""
    table: TableSummary | None = None


@dataclass(frozen=True)
class Row:
    """One row: ``errors`` in ``actions`` end the task so (``ends``), saying ``says``, when ``when`` holds."""

    errors: tuple[type[e.DataTablesError], ...]
    actions: frozenset[str]
    ends: str
    says: str
    when: Callable[[Refused], bool] | None = None


_LOCKED = "table {card_id} ({name}) is locked from delete: it is fed by an active connection to {source}{because}"

#: Most specific first (a subclass before its base): the first row that matches ends the task.
ROWS: tuple[Row, ...] = (
    Row(
        (e.DataTablesAuthenticationError,),
        ALL,
        FAIL,
        "the service does not accept the API key of {conn} ({msg}); correct it, then clear the task{final}",
    ),
    Row(
        (e.DataTablesPermissionError,),
        ALL,
        FAIL,
        "the API key of {conn} may not {verb} department {project}: {doing} needs permission to manage data "
        "there ({msg}); use a key that has it, then clear the task{final}",
    ),
    Row(
        (e.DataTablesCreditsError,),
        WRITES,
        FAIL,
        "the organisation of the API key of {conn} has no import credit left ({msg}); each import uses one: add "
        "credit, then clear the task{final}",
    ),
    Row(
        (e.DataTablesBudgetExceededError,),
        WRITES,
        FAIL,
        "{msg}. Not retried (on_budget_exhausted='fail'): raise [datatables] credit_budget, or clear the task once "
        "the budget is whole again (or pass on_budget_exhausted='wait')",
    ),
    Row(
        (e.DataTablesRejectedFileError, e.DataTablesBadRequestError),
        WRITES,
        FAIL,
        "the service refused {file} ({msg}); correct the file{check}, then clear the task{final}",
    ),
    Row(
        (e.DataTablesBusyError,),
        frozenset({"delete"}),
        FAIL,
        "{card_id} is being read; if_processing='fail' ({msg})",
        when=lambda r: r.if_processing == "fail",
    ),
    Row((e.DataTablesBusyError,), SENDS, RETRY, "{card_id} stayed busy: {msg}"),
    Row((e.DataTablesLockedError,), frozenset({"delete"}), SKIP, _LOCKED, when=lambda r: r.if_locked == "skip"),
    Row(
        (e.DataTablesLockedError,),
        frozenset({"delete"}),
        FAIL,
        _LOCKED + ". Pause the connection first, or pass if_locked='skip'.",
    ),
    Row((e.DataTablesConflictError,), SENDS, FAIL, "the service refused to {action} {card_id}: {msg}"),
    Row(
        (e.DataTablesNotFoundError,),
        frozenset({"delete"}),
        SUCCEED,
        "Table {card_id} is not in {where}; nothing to delete (missing_ok). No other department was looked at: a "
        "table of this id in other departments is left as it is",
        when=lambda r: r.missing_ok,
    ),
    Row(
        (e.DataTablesNotFoundError,),
        frozenset({"delete"}),
        FAIL,
        "table {card_id} is not in {where}; no other department was looked at. Check the card_id and the "
        "project_id (or pass missing_ok=True to allow a missing table)",
    ),
    Row(
        (e.DataTablesUploadFailedError,),
        WRITES,
        FAIL,
        "{msg}. Not retried: correct the file, then clear the task to send it again",
    ),
    Row(
        (e.DataTablesReadMismatchError,),
        WRITES,
        FAIL,
        "{msg}; not retried. Check the table, then clear the task to send the file again",
    ),
)

#: What each action may not do, and what doing it is called, in a permission's sentence.
_VERBS = {
    "import": ("import into", "importing"),
    "replace": ("replace tables in", "replacing"),
    "delete": ("delete tables in", "deleting"),
}


@dataclass(frozen=True)
class Ending:
    """How a task ends for one error: ``ends`` (fail, retry, skip, succeed), the sentence, the error's kind."""

    ends: str
    sentence: str
    kind: type[e.DataTablesError]


def ending(err: e.DataTablesError, refused: Refused) -> Ending | None:
    """The row of the table for ``err`` in ``refused``'s action, its sentence filled in; ``None``: not listed."""
    for row in ROWS:
        kind = next((k for k in row.errors if isinstance(err, k)), None)
        if kind is None or refused.action not in row.actions or (row.when is not None and not row.when(refused)):
            continue
        return Ending(row.ends, row.says.format(**_fields(err, refused)), kind)
    return None


def _fields(err: e.DataTablesError, refused: Refused) -> dict[str, Any]:
    """What a sentence may name."""
    verb, doing = _VERBS[refused.action]
    table = refused.table
    return {
        "action": refused.action,
        "conn": f"connection {refused.conn_id!r}",
        "project": refused.project,
        "card_id": refused.card_id,
        "file": refused.file_path,
        "where": refused.where,
        "msg": err.msg,
        "because": f" ({err.msg})" if err.msg else "",
        "verb": verb,
        "doing": doing,
        "name": table and table.name,
        "source": (table and table.connector_source) or "a connected system",
        "check": "" if refused.validate else " (validate=True finds what the service refuses before any request)",
        "final": (
            "; not retried, and nothing was deleted"
            if refused.action == "delete"
            else "; not retried (a retry would send the same file and be refused the same way), and no credit was spent"
        ),
    }


def end(err: e.DataTablesError, refused: Refused, log: logging.Logger | Any = None) -> None:
    """End the task as the table says for ``err``: raise (fail, retry, skip), or return after logging (succeed).

    An error the table does not list is raised as it is.
    """
    found = ending(err, refused)
    if found is None:
        raise err
    if found.ends == SUCCEED:
        if log is not None:
            log.info("%s", found.sentence)
        return
    if found.ends == SKIP:
        raise AirflowSkipException(found.sentence) from None
    kind = final(found.kind) if found.ends == FAIL else found.kind
    raise kind(err.status_code, found.sentence, method=err.method, url=err.url, seen=True) from None


@contextlib.contextmanager
def ending_the_task(refused: Refused, log: logging.Logger | Any = None) -> Iterator[None]:
    """Around an import's, a replacement's or a delete's requests: a service error ends the task as the table says."""
    try:
        yield
    except e.DataTablesError as err:
        if isinstance(err, AirflowException):  # ended already (a final error raised inside)
            raise
        end(err, refused, log)


__all__ = ["FINAL", "ROWS", "Ending", "Refused", "Row", "end", "ending", "ending_the_task", "final"]
