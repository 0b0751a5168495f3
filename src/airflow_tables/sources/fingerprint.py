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

from airflow_tables.sources.mapped import mapped_windows

T = TypeVar("T")

ALGORITHM = "xxh3-128"


def fingerprint_file(path: str | os.PathLike[str], *, encoding: str | None = None) -> str:
    """``xxh3-128:<hex>:<size>`` of the file's bytes.

    The file is mapped, not read (:mod:`airflow_tables.sources.mapped`): the hash reads the page
    cache in place, without copying 512 MiB through a buffer beside the validation scan that
    reads the same pages (on a virtual machine that copy costs more than the hash; measured in
    ``benchmarks/fingerprint.py``). A file that changes size
    meanwhile is an :class:`OSError`.
    """
    import xxhash

    hasher = xxhash.xxh3_128()
    if encoding is not None:
        hasher.update(f"encoding={encoding.lower()}\0".encode())
    size = 0
    for view in mapped_windows(path, "fingerprinted"):
        hasher.update(view)
        size += len(view)
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
