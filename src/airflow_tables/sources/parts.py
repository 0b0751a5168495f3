"""Many files named at once, for ``combine=``: a list, a glob, or an object-storage prefix, each as a Source.

``file_path`` names the parts of one table in one of three ways:

* a list (or tuple) of paths, URIs or ``ObjectStoragePath``: the parts in the order given;
* a glob, ``*``, ``?`` or ``[...]`` in the last segment of a local path or a URI
  (``s3://aws_default@landing/2026-11-29/part-*.csv.gz``): the files it matches, by name;
* a URI (or path) ending in ``/``: every file directly under that prefix, by name.

Each part is opened as any file is (:func:`~airflow_tables.sources.open_source`: allowed
sources, compression, ``input_format``), so a refused or missing part fails before anything is
read. A pattern or prefix that matches nothing is refused: an empty part list would make an
empty table, or a wrong one.
"""

from __future__ import annotations

import fnmatch
import glob
import os
from collections.abc import Sequence
from typing import Any

from airflow_tables.sources.errors import SourceError

#: The characters that make a last segment a pattern (as ``glob`` reads them).
PATTERN_CHARS = "*?["


def names_many(file_path: Any) -> bool:
    """Whether ``file_path`` names several files: a list, a pattern in its last segment, or a prefix (``/``)."""
    if isinstance(file_path, (list, tuple)):
        return True
    if not isinstance(file_path, (str, os.PathLike)):
        return False
    text = os.fspath(file_path)
    return text.endswith("/") or any(c in text.rsplit("/", 1)[-1] for c in PATTERN_CHARS)


def open_parts(
    file_path: Any,
    encoding: str | None = None,
    *,
    allowed: str | Sequence[str] | None = None,
    input_format: str | None = None,
) -> list[Any]:
    """The parts ``file_path`` names, each opened (a :class:`~airflow_tables.sources.Source`), in their order."""
    from airflow_tables.sources import open_source

    names = _part_names(file_path)
    if not names:
        raise SourceError(_label(file_path), "it names no file; an empty list of parts is refused (nothing was sent)")
    return [open_source(name, encoding, allowed=allowed, input_format=input_format) for name in names]


def _part_names(file_path: Any) -> list[Any]:
    if isinstance(file_path, (list, tuple)):
        return list(file_path)
    text = os.fspath(file_path)
    from airflow_tables.sources.storage import is_uri

    if not is_uri(text):
        return _local_matches(text)
    return _object_matches(text)


def _local_matches(text: str) -> list[str]:
    """The local files a pattern or a folder (``/``) names, sorted by path; folders are not parts."""
    pattern = os.path.join(text, "*") if text.endswith("/") else text
    return sorted(path for path in glob.glob(pattern) if os.path.isfile(path))


def _object_matches(text: str) -> list[str]:
    """The objects a URI pattern or prefix names: one listing of the prefix, names matched, sorted by key."""
    from airflow_tables.sources.storage import _filesystem, _storage_path, label_of

    label = label_of(text)
    prefix, _, pattern = text.rpartition("/")
    pattern = pattern or "*"
    folder = _storage_path(prefix + "/", label)
    fs = _filesystem(folder, label)
    try:
        fs.invalidate_cache(folder.path)
        entries = fs.ls(folder.path, detail=True)
    except FileNotFoundError:
        return []
    except Exception as err:  # any storage library's error: say which
        raise SourceError(label, f"the storage refused or failed to list it ({type(err).__name__}: {err})") from err
    names = sorted(
        entry["name"].rsplit("/", 1)[-1]
        for entry in entries
        if entry.get("type") != "directory" and fnmatch.fnmatchcase(entry["name"].rsplit("/", 1)[-1], pattern)
    )
    return [f"{prefix}/{name}" for name in names]


def _label(file_path: Any) -> str:
    from airflow_tables.sources.storage import label_of

    return label_of(file_path) if not isinstance(file_path, (list, tuple)) else f"a list of {len(file_path)} files"


__all__ = ["PATTERN_CHARS", "names_many", "open_parts"]
