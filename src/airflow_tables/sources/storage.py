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
import io
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, cast

if TYPE_CHECKING:
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
#: Bytes of a streamed GET handed over at a time (and fetched ahead): the stream is one request
#: whatever this is, and blocks that stay in the CPU's cache copy faster than 8 MiB ones (the
#: object's scan is measured in benchmarks/sources.py).
STREAM_BLOCK = 1024 * 1024


class SourceError(OSError):
    """A file or object cannot be read; nothing was read from it, and nothing sent anywhere."""

    def __init__(self, label: str, reason: str) -> None:
        super().__init__(f"cannot read {label}: {reason}")
        self.label = label
        self.reason = reason


class SourceNotFoundError(SourceError, FileNotFoundError):
    """The file or object does not exist (or is a directory)."""


def is_uri(value: object) -> bool:
    """A string with a scheme (``s3://``, ``file://``), as opposed to a local path."""
    return isinstance(value, str) and _URI.match(value) is not None


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
    return StoredObject(path.name, int(info["size"]), None, lambda: open_stream(fs, key, label))


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
    (``open_async``): one request, the object as it was when it started. Others are read
    in blocks of :data:`READ_BLOCK` (one ranged request each).
    """
    from fsspec.asyn import AsyncFileSystem

    if isinstance(fs, AsyncFileSystem) and type(fs).open_async is not AsyncFileSystem.open_async:
        return cast(BinaryIO, _AsyncStream(fs, key, label))
    try:
        return fs.open(key, "rb", block_size=READ_BLOCK, cache_type="none")
    except Exception as err:
        raise SourceError(label, f"the storage refused or failed ({type(err).__name__}: {err})") from err


class _AsyncStream(io.RawIOBase):
    """One streamed GET of an object, read from synchronous code through fsspec's event loop.

    The next block is fetched on the loop while the caller uses the last one (scans it,
    sends it, converts it), so reading from storage and the work on it overlap instead of
    taking turns. A block is the list of pieces the HTTP client returned (64-256 KiB each),
    copied once, straight into the caller's buffer: joining them first, or reading through
    an ``io.BufferedReader``, costs two more copies (measured in ``benchmarks/sources.py``).
    At most two blocks are held.
    """

    def __init__(self, fs: Any, key: str, label: str, block_size: int = STREAM_BLOCK) -> None:
        super().__init__()
        self.fs = fs
        self.key = key
        self.label = label
        self.block_size = block_size
        self._file: Any = None
        self._next: concurrent.futures.Future[list[bytes]] | None = None
        self._pieces: list[memoryview] = []  # the current block's pieces not yet handed over
        self._done = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if not self._pieces and not self._take_block():
            return 0
        target = memoryview(buffer).cast("B")
        filled = 0
        while self._pieces and filled < len(target):
            piece = self._pieces[0]
            n = min(len(piece), len(target) - filled)
            target[filled : filled + n] = piece[:n]
            filled += n
            if n == len(piece):
                self._pieces.pop(0)
            else:
                self._pieces[0] = piece[n:]
        return filled

    def _take_block(self) -> bool:
        """Wait for the block being fetched and start fetching the next; False at the end of the object."""
        if self._done:
            return False
        if self._next is None:
            self._next = self._fetch()
        try:
            pieces = self._next.result()
        except OSError:
            raise
        except Exception as err:  # the storage library's own error types: an OSError, saying which
            raise SourceError(self.label, f"reading failed ({type(err).__name__}: {err})") from err
        self._done = not pieces
        self._next = None if self._done else self._fetch()
        self._pieces = [memoryview(piece) for piece in pieces]
        return not self._done

    def _fetch(self) -> concurrent.futures.Future[list[bytes]]:
        import asyncio

        return asyncio.run_coroutine_threadsafe(self._read(self.block_size), self.fs.loop)

    async def _read(self, length: int) -> list[bytes]:
        if self._file is None:
            self._file = await self.fs.open_async(self.key, "rb")
        pieces, got = [], 0
        while got < length:  # one trip through the loop per block, not per piece
            piece = await self._file.read(length - got)
            if not piece:
                break
            pieces.append(piece)
            got += len(piece)
        return pieces

    def close(self) -> None:
        if not self.closed:
            if self._next is not None:
                self._next.cancel()
                with contextlib.suppress(Exception):  # a read cut short: its outcome no longer matters
                    self._next.result(timeout=30)
            if self._file is not None:
                import asyncio

                with contextlib.suppress(Exception):  # closing a finished or failed GET: nothing left to do
                    asyncio.run_coroutine_threadsafe(self._file.close(), self.fs.loop).result(timeout=30)
            self._file = self._next = None
            self._pieces = []
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
