"""Errors raised by airflow-tables.

Standard library only, so that importing the validator stays cheap. Every
:class:`DataTablesError` carries the HTTP ``status_code`` (``None`` when no
response arrived) and the service's own ``Msg``; none of them ever holds the
API key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow_tables.csv_rules import Problem


class DataTablesError(Exception):
    """The service refused a request, or its answer could not be understood."""

    def __init__(self, msg: str, status_code: int | None = None, *, method: str = "", url: str = "") -> None:
        self.msg = msg
        self.status_code = status_code
        self.method = method
        self.url = url
        where = f"{method} {url} " if method else ""
        status = f"HTTP {status_code}" if status_code is not None else "no response"
        super().__init__(f"{where}failed ({status}): {msg}")


class DataTablesPermissionError(DataTablesError):
    """403: the API key may not do this in the department (deleting needs 'manage data')."""


class DataTablesNotFoundError(DataTablesError):
    """404: no such department or table, or the key cannot see it."""


class DataTablesConflictError(DataTablesError):
    """409: the table is being read, or is locked by a live connection."""


class DataTablesLockedError(DataTablesConflictError):
    """A delete was refused because the table's ``LockedFromDelete`` is true."""


class DataTablesUploadFailedError(DataTablesError):
    """The service finished reading the file (``Processed``) but ``SuccessfulUpload`` is false."""


class DataTablesTimeoutError(DataTablesError):
    """A wait for ``Processed`` ran past its deadline."""


class DataTablesImportUncertainError(DataTablesError):
    """The import request may have reached the service, but no answer came back.

    The import is paid and not idempotent, so it is never re-sent blindly: the
    caller must look at the department (``list_cards``) before trying again.
    """


class CsvValidationError(ValueError):
    """A CSV file breaks the service's rules; ``problems`` lists every one found."""

    def __init__(self, path: str, problems: list[Problem]) -> None:
        self.path = path
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        count = len(self.problems)
        super().__init__(
            f"{path} would be refused or misread by the Data Tables Service "
            f"({count} problem{'s' if count != 1 else ''}; nothing was uploaded):\n{lines}"
        )
