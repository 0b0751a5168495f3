"""Check a CSV file against the Data Tables Service's rules before it is uploaded.

``validate_csv(path)`` answers "will the service take this file, and how will it read
it?" locally, in one streaming pass, and returns a :class:`CsvReport`. The package, in
the order a file goes through it:

* :mod:`.rules`: the service's rules, each declared once as a :class:`~.rules.Rule`
  (its code, its wording, what it looks at, the bytes it stops a kernel on);
* :mod:`.scan`: one file's header, then its records, into a :class:`~.scan.FileScan`;
* :mod:`.ranges`: the records of a byte range, a megabyte at a time, on up to two processes;
* :mod:`.segments`: a stream's records on two threads, cut at guessed record boundaries;
* :mod:`.kernels`: the fast paths that count plain records (C, ``_speedups.c``, and Python);
* :mod:`.types`: the rule for a column's type (``long`` or ``string``);
* :mod:`.report`: :func:`validate_csv`, :func:`validate_source` (which reads a file as
  :func:`airflow_tables.sources.read_plan` says, and decides nothing of it), :func:`.report.scanned_copy`
  (the operators' copy, scanned as it is written) and :class:`CsvReport`.

The emulator reads files through the same modules, so what this says is what it does.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_tables.exceptions import CsvValidationError
    from airflow_tables.validation.report import CsvReport, validate_csv, validate_source
    from airflow_tables.validation.rules import Problem

__all__ = ["CsvReport", "CsvValidationError", "Problem", "validate_csv", "validate_source"]

#: Where each public name lives. Imported when first asked for, so that the scan's second process
#: (``python -m airflow_tables.validation.ranges``) and the emulator import only the modules they use.
_HOMES = {
    "CsvReport": "airflow_tables.validation.report",
    "validate_csv": "airflow_tables.validation.report",
    "validate_source": "airflow_tables.validation.report",
    "CsvValidationError": "airflow_tables.exceptions",
    "Problem": "airflow_tables.validation.rules",
}


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
