"""Objects in storage (S3, GCS, Azure...), read through Airflow's own object storage layer.

``s3://aws_conn@bucket/key.csv`` is read as Airflow users already write it: with
``airflow.sdk.ObjectStoragePath``, the filesystem its provider registers, and the
connection named in the URI. Airflow (and fsspec behind it) is imported only here, and
only for such a path, so the validator still starts in milliseconds for local files.

Everything that can go wrong before a byte is read (no filesystem for the scheme, a
connection that does not work, a missing object, a storage error) becomes a
:class:`SourceError` naming the object, and for a missing filesystem the package to
install; callers turn that into "nothing was sent".
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from airflow_tables.sources.errors import SourceError, SourceNotFoundError
from airflow_tables.sources.read_ahead import ReadAhead

if TYPE_CHECKING:
    import asyncio
    import concurrent.futures

    from fsspec import AbstractFileSystem

#: A URI has a scheme of two or more characters (``C:\\data.csv`` is a local path).
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+://")
#: The provider (and extra) that registers each scheme's filesystem with Airflow.
INSTALL = {
    "s3": "apache-airflow-providers-amazon[s3fs]",
    "s3a": "apache-airflow-providers-amazon[s3fs]",
    "gs": "apache-airflow-providers-google",
    "gcs": "apache-airflow-providers-google",
    "abfs": "apache-airflow-providers-microsoft-azure",
    "abfss": "apache-airflow-providers-microsoft-azure",
    "az": "apache-airflow-providers-microsoft-azure",
    "adl": "apache-airflow-providers-microsoft-azure",
}
#: Bytes asked of the storage per read when it cannot stream an object in one request.
READ_BLOCK = 8 * 1024 * 1024
#: Bytes of a streamed GET received ahead of the reader, at most: the read-ahead that lets the
#: download go on while the last bytes are sent or scanned (the task's memory grows by about this).
READ_AHEAD = 8 * 1024 * 1024
#: Bytes asked of the HTTP client per read of a streamed GET: it returns what it has received,
#: up to this (64-256 KiB at a time in practice), so each piece is handed over as it arrives.
READ_PIECE = 1024 * 1024


def is_uri(value: object) -> bool:
    """A string with a scheme (``s3://``, ``file://``), as opposed to a local path."""
    return isinstance(value, str) and _URI.match(value) is not None


def local_file_path(value: object) -> str | None:
    """The local path a ``file_path`` names (a path or a ``file://`` URI); ``None`` for an object in storage."""
    from urllib.parse import unquote, urlsplit

    if is_storage_path(value):
        return None
    if is_uri(value):
        assert isinstance(value, str)  # is_uri made sure
        parts = urlsplit(value)
        return unquote(parts.path) if parts.scheme == "file" else None
    return os.fspath(value) if isinstance(value, (str, os.PathLike)) else None


def is_storage_path(value: object) -> bool:
    """An ``ObjectStoragePath`` (or any universal-pathlib path), without importing Airflow to find out."""
    upath = sys.modules.get("upath")
    return upath is not None and isinstance(value, upath.UPath)


def label_of(value: object) -> str:
    """How messages name a path or URI: as given, without a password in it."""
    text = str(value)
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.\-]+://[^/@:]*):[^/@]*@", r"\1:***@", text)


@dataclass(frozen=True)
class StoredObject:
    """An object that exists: its size, its local path when the filesystem is the local disk, and a reader."""

    name: str
    size: int
    local_path: str | None
    open: Callable[[], BinaryIO]
    #: What the storage says changes with the content (an ETag, else a modification time), if anything.
    version: str | None = None


def stat_object(value: Any, check_local: Callable[[str], None] | None = None) -> StoredObject:
    """Find the object a URI or ``ObjectStoragePath`` names, or raise :class:`SourceError`.

    ``check_local`` is given the local path a ``file://`` URI reads before it is looked at,
    so a refusal (see :mod:`.allowed`) says nothing about whether the file exists.
    """
    from fsspec.implementations.local import LocalFileSystem

    label = label_of(value)
    path = _storage_path(value, label)
    fs = _filesystem(path, label)
    key = path.path
    local = fs._strip_protocol(key) if isinstance(fs, LocalFileSystem) else None
    if local is not None and check_local is not None:
        check_local(local)
    try:
        fs.invalidate_cache(key)  # the size now, not as an earlier listing in this process saw it
        info = fs.info(key)
    except FileNotFoundError:
        raise SourceNotFoundError(label, "no such object") from None
    except Exception as err:  # any storage library's error: say which, keep the cause
        raise SourceError(label, f"the storage refused or failed ({type(err).__name__}: {err})") from err
    if info.get("type") == "directory":
        raise SourceNotFoundError(label, "it is a directory (a prefix), not a file")
    if local is not None:
        return StoredObject(path.name, int(info["size"]), local, local_opener(local))
    return StoredObject(path.name, int(info["size"]), None, lambda: open_stream(fs, key, label), _version(info))


def _version(info: dict[str, Any]) -> str | None:
    """The object's version as its listing gives it: the ETag (S3, GCS, Azure), else when it last changed."""
    for field in ("ETag", "etag", "VersionId", "generation", "LastModified", "last_modified", "mtime", "updated"):
        value = info.get(field)
        if value not in (None, ""):
            return f"{field}={value}"
    return None


def _storage_path(value: Any, label: str) -> Any:
    try:
        from airflow.sdk import ObjectStoragePath
    except ImportError as err:  # pragma: no cover - Airflow is a dependency; a broken install
        raise SourceError(label, f"Airflow's object storage cannot be imported ({err})") from err
    return value if isinstance(value, ObjectStoragePath) else ObjectStoragePath(value)


def _filesystem(path: Any, label: str) -> AbstractFileSystem:
    scheme = path.protocol or "file"
    hint = INSTALL.get(scheme)
    install = f"pip install '{hint}'" if hint else "install the Airflow provider that supports it"
    try:
        return path.fs
    except ImportError as err:
        raise SourceError(label, f"the filesystem for {scheme}:// is not installed ({err}); {install}") from None
    except ValueError as err:
        if "No filesystem registered" not in str(err):
            raise SourceError(label, f"the storage connection failed ({err})") from err
        raise SourceError(label, f"no filesystem for {scheme}:// is installed in Airflow; {install}") from None
    except Exception as err:  # a connection that cannot be used, a provider that fails to start
        raise SourceError(label, f"the storage connection failed ({type(err).__name__}: {err})") from err


def open_stream(fs: AbstractFileSystem, key: str, label: str) -> BinaryIO:
    """The object's bytes as a binary stream, in one request where the filesystem can.

    An asynchronous filesystem (s3fs, gcsfs...) can stream an object from one GET
    (``open_async``): one request, the object as it was when it started; for S3 that GET is
    made over a URL the filesystem's client signs where that sends the same request
    (:mod:`.presigned`: a third of the CPU). Others are read in blocks of :data:`READ_BLOCK`
    (one ranged request each).
    """
    from fsspec.asyn import AsyncFileSystem

    from airflow_tables.sources.presigned import presigned_stream

    if isinstance(fs, AsyncFileSystem) and type(fs).open_async is not AsyncFileSystem.open_async:
        fast = presigned_stream(fs, key, label)
        return cast(BinaryIO, fast if fast is not None else ObjectStream(fs, key, label))
    try:
        return fs.open(key, "rb", block_size=READ_BLOCK, cache_type="none")
    except Exception as err:
        raise SourceError(label, f"the storage refused or failed ({type(err).__name__}: {err})") from err


class ObjectStream(ReadAhead):
    """One streamed GET of an object, read ahead on fsspec's event loop while the caller works.

    A task on the storage's own event loop reads the response as it arrives and queues the
    pieces the HTTP client hands it (no copy), up to :data:`READ_AHEAD` bytes ahead of the
    reader (:class:`.ReadAhead`). So the download never waits for a block to be asked for,
    and the reader never waits for one to be fetched unless the storage is the slower end
    (``docs/sources.md`` has the measurements). One request: the object as it was when the
    GET started.
    """

    def __init__(self, fs: Any, key: str, label: str, read_ahead: int = READ_AHEAD, piece: int = READ_PIECE) -> None:
        super().__init__(label, read_ahead, piece)
        self.fs = fs
        self.key = key
        self._paused = False  # the pump waits for room
        self._room: asyncio.Event | None = None
        self._pump_future: concurrent.futures.Future[None] | None = None

    def _start(self) -> None:
        import asyncio  # not at import: the validator of local files starts in milliseconds

        self._pump_future = asyncio.run_coroutine_threadsafe(self._pump(), self.fs.loop)

    def _taken(self) -> None:
        if self._paused and self._held <= self.read_ahead // 2:
            self._paused = False
            room = self._room
            assert room is not None  # made by the pump before it pauses
            self.fs.loop.call_soon_threadsafe(room.set)

    async def _pump(self) -> None:
        """Read the GET's body into the queue, pausing while :data:`READ_AHEAD` bytes wait there."""
        import asyncio

        self._room = asyncio.Event()
        try:
            file = await self.fs.open_async(self.key, "rb")
            try:
                while piece := await file.read(self.piece):
                    self._put(memoryview(piece))
                    with self._ready:
                        if self._held >= self.read_ahead:
                            self._paused = True
                            self._room.clear()
                    if self._paused:
                        await self._room.wait()
            finally:
                with contextlib.suppress(Exception):  # closing a finished or failed GET: nothing left to do
                    await file.close()
        except Exception as err:  # handed to the reader, which raises it as an OSError naming the object
            self._finish(err)
        else:
            self._finish()

    def close(self) -> None:
        if not self.closed:
            future, self._pump_future = self._pump_future, None
            if future is not None and not future.done():
                import concurrent.futures

                future.cancel()  # a read cut short: stop the GET
                with contextlib.suppress(Exception, concurrent.futures.CancelledError):
                    future.result(timeout=30)
        super().close()


def local_opener(path: str) -> Callable[[], BinaryIO]:
    """Opens a local file unbuffered: readinto() then goes straight from the page cache to the caller's buffer."""
    return cast(Callable[[], BinaryIO], functools.partial(open, path, "rb", buffering=0))


def local_size(path: str) -> int:
    """The size of a local file, or :class:`SourceError` for a missing one or a directory."""
    try:
        st = os.stat(path)
    except OSError as err:
        error = SourceNotFoundError if isinstance(err, FileNotFoundError) else SourceError
        raise error(path, err.strerror or type(err).__name__) from None
    if os.path.isdir(path):
        raise SourceNotFoundError(path, "it is a directory, not a file")
    if not os.path.isfile(path):
        raise SourceError(path, "it is not a regular file (a FIFO, a socket or a device): copy it to a file first")
    return st.st_size


def put_file(local: str, value: Any) -> None:
    """Upload the local file ``local`` to the object a URI or ``ObjectStoragePath`` names, in one piece.

    Raises :class:`OSError` naming the object when the storage cannot be reached or refuses the write.
    """
    label = label_of(value)
    try:
        path = _storage_path(value, label)
        fs = _filesystem(path, label)
        fs.put_file(local, path.path)
    except SourceError as err:
        raise OSError(f"cannot write {label}: {err.reason}") from None
    except Exception as err:  # any storage library's error: say which, keep the cause
        raise OSError(f"cannot write {label}: the storage refused it ({type(err).__name__}: {err})") from err
