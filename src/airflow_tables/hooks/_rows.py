"""``import_csv``'s ``on_bad_rows`` and ``column_types``: the file it sends when rows are judged one by one.

The operators do the same through :mod:`airflow_tables.operators._rows` (with XCom and task
failures); the hook raises instead: :class:`~airflow_tables.exceptions.CsvValidationError` for a
refused file, before any request.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from airflow_tables.evidence import FileFacts
from airflow_tables.exceptions import CsvValidationError
from airflow_tables.sources import SourceError, open_source, staged

if TYPE_CHECKING:
    from airflow_tables.sources import Source
    from airflow_tables.validation.quarantine import RowCheck


@contextlib.contextmanager
def rows_to_send(file_path: Any, encoding: str | None, check: RowCheck, log: Any) -> Iterator[tuple[Source, FileFacts]]:
    """The file to send (its good rows, or itself) and its facts, for the time of the block; or a refusal.

    Storage is read once: an object, or a file in a declared encoding, is staged to a local UTF-8
    copy, which is judged and sent.
    """
    from airflow_tables.validation.quarantine import sorted_rows
    from airflow_tables.validation.rules import MAX_BYTES

    try:
        source = open_source(file_path, encoding=encoding)
        local = staged(source, max_bytes=MAX_BYTES)
        with local as copy, sorted_rows(copy, check, default_rejects=str(file_path)) as aside:
            report = aside.report
            log.info("%s", report.summary())
            if check.policy.quarantines:
                (log.warning if aside.bad_rows else log.info)("%s: %s", report.path, aside.summary())
            if not report.ok:
                raise CsvValidationError(report.path, report.errors)
            facts = FileFacts.of(report)
            assert facts is not None  # an accepted report has its facts
            yield aside.source, facts
    except SourceError as err:
        raise type(err)(err.label, f"{err.reason}; nothing was sent to the Data Tables Service.") from None
