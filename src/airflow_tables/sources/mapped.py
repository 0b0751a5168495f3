"""Reading a local file in place: mapped a window at a time, for passes that only look at its bytes.

A pass that reads a file through a buffer copies every byte once more than it needs to;
on a virtual machine that copy can cost more than the pass itself (hashing beside the
validation scan, measured in ``benchmarks/fingerprint.py``; counting the UTF-8 length of a
file in a single-byte code page). The file is mapped :data:`WINDOW` bytes at a
time, so the process's resident size stays bounded whatever the file's size.

A file that changes size between two windows is an :class:`OSError`; one truncated in
place during the instant its window is read would end the process (SIGBUS), as it would
any reader of a mapped file: files are written completely before they are imported (the
upload checks that too).
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")

#: Bytes of the file mapped at a time (a multiple of every platform's mmap granularity).
WINDOW = 16 * 1024 * 1024


def mapped_windows(path: str | os.PathLike[str], purpose: str) -> Iterator[memoryview]:
    """The file's bytes as successive read-only views of at most :data:`WINDOW` bytes.

    Each view is valid until the next one is asked for. ``purpose`` completes the message
    of the :class:`OSError` raised when the file changes size ("... changed size while it
    was <purpose>").
    """
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        for offset in range(0, size, WINDOW):
            if os.fstat(f.fileno()).st_size != size:
                raise OSError(f"{os.fspath(path)} changed size while it was {purpose}")
            length = min(WINDOW, size - offset)
            with mmap.mmap(f.fileno(), length, access=mmap.ACCESS_READ, offset=offset) as window:
                if hasattr(window, "madvise"):
                    window.madvise(mmap.MADV_SEQUENTIAL)
                with memoryview(window) as view:
                    yield view


def each_window(path: str | os.PathLike[str], purpose: str, work: Callable[[memoryview], T], workers: int) -> list[T]:
    """``work`` applied to every window of the file, ``workers`` windows at a time; the results in file order.

    For work that releases the GIL (a C kernel): the windows are counted on that many
    threads, so on two cores a pass over the file takes about half as long. A file that
    changed size during the pass is an :class:`OSError`, as for :func:`mapped_windows`.
    """
    from concurrent.futures import ThreadPoolExecutor

    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size

        def one(offset: int) -> T:
            with mmap.mmap(f.fileno(), min(WINDOW, size - offset), access=mmap.ACCESS_READ, offset=offset) as window:
                if hasattr(window, "madvise"):
                    window.madvise(mmap.MADV_SEQUENTIAL)
                with memoryview(window) as view:
                    return work(view)

        with ThreadPoolExecutor(max(1, workers)) as pool:
            results = list(pool.map(one, range(0, size, WINDOW)))
        if os.fstat(f.fileno()).st_size != size:
            raise OSError(f"{os.fspath(path)} changed size while it was {purpose}")
    return results
