"""A pandas DataFrame as the CSV file the service reads, in the shape the user had.

``DataTablesHook.import_dataframe`` writes the frame through :func:`written_csv` and
uploads the file. What a pandas user expects, and what is done (docs/hook.md, "DataFrames"):

* **Row index.** Each *named* level becomes a column, before the data columns, as
  ``df.reset_index()`` makes it: the keys of ``groupby(...).sum()`` are kept. Unnamed
  levels (a default ``RangeIndex``, the leftover positions of a filter) are not data and
  are not uploaded, as ``df.to_csv(index=False)``; a non-default one is logged.
* **Column names** must be text or whole numbers (written as digits). ``MultiIndex``
  columns (and tuple names) are joined level by level with ``_``, leaving out empty
  levels: ``("amount", "sum")`` becomes ``amount_sum``, ``("region", "")`` ``region``.
  ``None``, NaN, blank names, other types, and names the service would take for the same
  one (compared trimmed and ignoring case, as it compares them) are refused, naming the
  column, rather than renamed by the service to ``column_3`` or ``amount_2``.
* **Empty frames**: a frame without columns is refused; one with columns and no rows
  makes an empty table (the validator's ``no-rows`` warning is logged).
* **Values** are written by the rules a Parquet file's are (``sources/tabular.py``), through
  Arrow as ``df.to_parquet`` takes the frame: a DataFrame and its Parquet file make the same table.
* The file is validated like any other; its warnings are logged, its errors raise
  :class:`CsvValidationError` naming the frame, and its rows and columns must be the
  frame's, so a shape the user did not have is never uploaded.
* ``name`` names the table: ``Daily.CSV`` stays ``Daily.CSV`` (the ``.csv`` check ignores
  case), ``daily`` becomes ``daily.csv``.

pandas is imported here, never when the hook module is (Airflow parses DAG files often).
"""

from __future__ import annotations

import math
import numbers
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from airflow_tables.exceptions import CsvValidationError
from airflow_tables.sources.allowed import provider_directory
from airflow_tables.validation.rules import FILE_SUFFIX

if TYPE_CHECKING:
    import pandas as pd

    from airflow_tables.hooks._http import LogLike

#: Rows written at a time, so a large frame is not converted to text all at once.
CHUNK_ROWS = 50_000
#: How the joined levels of a MultiIndex column are separated.
LEVEL_SEPARATOR = "_"


def _pandas() -> Any:
    """The pandas module, or an error that names the extra which installs it."""
    try:
        import pandas
    except ImportError as err:
        from airflow.exceptions import AirflowOptionalProviderFeatureException

        raise AirflowOptionalProviderFeatureException(
            "import_dataframe needs pandas, which is not installed here; install the provider again with its "
            "'pandas' extra, from where you installed it: the wheel `make dist` built, "
            "pip install 'airflow-tables[pandas]' --find-links dist/; a checkout, pip install -e '.[pandas]' in it; "
            "a package index, pip install 'airflow-tables[pandas]' (docs/install.md, Extras)"
        ) from err
    return pandas


def csv_file_name(name: str) -> str:
    """The file (and so table) name for ``name``: ``.csv`` added unless it already ends so, in any case."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name must name the table, such as 'daily_orders', not {name!r}.")
    file_name = name if name.lower().endswith(FILE_SUFFIX) else f"{name}{FILE_SUFFIX}"
    if "/" in file_name or "\\" in file_name or file_name.startswith(".") or file_name != file_name.strip():
        raise ValueError(f"name must be a plain file name such as 'daily_orders' or 'daily_orders.csv', not {name!r}.")
    return file_name


def _label_text(label: Any) -> str | None:
    """A label as column-name text: strings as they are, whole numbers as digits, anything else None."""
    if isinstance(label, str):
        return label
    if isinstance(label, numbers.Integral) and not isinstance(label, bool):
        return str(int(label))
    return None


def _is_missing(label: Any) -> bool:
    return label is None or (isinstance(label, float) and math.isnan(label))


def _column_name(label: Any, position: int) -> str:
    """The name column ``position`` (1-based) gets in the table, or a ValueError saying what to do."""
    if isinstance(label, tuple):  # a MultiIndex column (or a tuple name): join its non-empty levels
        parts = []
        for level in label:
            if _is_missing(level) or (isinstance(level, str) and not level.strip()):
                continue
            text = _label_text(level)
            if text is None:
                raise ValueError(
                    f"column {position} is named {label!r}, and its level {level!r} is neither text nor a whole "
                    "number; rename the column (df.columns = [...]) before importing."
                )
            parts.append(text)
        name = LEVEL_SEPARATOR.join(parts)
    elif _is_missing(label):
        raise ValueError(
            f"column {position} has no name (None or NaN); every column of a table needs one: "
            "df.rename(columns={...}) or df.columns = [...] before importing."
        )
    else:
        text = _label_text(label)
        if text is None:
            raise ValueError(
                f"column {position} is named {label!r} ({type(label).__name__}), which is neither text nor a whole "
                "number; rename it (for example df.rename(columns=str)) so the table's name is one you chose."
            )
        name = text
    if not name.strip():
        raise ValueError(
            f"column {position} has a blank name ({label!r}); the service would call it column_{position}. "
            "Name it before importing."
        )
    return name


def column_names(columns: Any) -> list[str]:
    """The table's column names for a frame's columns, refusing any the service would rename."""
    names = [_column_name(label, i) for i, label in enumerate(columns, start=1)]
    seen: dict[str, int] = {}
    for i, name in enumerate(names, start=1):
        key = name.strip().casefold()
        if key in seen:
            raise ValueError(
                f"columns {seen[key]} ({names[seen[key] - 1]!r}) and {i} ({name!r}) are one name to the service "
                f"(it compares names trimmed and ignoring case, and would rename the second to {name.strip()}_2); "
                "rename one."
            )
        seen[key] = i
    return names


def upload_frame(df: pd.DataFrame, log: LogLike) -> pd.DataFrame:
    """``df`` as the table will hold it: named index levels as leading columns, flat text column names."""
    levels = list(df.index.names)
    named = [i for i, level in enumerate(levels) if level is not None]
    unnamed = len(levels) - len(named)
    pd = _pandas()
    if unnamed and not (isinstance(df.index, pd.RangeIndex) and not named):
        log.info(
            "the DataFrame's unnamed index level(s) are not uploaded (as with to_csv(index=False)); "
            "name a level (df.rename_axis(...)) to keep it as a column"
        )
    frame = df
    if named:
        clashes = [levels[i] for i in named if levels[i] in df.columns]
        if clashes:
            raise ValueError(
                f"the index level {clashes[0]!r} has the same name as a column, and named index levels become "
                "columns; rename one (df.rename_axis(...) or df.rename(columns=...))."
            )
        frame = df.reset_index(level=named)
    frame = frame.set_axis(column_names(frame.columns), axis=1)
    if frame.shape[1] == 0:
        raise ValueError(
            "the DataFrame has no columns, and a table needs at least one; nothing was uploaded. "
            "Check the step that built it."
        )
    return frame


def _write_by_the_rules(frame: pd.DataFrame, path: str, label: str, encoding: str | None) -> None:
    """Write ``frame`` as the CSV a Parquet file of it becomes (``sources/tabular.py``'s rules), in ``encoding``.

    The frame goes through Arrow, as ``df.to_parquet`` takes it, so a DataFrame and its Parquet
    file make the same table: floats in their shortest round-trip form, ``true``/``false``,
    ISO 8601 dates and timestamps in the zone they carry, text quoted only where a separator,
    a quote or a line break is in it. A column Arrow cannot type (objects of mixed kinds) is
    refused naming it.
    """
    import pyarrow as pa

    from airflow_tables.sources import SourceError
    from airflow_tables.sources.tabular import table_csv

    try:
        table = pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowException, TypeError, ValueError) as err:
        raise ValueError(f"{label} has a column of values no CSV column holds ({err}); nothing was uploaded") from None
    try:
        with open(path, "wb") as out:
            for chunk in table_csv(table, label):
                out.write(chunk if encoding is None else bytes(chunk).decode().encode(encoding))
    except SourceError as err:
        raise ValueError(f"{err.reason}; nothing was uploaded") from None
    except UnicodeEncodeError as err:
        raise ValueError(
            f"{label} holds text that {encoding} cannot represent: {err.object[err.start : err.end]!r}; "
            "nothing was uploaded"
        ) from None


@contextmanager
def written_csv(df: pd.DataFrame, name: str, log: LogLike, *, encoding: str | None = None) -> Iterator[str]:
    """Write ``df`` to a validated temporary CSV named after ``name``; yield its path, remove it afterwards.

    With ``encoding``, the CSV is written in that encoding (a value it cannot represent is a
    :class:`ValueError` naming it) and checked in it, as any file declared in it would be.
    """
    from airflow_tables.sources.transcode import declared

    declared(encoding)  # an unknown codec is a ValueError before the frame is written
    pd = _pandas()
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"df must be a pandas DataFrame, not {type(df).__name__}.")
    file_name = csv_file_name(name)
    frame = upload_frame(df, log)
    from airflow_tables.validation import validate_csv

    label = f"the DataFrame for {file_name}"
    with tempfile.TemporaryDirectory(prefix="airflow-tables-") as tmp, provider_directory(tmp):
        path = os.path.join(tmp, file_name)
        _write_by_the_rules(frame, path, label, encoding)
        report = validate_csv(path, encoding=encoding)
        log.info("%s (from the DataFrame)", report.summary())
        for warning in report.warnings:
            log.warning("%s: %s", label, warning)
        if not report.ok:
            raise CsvValidationError(label, report.errors)
        if (report.rows, len(report.columns)) != frame.shape:
            raise ValueError(
                f"{label} reads as {report.rows:,} rows x {len(report.columns)} columns, not the frame's "
                f"{frame.shape[0]:,} x {frame.shape[1]}; nothing was uploaded. Please report this as a bug."
            )
        yield path
