"""One file held to ``on_bad_rows`` and ``column_types``: the report of what is sent, the good rows, the rejects.

:func:`sorted_rows` reads a local UTF-8 file (a file in place, or the staged copy of an object or
of a file in a declared encoding) once more than validation would only when it must:

1. its header as the validator reads it (:func:`.scan.scan_file_with`), then its records by the
   validator's fast path alone (``plain_only``: on two processes, stopping at the first record
   that is not plain). A clean file ends here, at validation's cost, and is sent as it is;
2. otherwise :class:`.bad_rows.RowSorter` reads the records again (on two processes for a large
   file: :mod:`.sort_halves`), keeping the good rows' ranges
   of the file (header first, byte for byte) and writing each bad row to the rejects file. What is
   sent is those ranges read in order (:mod:`airflow_tables.sources.spliced`): no copy is written,
   unless a reader needs one (:meth:`SetAside.as_local`).

The decision (send the good rows, refuse over a threshold, refuse any bad row with ``"fail"``)
is the report's: its ``errors`` refuse the file, and ``rows`` counts what is sent.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

from airflow_tables.validation import rules, types
from airflow_tables.validation.bad_rows import BadRow, BadRowPolicy, RowSorter, Sorted, declared_columns
from airflow_tables.validation.drop_rows import RowVerdict, drop_rows
from airflow_tables.validation.ranges import NotPlain, RangeScan, scan_data
from airflow_tables.validation.rejects import RejectsFile, beside
from airflow_tables.validation.report import CsvReport, local_report
from airflow_tables.validation.scan import FileScan, scan_file, scan_file_with
from airflow_tables.validation.sort_halves import BadRows, sort_rows

if TYPE_CHECKING:
    from airflow_tables.sources import Source


@dataclass(frozen=True)
class RowCheck:
    """What a file's rows are held to: the bad-row policy, the declared column types, where rejects go.

    ``rejects_path`` is a local path or an object-storage URI; None: beside the file
    (:func:`.rejects.beside`).
    """

    policy: BadRowPolicy = BadRowPolicy()
    declared: dict[str, str] | None = None
    rejects_path: str | None = None

    @classmethod
    def of(
        cls,
        on_bad_rows: str,
        max_bad_rows: int | None,
        max_bad_fraction: float | None,
        rejects_path: str | None,
        column_types: dict[str, str] | None,
    ) -> RowCheck:
        """The arguments of an operator or of ``import_csv`` as one value; ``ValueError`` for one no file could meet."""
        from airflow_tables.validation.row_policy import check_declared_types

        policy = BadRowPolicy(on_bad_rows, max_bad_rows, max_bad_fraction)
        return cls(policy, check_declared_types(column_types), rejects_path or None)

    @property
    def sorts(self) -> bool:
        """Whether rows are judged one by one at all (otherwise the validator's report is the whole answer)."""
        return self.policy.quarantines or bool(self.declared)


@dataclass(frozen=True)
class SetAside:
    """What :func:`sorted_rows` decided: the report of what is sent, the file to send, the bad rows' count and place.

    ``source`` is the good rows (the file's kept ranges, or a copy), or the file itself when no row
    was bad. ``rejects`` is where the rejects file was written (None when no row was set aside).
    """

    report: CsvReport
    source: Source
    bad_rows: int = 0
    rejects: str | None = None
    by_code: dict[str, int] = dataclasses.field(default_factory=dict)
    #: The last bad row, when it is the file's last record cut short (see ``Sorted.cut_short``).
    cut_short: BadRow | None = None
    #: Makes ``source`` a local file, for a reader that needs one (see :meth:`as_local`).
    copy: Callable[[Source], Source] | None = None

    def as_local(self) -> Source:
        """``source`` as a local file (a copy of the good rows is written once, for the time of the block)."""
        if self.source.local_path is not None or self.copy is None:
            return self.source
        return self.copy(self.source)

    def to_xcom(self) -> dict[str, Any]:
        """The XCom ``bad_rows``: ``{"count": N, "rejects": "<where>"}``."""
        return {"count": self.bad_rows, "rejects": self.rejects}

    def summary(self) -> str:
        """``set aside 12 of 10,012 data rows (field-count: 10, nul-byte: 2) in orders.rejects.csv``."""
        if not self.bad_rows:
            return f"no bad row among the {self.report.rows:,} data rows"
        codes = ", ".join(f"{code}: {n:,}" for code, n in sorted(self.by_code.items()))
        rows = self.report.rows + self.bad_rows
        return f"set aside {self.bad_rows:,} of {rows:,} data rows ({codes}) in {self.rejects}"


#: What a caller may add to the rules' judgement: the data rows (by their 0-based position in the file
#: about to be sent) that must be set aside as well, and why (a suite's row-wise expectations).
RowJudge = Callable[[CsvReport, "Source"], "dict[int, RowVerdict]"]


@contextlib.contextmanager
def sorted_rows(
    local: Source,
    check: RowCheck,
    *,
    default_rejects: str,
    column_types: bool = False,
    limits: rules.Limits = rules.SERVICE_LIMITS,
    judge_rows: RowJudge | None = None,
) -> Iterator[SetAside]:
    """Hold the rows of ``local`` (a local UTF-8 file) to ``check``; the good rows' file lives for the block.

    ``default_rejects`` names the file as given (``s3://conn@bucket/orders.csv``): the rejects go
    beside it unless ``check.rejects_path`` says otherwise. ``column_types``: type the columns of
    what is sent (``CsvReport.column_types``), as :func:`.report.validate_source` does.
    ``judge_rows`` (with ``"quarantine"``) is asked about the rows the rules let through, before
    the thresholds are applied; the rows it names are set aside too (after the rules' own, in the
    rejects file). Whatever it raises leaves nothing behind.
    """
    assert local.local_path is not None and local.codec is None, "sorted_rows reads a local UTF-8 file"
    quarantines = check.policy.quarantines
    rejects = RejectsFile(check.rejects_path or beside(default_rejects)) if quarantines else None
    folder = tempfile.mkdtemp(prefix="airflow-tables-good-rows-")
    try:
        bad = BadRows(rejects)
        by_code = bad.by_code
        sorting = _Sorting(check, bad, column_types)
        scan = scan_file_with(local.local_path, limits, sorting.records, column_types=column_types)
        report = local_report(local, local, scan)
        found = sorting.found or Sorted(good_rows=report.rows, good_bytes=report.size_bytes)
        copies = _Copies(local, found, folder)
        if found.bad_rows:
            from airflow_tables.sources.spliced import spliced_source

            sent = spliced_source(local, found.kept)
        else:
            sent = local
        if report.errors and (quarantines or not found.bad_rows):  # refused whole: nothing is set aside
            yield SetAside(report, local)
            return
        if rejects is None:
            if found.bad_rows:
                report.errors.append(found.refusal())
            yield SetAside(report, local, found.bad_rows, None, dict(by_code), found.cut_short)
            return
        if judge_rows is not None:
            sent = copies.of(sent)
            verdicts = judge_rows(report, sent)
            if verdicts:
                sent = _without(sent, scan, verdicts, found, bad, folder)
                if column_types:  # the rows left out may have been all that made a column text
                    report.column_types = scan_file(sent.local_path or "", limits, column_types=True).column_types
        if not found.bad_rows:
            yield SetAside(report, local, 0, None, {}, None)
            return
        from airflow_tables.sources.storage import label_of

        where = label_of(rejects.commit())  # as reported (XCom, log, asset event): never a password in a URI
        if by_code.get(rules.ROW_NOT_UTF8.code):  # a whole file in another encoding looks like this too
            count = by_code[rules.ROW_NOT_UTF8.code]
            rows_hold, were = ("row holds", "was") if count == 1 else ("rows hold", "were")
            report.warnings.append(rules.ROWS_NOT_UTF8.problem(count=count, rows_hold=rows_hold, were=were))
        refusal = _over_threshold(check.policy, found, where)
        if refusal is not None:
            report.errors.append(refusal)
        report.rows, report.size_bytes = found.good_rows, found.good_bytes
        yield SetAside(report, sent, found.bad_rows, where, dict(by_code), found.cut_short, copies.of)
    finally:
        if rejects is not None:
            rejects.discard()  # committed already, or left behind by a refusal or an error: no temporary file
        shutil.rmtree(folder, ignore_errors=True)


def _without(
    sent: Source, scan: FileScan, verdicts: dict[int, RowVerdict], found: Sorted, bad: Any, folder: str
) -> Source:
    """``sent`` without the data rows ``verdicts`` names, each given to ``bad``; ``found`` counts them."""
    assert sent.local_path is not None
    path = os.path.join(folder, "judged", sent.name)
    os.makedirs(os.path.dirname(path))
    with open(path, "wb") as good:
        dropped = drop_rows(
            sent.local_path,
            scan.data_offset,
            scan.data_line,
            scan.delimiter,
            scan.column_count,
            verdicts,
            good=good,
            bad=bad,
            in_source=found.in_source,
        )
    found.good_rows -= dropped.rows
    found.bad_rows += dropped.rows
    found.good_bytes = dropped.good_bytes
    found.cut_short = None
    return _local(sent, path, found.good_bytes)


class _Sorting:
    """The records reader :func:`.scan.scan_file_with` is given: the fast path first, the sorter when it must."""

    def __init__(self, check: RowCheck, bad: BadRows, column_types: bool) -> None:
        self.check = check
        self.bad = bad
        self.column_types = column_types
        self.found: Sorted | None = None

    def records(self, f: BinaryIO, scan: FileScan) -> RangeScan:
        declared_long, problem = declared_columns(self.check.declared, scan.columns)
        if problem is not None:
            return RangeScan(start=scan.data_offset, problems=[dataclasses.replace(problem, line=None)], stopped=True)
        typing = self.column_types or bool(declared_long)
        try:
            plain = scan_data(
                scan.path, scan.data_offset, scan.size_bytes, scan.delimiter, scan.column_count, typing, plain_only=True
            )
        except NotPlain:
            pass
        else:
            broken = plain.types is not None and any(plain.types[c] == types.NOT_LONG for c in declared_long)
            if not plain.problems and not broken:
                return plain
        states = bytearray(scan.column_count) if typing else None
        sorter = RowSorter(
            scan.path,
            scan.data_offset,
            scan.data_line,
            scan.delimiter,
            scan.columns,
            scan.column_count,
            bad=self.bad,
            declared_long=declared_long,
            states=states,
        )
        self.found = found = sort_rows(sorter, scan.size_bytes, scan.data_line, self.bad)
        # The scan reports a problem of the records with lines counted from them: the sorter's are the file's.
        shift = scan.data_line - 1
        stopped = None if found.stopped is None else found.stopped.moved(lines=-shift, records=0)
        return RangeScan(
            start=scan.data_offset,
            end=scan.size_bytes,
            records=found.good_rows,
            problems=[stopped] if stopped else [],
            stopped=stopped is not None,
            types=list(states) if states is not None and stopped is None else None,
        )


def _over_threshold(policy: BadRowPolicy, found: Sorted, rejects: str) -> rules.Problem | None:
    """The refusal of a quarantine whose bad rows are too many (or all there is); None when the good rows go."""
    if not found.good_rows:
        return rules.NO_GOOD_ROWS.problem(rows=found.rows, rejects=rejects)
    limit = policy.exceeded(found.rows, found.bad_rows)
    if limit is None:
        return None
    fraction = f"{found.bad_rows / found.rows:.2%}"
    return rules.TOO_MANY_BAD_ROWS.problem(
        bad=found.bad_rows, rows=found.rows, fraction=fraction, limit=limit, rejects=rejects
    )


class _Copies:
    """Local copies of the good rows, written when a reader asks for one (at most once), in ``folder``."""

    def __init__(self, local: Source, found: Sorted, folder: str) -> None:
        self.local, self.found, self.folder = local, found, folder
        self.copied: Source | None = None

    def of(self, sent: Source) -> Source:
        """``sent`` as a local file: itself when it is one, else the copy of the good rows."""
        if sent.local_path is not None:
            return sent
        if self.copied is None:
            from airflow_tables.sources.spliced import write_spliced

            assert self.local.local_path is not None
            path = os.path.join(self.folder, self.local.name)
            write_spliced(self.local.local_path, self.found.kept, path)
            self.copied = _local(self.local, path, self.found.good_bytes)
        return self.copied


def _local(source: Source, path: str, size: int) -> Source:
    """The local file ``path`` as the source to send in place of ``source``: its name (it names the table) and label."""
    from airflow_tables.sources.storage import local_opener

    return dataclasses.replace(
        source,
        stored_size=size,
        local_path=path,
        opener=local_opener(path),
        copy_scan=None,
        version=None,
    )
