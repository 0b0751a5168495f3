"""``airflow-tables``: the command line, for checking files before a DAG spends credits on them.

Imports only the validator (no Airflow, no pandas), so it answers in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from airflow_tables.sources.transcode import declared
from airflow_tables.validation import CsvReport, rules, validate_csv


def _check(path: str, args: argparse.Namespace) -> CsvReport:
    """The file's report, its advice worded in the command line's terms (``--encoding cp1252``)."""
    return validate_csv(
        path, max_columns=args.max_columns, max_bytes=args.max_bytes, encoding=args.encoding, spelling=rules.CLI
    )


def _format_report(report: CsvReport) -> str:
    """A report a person reads: how the service will see the file, then what is wrong."""
    lines = [f"{report.path}: {'OK' if report.ok else 'REFUSED'}"]
    if report.read:
        lines.append(f"  {report.describe()}")
    if report.columns:
        shown = ", ".join(c if c.isprintable() else repr(c) for c in report.columns[:20])
        more = f", ... ({report.column_count - 20:,} more)" if report.column_count > 20 else ""
        lines.append(f"  columns: {shown}{more}")
    lines.extend(f"  error: {p}" for p in report.errors)
    lines.extend(f"  warning: {p}" for p in report.warnings)
    return "\n".join(lines)


def _validate(args: argparse.Namespace) -> int:
    checked = [_check(p, args) for p in args.files]
    if args.json:
        json.dump([r.to_dict() for r in checked], sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print("\n\n".join(_format_report(r) for r in checked))
    return 0 if all(r.ok for r in checked) else 1


def _encoding(name: str) -> str:
    """``--encoding``: a codec Python knows, or a usage error (exit status 2) before any file is read."""
    try:
        declared(name)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return name


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="airflow-tables",
        description="Tools for the Data Tables Service provider for Apache Airflow.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    validate = commands.add_parser(
        "validate",
        help="check CSV files against the service's rules before uploading them",
        description=(
            "Read each file once, streaming, and report how the Data Tables Service will read it "
            "(separator, columns as the service names them, rows) and every problem that would make "
            "it refuse or misread the file. Exit status 0 only when every file passes."
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
    validate.set_defaults(func=_validate)
    return parser


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
