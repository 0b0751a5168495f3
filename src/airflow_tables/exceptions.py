"""Errors raised by airflow-tables.

Standard library only, so that importing the validator stays cheap. Every
:class:`DataTablesError` carries the HTTP ``status_code`` (``None`` when no
response arrived) and the service's own ``Msg``; none of them ever holds the
API key (the hook scrubs it, in every form a page may echo it, from anything the
service, a proxy or an HTTP library says, before any excerpt is cut).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol


class CsvProblem(Protocol):
    """One thing wrong with a CSV file, as :class:`CsvValidationError` lists it.

    :class:`airflow_tables.validation.rules.Problem` is one; this module does not import it,
    so that errors stay below validation.
    """

    @property
    def code(self) -> str: ...

    @property
    def message(self) -> str: ...

    @property
    def line(self) -> int | None: ...

    @property
    def record(self) -> int | None: ...


class DataTablesError(Exception):
    """The service refused a request, or its answer could not be understood.

    Built as ``DataTablesError(status_code, msg)``. ``seen=True`` marks what a look at a table
    showed (a failed read, a table gone, a wait that ran out) rather than a request's failure:
    its message is ``msg`` alone, with no "failed (no response)" for a request that was answered.
    """

    def __init__(
        self, status_code: int | None, msg: str = "", *, method: str = "", url: str = "", seen: bool = False
    ) -> None:
        self.status_code: int | None = status_code
        self.msg: str = str(msg or "")
        self.method = method
        self.url = url
        self.seen = seen
        where = f"{method} {url} " if method else ""
        status = f"HTTP {status_code}" if status_code is not None else "no response"
        super().__init__(self.msg if seen else f"{where}failed ({status}): {self.msg}")

    def __reduce__(self) -> tuple:
        # Keep the status, the message and the request when an error crosses a process boundary.
        return (
            _rebuild,
            (type(self), self.status_code, self.msg, self.method, self.url, self.seen),
            dict(self.__dict__),
        )


def _rebuild(
    cls: type[DataTablesError], status_code: int | None, msg: str, method: str, url: str, seen: bool = False
) -> DataTablesError:
    return cls(status_code, msg, method=method, url=url, seen=seen)


class DataTablesBadRequestError(DataTablesError):
    """400: a malformed request (a missing field, a name not ending in .csv, a bad CardID)."""


class DataTablesPermissionError(DataTablesError):
    """403: the API key may not do this in the department (deleting needs 'manage data')."""


class DataTablesAuthenticationError(DataTablesPermissionError):
    """401: the API key is missing or unknown to the service."""


class DataTablesCreditsError(DataTablesError):
    """402: the organisation has no import credit left."""


class DataTablesNotFoundError(DataTablesError):
    """404: no such department or table, or the key cannot see it."""


class DataTablesConflictError(DataTablesError):
    """409: the table is being read, or is locked by a live connection."""


class DataTablesBusyError(DataTablesConflictError):
    """409 while the table was seen being read: wait until it is ready, then try again."""


class DataTablesLockedError(DataTablesConflictError):
    """A delete was refused because the table is processed and its ``LockedFromDelete`` is true."""


class DataTablesRejectedFileError(DataTablesError):
    """413, 415 or 422: the service refused the file itself (too large, wrong media type, CSV rules)."""


class DataTablesRateLimitedError(DataTablesError):
    """429: too many requests; ``retry_after`` is the wait the service asked for, in seconds, if any."""

    retry_after: float | None = None


class DataTablesServerError(DataTablesError):
    """5xx: the service (or a proxy in front of it) failed; ``retry_after`` as for 429."""

    retry_after: float | None = None


class DataTablesConnectionError(DataTablesError):
    """No answer: the connection failed, was dropped, or the whole answer missed the connection's timeout.

    ``request_sent`` is false only when the connection was never made, so the
    service certainly did not receive the request. ``retryable`` is false when trying
    again cannot help (a failed TLS handshake, a CA bundle that cannot be read, a request
    the HTTP client refused to send).
    """

    request_sent: bool = True
    retryable: bool = True


class DataTablesUploadFailedError(DataTablesError):
    """The service finished reading the file (``Processed``) but ``SuccessfulUpload`` is false."""


class DataTablesReadMismatchError(DataTablesError):
    """The service read a validated file, but its table's ``Rows`` or number of ``Columns`` differ from the file's.

    The table exists and the credit is spent: trying again would pay again for the same reading,
    so the operators do not retry it (``on_read_mismatch="fail"``).
    """


class DataTablesTimeoutError(DataTablesError):
    """A wait for ``Processed`` ran past its deadline."""


class DataTablesImportUncertainError(DataTablesError):
    """The import request may have reached the service, but no answer came back.

    The import is paid and not idempotent, so it is never re-sent blindly: the
    caller must look at the department (``list_cards``) before trying again.
    """


class DataTablesBudgetExceededError(DataTablesError):
    """The department's credit budget for the day (UTC) is spent: the paid request was not sent.

    ``[datatables] credit_budget``; the message names the budget, what was spent that day and by
    which DAGs and tasks. The operators fail without retry (``on_budget_exhausted="fail"``) or wait
    for the next UTC day (``"wait"``).
    """


class DataTablesBudgetUnavailableError(DataTablesError):
    """The credit budget could not be checked (its ledger not reachable, or not trusted): nothing was sent.

    The budget fails closed; Airflow's retries may find the ledger again.
    """


class CsvValidationError(ValueError):
    """A CSV file breaks the service's rules; ``problems`` lists every one found."""

    def __init__(self, path: str, problems: Iterable[CsvProblem]) -> None:
        self.path = path
        self.problems: list[CsvProblem] = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        count = len(self.problems)
        super().__init__(
            f"{path} would be refused or misread by the Data Tables Service "
            f"({count} problem{'s' if count != 1 else ''}; nothing was uploaded):\n{lines}"
        )


class CsvUnfinishedError(CsvValidationError):
    """A CSV file that looks still being written: it ends in a cut record, and it changed moments ago.

    Unlike the other validation failures, which the operators make final, this one is left
    to Airflow's retries: the writer may finish the file before the next try.
    """

    def __init__(self, path: str, problem: CsvProblem, age: float) -> None:
        super().__init__(path, [problem])
        self.age = age
        ValueError.__init__(
            self,
            f"{path} looks unfinished (nothing was uploaded): its last record is cut short ({problem}), and the "
            f"file was modified {age:.0f} s before it was read, so it may still be being written. The task's "
            "retries read it again; if the file is complete, that last row is short: correct it, then clear the task",
        )
