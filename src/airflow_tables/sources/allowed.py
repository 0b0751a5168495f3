"""Where files may be read from: ``[datatables] allowed_sources`` and the operators' ``allowed_sources=``.

A ``file_path`` is often templated from a trigger's params or an upstream XCom, so whoever
triggers a DAG may otherwise make a worker read (and upload to the service) any file it can
read, or any object its connections reach. One notion bounds that: an **allowed prefix**.

* A local prefix (``/data/incoming``, or ``file:///data/incoming``) is a directory. A path is
  allowed when its real path, with symlinks and ``..`` resolved (``os.path.realpath``), is
  inside it, at a segment boundary: ``/data/in`` does not allow ``/data/incoming``.
* A URI prefix (``s3://aws_default@landing/incoming/``) names a scheme, a connection, a
  bucket and a key prefix (again at a ``/`` boundary; no bucket: every bucket of that
  connection). A URI without ``conn@`` is read with no Airflow connection (S3: the worker's
  own credentials, boto3's chain, not ``aws_default``), so it matches only prefixes without
  one. A key with a ``..`` segment is refused outright: stores differ in what it means.

The deployment's setting and a task's argument are two lists; a file must be allowed by each
one that is set, so a DAG can narrow what the deployment allows but never widen it. Both are
checked in :func:`airflow_tables.sources.open_source`, which every reader goes through
(``validate_csv``, the hook's ``import_csv`` and ``import_dataframe``, the operators), before
the storage or the service is asked anything; even a connection is not looked up.

The setting is read through Airflow's configuration when Airflow is loaded (every task,
every Airflow process: ``airflow.cfg``, ``_CMD`` and secrets backends included), and from
the environment variable alone otherwise: ``airflow-tables validate`` must start without
importing Airflow, and a person validating a file on their own machine is bounded by their
own permissions, not by the deployment's list.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from airflow_tables.sources.errors import SourceError
from airflow_tables.sources.storage import is_storage_path, is_uri, label_of

#: The setting's environment variable, read directly when Airflow is not loaded.
ENV = "AIRFLOW__DATATABLES__ALLOWED_SOURCES"
SETTING = "[datatables] allowed_sources"
ARGUMENT = "the task's allowed_sources"
#: Schemes whose paths are local files (fsspec's LocalFileSystem).
LOCAL_SCHEMES = frozenset({"file", "local"})

#: Directories the provider made for itself (``import_dataframe``'s CSV), readable while their block runs.
_OWN: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("airflow_tables_own_dirs", default=())


class SourceNotAllowedError(SourceError, PermissionError):
    """The file is outside the allowed sources: nothing was read from it, nothing sent. Retrying cannot help."""


@dataclass(frozen=True)
class Prefix:
    """One allowed prefix: a local directory (``directory``) or a scheme, connection, bucket and key prefix."""

    text: str
    directory: str | None = None
    scheme: str = ""
    conn_id: str | None = None
    bucket: str = ""
    key: str = ""

    def allows_path(self, real: str) -> bool:
        """Whether a resolved local path is this directory or inside it."""
        if self.directory is None:
            return False
        root = os.path.realpath(self.directory)  # now, not when parsed: the directory may be a symlink
        return real == root or real.startswith(root.rstrip(os.sep) + os.sep)

    def allows_object(self, obj: _Object) -> bool:
        """Whether an object's scheme, connection, bucket and key fall under this prefix."""
        if self.directory is not None or (self.scheme, self.conn_id) != (obj.scheme, obj.conn_id):
            return False
        if self.bucket and self.bucket != obj.bucket:
            return False
        return not self.key or obj.key == self.key or obj.key.startswith(self.key + "/")


@dataclass(frozen=True)
class _Object:
    scheme: str
    conn_id: str | None
    bucket: str
    key: str


def parse_prefixes(entries: str | Iterable[str], origin: str) -> tuple[Prefix, ...]:
    """The prefixes of a comma-separated list (the setting) or a sequence (the argument).

    Raises :class:`ValueError`, naming ``origin``, for a local prefix that is not absolute
    (it would depend on the worker's current directory) or a URI prefix with ``..``.
    """
    items = entries.split(",") if isinstance(entries, str) else list(entries)
    prefixes = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"{origin}: each prefix is a string, not {type(item).__name__} {item!r}")
        text = item.strip()
        if text:
            prefixes.append(_prefix(text, origin))
    return tuple(prefixes)


def _prefix(text: str, origin: str) -> Prefix:
    shown = label_of(text)
    if is_uri(text):
        parts = urlsplit(text)
        if parts.scheme.lower() in LOCAL_SCHEMES:
            if parts.netloc or not os.path.isabs(parts.path):
                raise ValueError(f"{origin}: {shown!r} is not a local directory; write it as file:///path/to/dir")
            return Prefix(shown, os.path.normpath(unquote(parts.path)))
        obj = _object_of(parts.scheme, *_user_and_bucket(parts.netloc), parts.path)
        if _has_dot_dot(obj):
            raise ValueError(f"{origin}: {shown!r} has a '..' segment; name the prefix without it")
        return Prefix(shown, None, obj.scheme, obj.conn_id, obj.bucket, obj.key.rstrip("/"))
    if not os.path.isabs(text):
        raise ValueError(
            f"{origin}: {shown!r} is not an absolute directory or a URI with a scheme; "
            "write it as /path/to/dir or s3://conn_id@bucket/prefix/"
        )
    return Prefix(shown, os.path.normpath(text))


def _user_and_bucket(netloc: str) -> tuple[str | None, str]:
    # As ObjectStoragePath reads it: what is before the last '@' is the connection id.
    user, at, host = netloc.rpartition("@")
    return (user or None) if at else None, host


def _conn_id_of(file: Any) -> str | None:
    """An ObjectStoragePath's connection: an attribute from Airflow 3.2, only a storage option on 3.1.

    (3.1 also leaves ``conn_id@`` in front of its ``bucket``, which the caller drops.)
    """
    return getattr(file, "conn_id", None) or (getattr(file, "storage_options", None) or {}).get("conn_id")


def _object_of(scheme: str, conn_id: str | None, bucket: str, path: str) -> _Object:
    return _Object(scheme.lower(), conn_id, bucket, path.lstrip("/"))


def _has_dot_dot(obj: _Object) -> bool:
    # Decoded first: a reader or an HTTP client that decodes %2F and %2E must not find one either.
    return ".." in (unquote(obj.bucket), *unquote(obj.key).split("/"))


def configured() -> tuple[Prefix, ...]:
    """The deployment's prefixes (``[datatables] allowed_sources``); empty: any file the worker can read."""
    if "airflow" in sys.modules:
        from airflow_tables.version_compat import conf

        value = conf.get("datatables", "allowed_sources", fallback="") or ""
    else:
        value = os.environ.get(ENV, "")
    return parse_prefixes(value, SETTING)


def _layers(allowed: Sequence[Prefix] | None) -> list[tuple[str, Sequence[Prefix]]]:
    """Each list that is set, with its name: a file must pass every one."""
    layers: list[tuple[str, Sequence[Prefix]]] = []
    setting = configured()
    if setting:
        layers.append((SETTING, setting))
    if allowed is not None:
        layers.append((ARGUMENT, allowed))
    return layers


def check_object(file: Any, allowed: Sequence[Prefix] | None = None) -> None:
    """Refuse a URI or ``ObjectStoragePath`` outside the allowed prefixes, before it is constructed or stat'd.

    A local-scheme URI passes here when a local prefix exists; its resolved path is checked
    by :func:`check_path` once the path it reads is known.
    """
    if is_storage_path(file):
        obj = _object_of(file.protocol or "file", _conn_id_of(file), file.bucket.rpartition("@")[2], file.key)
    else:
        parts = urlsplit(str(file))
        obj = _object_of(parts.scheme, *_user_and_bucket(parts.netloc), parts.path)
    label = label_of(file)
    for origin, prefixes in _layers(allowed):
        if obj.scheme in LOCAL_SCHEMES:  # file:///path only: no connection, no host (file://x/y is relative)
            ok = (obj.conn_id, obj.bucket) == (None, "") and any(prefix.directory is not None for prefix in prefixes)
        else:
            ok = not _has_dot_dot(obj) and any(prefix.allows_object(obj) for prefix in prefixes)
        if not ok:
            why = "its key has a '..' segment, which is never allowed" if _has_dot_dot(obj) else None
            raise _refusal(label, origin, prefixes, why)


def check(file: Any, allowed: str | Sequence[str] | None = None) -> None:
    """Refuse ``file`` (a path, URI or ``ObjectStoragePath``, of a file or a folder) outside the allowed sources.

    For code that reads a place itself, such as a listing of the files under a prefix, before
    it does; :func:`~airflow_tables.sources.open_source` checks every file it opens the same way.
    """
    narrowed = None if allowed is None else parse_prefixes(allowed, ARGUMENT)
    if not (is_storage_path(file) or is_uri(file)):
        check_path(str(file), os.fspath(file), narrowed)
        return
    check_object(file, narrowed)
    if is_storage_path(file):
        local = file.path if (file.protocol or "file") in LOCAL_SCHEMES else None
    else:
        parts = urlsplit(str(file))
        local = unquote(parts.path) if parts.scheme.lower() in LOCAL_SCHEMES else None
    if local is not None:
        check_path(label_of(file), local, narrowed)


def check_path(label: str, path: str, allowed: Sequence[Prefix] | None = None) -> None:
    """Refuse a local file whose real path (symlinks and ``..`` resolved) is outside the allowed directories."""
    real = os.path.realpath(path)
    if any(real == own or real.startswith(own + os.sep) for own in _OWN.get()):
        return
    for origin, prefixes in _layers(allowed):
        if not any(prefix.allows_path(real) for prefix in prefixes):
            raise _refusal(label, origin, prefixes, "its real path (symlinks and '..' resolved) is outside them")


def _refusal(label: str, origin: str, prefixes: Sequence[Prefix], why: str | None) -> SourceNotAllowedError:
    listed = ", ".join(prefix.text for prefix in prefixes)
    reason = (
        f"it is not an allowed source: {origin} allows only {listed}"
        + (f"; {why}" if why else "")
        + ". Read the file from one of those places, or have the deployment allow its prefix "
        "(docs/sources.md, 'Security')"
    )
    return SourceNotAllowedError(label, reason)


@contextlib.contextmanager
def provider_directory(path: str) -> Iterator[None]:
    """Let the current context read files under ``path``, a temporary directory the provider made, for the block.

    ``import_dataframe`` writes the frame to such a directory and reads it back through
    :func:`~airflow_tables.sources.open_source`; no user named that file, so no list applies.
    """
    token = _OWN.set((*_OWN.get(), os.path.realpath(path)))
    try:
        yield
    finally:
        _OWN.reset(token)
