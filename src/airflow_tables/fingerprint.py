"""A file's content fingerprint: what decides that a replacement would send nothing new.

``skip_if_unchanged`` skips a paid import when the file's bytes are those this provider
last uploaded to the table. The fingerprint is XXH3-128 of the bytes as they would reach
the service (the declared encoding, if any, is part of it) and their length: a fast,
non-cryptographic hash, chosen because it must cost next to nothing beside the validation
scan that reads the same bytes (``benchmarks/fingerprint.py``: SHA-256 would cost more than
the scan itself on two cores). A collision between two files a pipeline writes for the same
table is not a practical risk (2^-64 for a birthday pair); a deliberately forged one is out
of scope: whoever can write the file can write any data into the table anyway.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: Bytes of the file mapped at a time (a multiple of every platform's mmap granularity).
WINDOW = 64 * 1024 * 1024
ALGORITHM = "xxh3-128"


def fingerprint_file(path: str | os.PathLike[str], *, encoding: str | None = None) -> str:
    """``xxh3-128:<hex>:<size>`` of the file's bytes.

    The file is mapped, not read: the hash reads the page cache in place, without copying
    512 MiB through a buffer beside the validation scan that reads the same pages (on a
    virtual machine that copy costs more than the hash: 1.4x validation alone against 1.2x,
    ``benchmarks/fingerprint.py``). It is mapped a window of :data:`WINDOW` at a time, so the
    process's resident size stays bounded whatever the file's size. A file that changes size
    meanwhile is an :class:`OSError`; one truncated in place during the instant its window is
    hashed would end the process (SIGBUS), as it would any reader of a mapped file: files are
    written completely before they are imported (the upload checks that too).
    """
    import mmap

    import xxhash

    hasher = xxhash.xxh3_128()
    if encoding is not None:
        hasher.update(f"encoding={encoding.lower()}\0".encode())
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        for offset in range(0, size, WINDOW):
            if os.fstat(f.fileno()).st_size != size:
                raise OSError(f"{os.fspath(path)} changed size while it was fingerprinted")
            length = min(WINDOW, size - offset)
            with mmap.mmap(f.fileno(), length, access=mmap.ACCESS_READ, offset=offset) as window:
                if hasattr(window, "madvise"):
                    window.madvise(mmap.MADV_SEQUENTIAL)
                with memoryview(window) as view:
                    hasher.update(view)
    return f"{ALGORITHM}:{hasher.hexdigest()}:{size}"


def while_validating(
    validate: Callable[[], T], path: str | os.PathLike[str], *, encoding: str | None = None
) -> tuple[T, str]:
    """Run ``validate()`` and fingerprint ``path`` at the same time; return both.

    The hash runs in a thread beside the validation scan (whose work happens in its C kernel
    and its range processes, outside the GIL), reading the same bytes while the page cache
    holds them, so it adds little to the scan's time (``benchmarks/fingerprint.py``).
    """
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="fingerprint") as pool:
        fingerprint = pool.submit(fingerprint_file, path, encoding=encoding)
        result = validate()
        return result, fingerprint.result()
