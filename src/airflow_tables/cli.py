"""``airflow-tables``: the command line, for checking files before a DAG spends credits on them.

Imports only the validator (no Airflow, no pandas), so it answers in milliseconds. The
quarantine preview (``--rejects``, ``--max-bad-rows``, ``--max-bad-fraction``) imports what it
needs when it is asked for, and contacts no service either: it decides what the import
operators' ``on_bad_rows="quarantine"`` would, locally. ``airflow-tables plan`` (:mod:`airflow_tables.planning`)
imports Airflow when it is asked for: it loads a DAG and asks its tasks what they would do.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_tables.sources.transcode import declared
from airflow_tables.validation import CsvReport, rules, validate_csv

if TYPE_CHECKING:
    from airflow_tables.sources import Source
    from airflow_tables.validation.quarantine import RowCheck, SetAside


def _check(path: str, args: argparse.Namespace) -> CsvReport:
    """The file's report, its advice worded in the command line's terms (``--encoding cp1252``)."""
    return validate_csv(
        path, max_columns=args.max_columns, max_bytes=args.max_bytes, encoding=args.encoding, spelling=rules.CLI
    )


@dataclasses.dataclass(frozen=True)
class _Previewed:
    """A file held to the quarantine: the report of what would be sent, and its rows set aside (None: not sorted)."""

    report: CsvReport
    aside: SetAside | None = None

    def bad_rows(self) -> str:
        """The ``bad rows:`` line: what was set aside and where, or that the file is refused whole.

        A file refused for what it is (unreadable, too large, too many columns) has no rows set
        aside, whatever they hold: the operators write no rejects for it either.
        """
        aside = self.aside
        if aside is not None and (self.report.ok or aside.rejects is not None):
            return aside.summary()
        return "none set aside: the file is refused as a whole"

    def to_dict(self) -> dict[str, Any]:
        aside = self.aside
        bad_rows = {
            "count": aside.bad_rows if aside else 0,
            "rejects": aside.rejects if aside else None,
            "by_code": dict(aside.by_code) if aside else {},
        }
        return {**self.report.to_dict(), "bad_rows": bad_rows}


def _preview(path: str, args: argparse.Namespace, check: RowCheck) -> _Previewed:
    """What the import operators would decide for ``path`` with ``on_bad_rows="quarantine"``: nothing is sent.

    A local UTF-8 file is read where it lies; an object in storage, or a file in a declared
    encoding, is staged to a local UTF-8 copy first, as the operators stage it. The rejects
    file is written (beside the file as given, or at ``--rejects``), so the preview shows
    exactly the rows a run would set aside.
    """
    from airflow_tables.sources import SourceError, open_source, read_plan, staged
    from airflow_tables.validation.quarantine import sorted_rows

    limits = rules.Limits(max_columns=args.max_columns, max_bytes=args.max_bytes)
    label, own = path, None
    try:
        source = open_source(path, encoding=args.encoding)
        label, own = source.label, source.local_path
        if read_plan(source, max_bytes=args.max_bytes).too_large is not None:  # too large to be worth a copy
            return _Previewed(_unsorted(source, args))
        with staged(source, max_bytes=args.max_bytes) as local:
            if not local.complete:  # the copy stopped at --max-bytes: too large, whatever it holds
                return _Previewed(_unsorted(local, args))
            with sorted_rows(local, check, default_rejects=path, limits=limits) as aside:
                return _Previewed(_spoken(aside.report), aside)
    except SourceError as err:
        return _Previewed(_unreadable(label, err.label, err.reason))
    except OSError as err:  # a read refused (permissions), or the rejects file's folder
        reason = err.strerror or str(err)
        if err.filename is not None and err.filename not in (label, own):
            reason = f"{reason}: {err.filename}"
        return _Previewed(_unreadable(label, label, reason))


def _unsorted(source: Source, args: argparse.Namespace) -> CsvReport:
    """The validator's report of a file too large to sort: it says so and reads nothing more."""
    from airflow_tables.validation import validate_source

    return validate_source(source, max_columns=args.max_columns, max_bytes=args.max_bytes, spelling=rules.CLI)


def _spoken(report: CsvReport) -> CsvReport:
    """``report`` with its advice worded for the command line, as ``_check``'s is (``--encoding cp1252``)."""
    return dataclasses.replace(
        report,
        errors=[p.spoken(rules.CLI) for p in report.errors],
        warnings=[p.spoken(rules.CLI) for p in report.warnings],
        stopped=None if report.stopped is None else report.stopped.spoken(rules.CLI),
    )


def _unreadable(path: str, label: str, reason: str) -> CsvReport:
    """The report of a file that could not be read (or whose rejects could not be written), naming ``label``."""
    problem = rules.UNREADABLE.problem(path=label, reason=reason)
    return CsvReport(path=path, size_bytes=0, delimiter=",", columns=[], rows=0, errors=[problem], stopped=problem)


def _format_report(report: CsvReport, bad_rows: str | None = None) -> str:
    """A report a person reads: how the service will see the file, what was set aside, then what is wrong."""
    lines = [f"{report.path}: {'OK' if report.ok else 'REFUSED'}"]
    if report.read:
        lines.append(f"  {report.describe()}")
    if report.columns:
        shown = ", ".join(c if c.isprintable() else repr(c) for c in report.columns[:20])
        more = f", ... ({report.column_count - 20:,} more)" if report.column_count > 20 else ""
        lines.append(f"  columns: {shown}{more}")
    if bad_rows is not None:
        lines.append(f"  bad rows: {bad_rows}")
    lines.extend(f"  error: {p}" for p in report.errors)
    lines.extend(f"  warning: {p}" for p in report.warnings)
    return "\n".join(lines)


def _row_check(args: argparse.Namespace) -> RowCheck | None:
    """The quarantine the options ask to preview; None without any of them (the file is judged whole)."""
    if args.rejects is None and args.max_bad_rows is None and args.max_bad_fraction is None:
        return None
    if args.rejects is not None and len(args.files) > 1:
        args.usage_error(
            f"argument --rejects: one rejects file is for one FILE, and {len(args.files)} were given; leave "
            "--rejects out and each file's bad rows go beside it (<name>.rejects.csv)"
        )
    from airflow_tables.sources.storage import local_file_path
    from airflow_tables.validation.quarantine import RowCheck
    from airflow_tables.validation.row_policy import BadRowPolicy

    local = local_file_path(args.rejects) if args.rejects is not None else None
    folder = os.path.dirname(os.path.abspath(local)) if local else None
    if folder is not None and not os.path.isdir(folder):
        args.usage_error(f"argument --rejects: {folder} is not a directory")
    return RowCheck(BadRowPolicy("quarantine", args.max_bad_rows, args.max_bad_fraction), None, args.rejects)


def _validate(args: argparse.Namespace) -> int:
    check = _row_check(args)
    if check is None:
        checked = [_check(p, args) for p in args.files]
        if args.json:
            json.dump([r.to_dict() for r in checked], sys.stdout, indent=2)
            sys.stdout.write("\n")
        else:
            print("\n\n".join(_format_report(r) for r in checked))
        return 0 if all(r.ok for r in checked) else 1
    previewed = [_preview(p, args, check) for p in args.files]
    if args.json:
        json.dump([p.to_dict() for p in previewed], sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print("\n\n".join(_format_report(p.report, p.bad_rows()) for p in previewed))
    return 0 if all(p.report.ok for p in previewed) else 1


def _encoding(name: str) -> str:
    """``--encoding``: a codec Python knows, or a usage error (exit status 2) before any file is read."""
    try:
        declared(name)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return name


def _max_bad_rows(text: str) -> int:
    """``--max-bad-rows``: a threshold ``BadRowPolicy`` takes, or a usage error worded by it."""
    count = _parsed(text, int, "a whole number")
    _policy_checked(count, None)
    return count


def _max_bad_fraction(text: str) -> float:
    """``--max-bad-fraction``: a fraction from 0 to 1 ``BadRowPolicy`` takes, or a usage error worded by it."""
    fraction = _parsed(text, float, "a number")
    _policy_checked(None, fraction)
    return fraction


def _parsed(text: str, kind: type, noun: str) -> Any:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {noun}: {text!r}") from None


def _policy_checked(count: int | None, fraction: float | None) -> None:
    """A usage error (exit status 2) for a threshold ``BadRowPolicy`` refuses, in its words."""
    from airflow_tables.validation.row_policy import BadRowPolicy

    try:
        BadRowPolicy("quarantine", count, fraction)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="airflow-tables",
        description="Tools for the Data Tables Service provider for Apache Airflow.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    validate = commands.add_parser(
        "validate",
        help="check CSV files against the service's rules before uploading them, and preview their bad rows",
        description=(
            "Read each file once, streaming, and report how the Data Tables Service will read it "
            "(separator, columns as the service names them, rows) and every problem that would make "
            "it refuse or misread the file. Exit status 0 only when every file passes. "
            "With --rejects, --max-bad-rows or --max-bad-fraction, preview what the import operators' "
            "on_bad_rows='quarantine' would decide, with no service: each bad row (wrong number of fields, "
            "a NUL byte, bytes that are not UTF-8, a record over 16 MiB) is written to a rejects file, the "
            "report describes the good rows that would be sent, and exit status 0 means every file would be "
            "sent (some good rows, and the bad ones within both thresholds)."
        ),
    )
    validate.add_argument("files", nargs="+", metavar="FILE", help="a path, or a URI such as s3://conn@bucket/key.csv")
    validate.add_argument("--json", action="store_true", help="print a JSON list of reports")
    validate.add_argument("--max-columns", type=int, default=rules.MAX_COLUMNS, help="default: %(default)s")
    validate.add_argument("--max-bytes", type=int, default=rules.MAX_BYTES, help="default: %(default)s")
    validate.add_argument(
        "--encoding",
        type=_encoding,
        help="the files' encoding when not UTF-8 (a Python codec name: cp1252, latin-1, utf-16)",
    )
    quarantine = validate.add_argument_group(
        "bad rows",
        "any of these previews on_bad_rows='quarantine' (the operators' max_bad_rows, max_bad_fraction, rejects_path)",
    )
    quarantine.add_argument(
        "--rejects",
        metavar="OUT.csv",
        help="where the bad rows are written (a path or a URI), for one FILE; default: beside each file, "
        "<name>.rejects.csv",
    )
    quarantine.add_argument(
        "--max-bad-rows",
        type=_max_bad_rows,
        metavar="N",
        help="refuse a file with more than N bad rows",
    )
    quarantine.add_argument(
        "--max-bad-fraction",
        type=_max_bad_fraction,
        metavar="F",
        help="refuse a file whose bad rows are more than F (0 to 1) of its data rows",
    )
    validate.set_defaults(func=_validate, usage_error=validate.error)
    plan = commands.add_parser(
        "plan",
        help="say what a DAG run would do to the Data Tables Service, and cost, before it runs",
        description=(
            "Load the DAG as Airflow does, render each Data Tables task's templates for the run, and print what "
            "each would do (create, replace, skip, delete, refuse) and cost, then the credits per department. "
            "Only free requests (list, fetch) reach the service. Run it where the Airflow CLI runs. Exit status "
            "1 when a task would be refused (docs/plan.md)."
        ),
    )
    plan.add_argument("dag_id", metavar="DAG_ID")
    plan.add_argument("--logical-date", type=_logical_date, metavar="ISO", help="the run's logical date; default: now")
    plan.add_argument("--conf", type=_run_conf, metavar="JSON", help="the run's conf, a JSON object")
    plan.add_argument("--json", action="store_true", help="print one JSON object")
    plan.set_defaults(func=_plan)
    return parser


def _plan(args: argparse.Namespace) -> int:
    os.environ.setdefault("_AIRFLOW_PROCESS_CONTEXT", "server")  # Airflow's CLI context: its metadata database
    from airflow_tables.planning import print_plan

    return print_plan(args.dag_id, args.logical_date, args.conf, args.json)


def _logical_date(text: str) -> datetime:
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an ISO 8601 date") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _run_conf(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not JSON ({err})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"a JSON object, not {type(value).__name__}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:
        # The reader went away (`| head`): no traceback, and none at exit when Python flushes stdout.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
