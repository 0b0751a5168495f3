"""A stream's records scanned on two threads at once: cut at guessed record boundaries, kept only where each guess held.

A file on disk is split in two at a verified boundary and its halves are scanned by two
processes (:func:`.ranges.scan_data`). A stream (an object as it arrives from storage) can
be read only once and only in order, so it is cut as it comes instead: into segments of
about :data:`SEGMENT_BYTES`, each ending at the last line break of what was read, and the
segments are scanned by the native kernel (which releases the GIL) on :data:`THREADS`
threads while the next ones arrive.

A line break may stand inside a quoted field, so a cut is only a guess. The results are
taken in order, and each segment starts where the one before was proven to end, so the
plain records its scan counted are proven too, and so are the column states they fold
(the counts are sums, the states maxima: a scan in one piece finds the same). When its
records end exactly at its last byte, the cut after it was a record boundary. When they
end before (the cut fell inside a quoted field), the next segment was scanned from the
wrong place: its count is dropped, and the record's start is scanned again joined to it.
A record that is not plain, a byte that is not UTF-8, or a record longer than half a
segment sends the rest of the stream, from the last proven boundary, to the serial scan
(:func:`.ranges.scan_stream`), which describes it exactly as it always has. So the answer
never depends on the cuts; only the time does (measured in ``benchmarks/sources.py``:
validating an object). At most :data:`IN_FLIGHT` + 1 buffers of 1.5 segments are held.
"""

from __future__ import annotations

import collections
import io
import os
from typing import TYPE_CHECKING, Any

from airflow_tables.validation import kernels

if TYPE_CHECKING:
    from concurrent.futures import Future

    from airflow_tables.validation.ranges import RangeReader

#: Bytes read into a segment before it is cut at its last line break and handed to a scanner: as
#: fast as larger segments, with less memory held (benchmarks/NOTES.md).
SEGMENT_BYTES = 2 * 1024 * 1024
#: Scanning threads: one per core, up to two (the receiving thread and the storage share the rest).
THREADS = min(2, os.cpu_count() or 1)
#: Segments scanned or waiting to be checked at once, besides the one being read: bounds the memory.
IN_FLIGHT = 3

#: A segment's scan, and its columns' states when they are asked for.
_Scanned = tuple[kernels.BlockScan, "bytearray | None"]
#: A segment, whether it ends the stream, and its scan.
_Pending = tuple[memoryview, bool, "Future[_Scanned]"]


def worth_splitting(kernel: kernels.Kernel, size: int) -> bool:
    """True when a stream of ``size`` bytes is scanned faster in segments on several threads.

    Only the native kernel releases the GIL while it scans; the pure-Python one would take
    turns with itself. Below two segments there is nothing to overlap.
    """
    return THREADS > 1 and kernel.name == "native" and size >= 2 * SEGMENT_BYTES


def scan_segments(f: Any, reader: RangeReader) -> Any | None:
    """Scan ``f`` (a binary stream at ``reader.result.end``, a record boundary) in segments, into ``reader``.

    Returns None when the whole stream was scanned so, else a stream of the bytes from the
    last proven boundary (``reader.result.end``) on, for the serial scan to finish.
    """
    from concurrent.futures import ThreadPoolExecutor, wait  # not at import: the validator starts in milliseconds

    cutter = _Cutter(f)
    pending: collections.deque[_Pending] = collections.deque()
    with ThreadPoolExecutor(THREADS, thread_name_prefix="airflow-tables-scan") as pool:

        def scanning(segment: memoryview, final: bool) -> _Pending:
            states = None if reader.types is None else bytearray(reader.types)
            return segment, final, pool.submit(_scan, reader.kernel, segment, final, states)

        try:
            while True:
                while not cutter.done and len(pending) < IN_FLIGHT:
                    cut = cutter.next_segment()
                    if cut is None:  # no line break early enough: the serial scan reads on from here
                        break
                    pending.append(scanning(*cut))
                if not pending:
                    return None if cutter.done else cutter.remainder([])
                segment, final, future = pending.popleft()
                found, states = future.result()
                if found.stopped or found.utf8_error >= 0:  # only the exact read describes what stands there
                    return cutter.remainder([segment, *(held for held, _, _ in pending)])
                reader.result.records += found.records  # the segment starts on a proven boundary: these are proven
                reader.result.end += found.consumed
                if reader.types is not None and states is not None:
                    reader.types[:] = bytes(map(max, reader.types, states))
                if found.consumed == len(segment):
                    cutter.recycle(segment)
                    continue
                # The cut fell inside a record (a line break in quotes): the record starts the next segment,
                # which was scanned from the wrong place; it is scanned again, from the right one.
                rest = bytes(segment[found.consumed :])
                cutter.recycle(segment)
                if final or len(rest) > SEGMENT_BYTES // 2:
                    return cutter.remainder([rest, *(held for held, _, _ in pending)])
                if not pending:
                    cutter.rest = rest + cutter.rest
                    continue
                following, following_final, wrong = pending.popleft()
                wait([wrong])  # its buffer is read again below, then reused
                joined = memoryview(rest + following)
                cutter.recycle(following)
                pending.appendleft(scanning(joined, following_final))
        finally:
            for _, _, later in pending:
                later.cancel()


def _scan(kernel: kernels.Kernel, segment: memoryview, final: bool, states: bytearray | None) -> _Scanned:
    """One segment's plain records, and its columns' states (folded into ``states``, a copy of the reader's)."""
    return kernel.scan(segment, final, states), states


class _Cutter:
    """Reads a stream into reused buffers and cuts it into segments that end at a line break."""

    def __init__(self, f: Any) -> None:
        self.f = f
        self.rest = b""  # the bytes after the last cut, which start the next segment
        self.done = False  # the stream is read to its end
        self._free: list[bytearray] = []
        self._buffer_bytes = SEGMENT_BYTES + SEGMENT_BYTES // 2  # a segment, after a carried record's start

    def next_segment(self) -> tuple[memoryview, bool] | None:
        """The next segment and whether it ends the stream; None when none can be cut (read on serially)."""
        if len(self.rest) > SEGMENT_BYTES // 2:
            return None
        buffer = self._free.pop() if self._free else bytearray(self._buffer_bytes)
        view = memoryview(buffer)
        filled = len(self.rest)
        view[:filled] = self.rest
        want = filled + SEGMENT_BYTES
        while filled < want:
            got = self.f.readinto(view[filled:want])
            if not got:
                self.done = True
                break
            filled += got
        if self.done:
            self.rest = b""
            return view[:filled], True
        cut = buffer.rfind(b"\n", 0, filled) + 1
        if cut == 0:  # a record longer than the segment so far: the serial scan knows what to do
            self.rest = bytes(view[:filled])
            self._free.append(buffer)
            return None
        self.rest = bytes(view[cut:filled])
        return view[:cut], False

    def recycle(self, segment: memoryview) -> None:
        """Give the buffer under a checked segment back, for a later segment to be read into."""
        buffer = segment.obj
        segment.release()
        if isinstance(buffer, bytearray) and len(buffer) == self._buffer_bytes:  # not a joined segment's bytes
            self._free.append(buffer)

    def remainder(self, held: list[memoryview | bytes]) -> Any:
        """A stream of the held segments' bytes, then the rest read so far, then the stream's unread bytes."""
        return _Chain([bytes(segment) for segment in held] + [self.rest], None if self.done else self.f)


class _Chain(io.RawIOBase):
    """Bytes already read, then a stream's next ones: what the serial scan reads on from."""

    def __init__(self, parts: list[bytes], f: Any | None) -> None:
        super().__init__()
        self.parts = collections.deque(memoryview(part) for part in parts if part)
        self.f = f

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        target = memoryview(buffer).cast("B")
        if self.parts:
            part = self.parts[0]
            n = min(len(target), len(part))
            target[:n] = part[:n]
            if n == len(part):
                self.parts.popleft()
            else:
                self.parts[0] = part[n:]
            return n
        return self.f.readinto(target) if self.f is not None else 0
