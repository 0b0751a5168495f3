"""The hand-over between a download that runs ahead and the reader that sends or scans its bytes.

An object read from storage crosses two networks at once: its GET, and the upload (or the
scan) of what arrived. A producer (a task on the storage's event loop, or a thread reading a
socket) puts the pieces it received here as they arrive, at most ``read_ahead`` bytes ahead of
the reader; the reader takes them, without a copy (:meth:`ReadAhead.pieces`, for the upload) or
copied once into its own buffer (:meth:`ReadAhead.readinto`, for the scan). A piece taken stays
the reader's until it asks for the next one; then it is given back to its producer, which may
fill it again. So neither side waits for the other unless it is the faster one.
"""

from __future__ import annotations

import collections
import io
import threading
from collections.abc import Iterator
from typing import Any

from airflow_tables.sources.errors import SourceError


class ReadAhead(io.RawIOBase):
    """A bounded queue of received pieces between one producer and one reader; subclasses produce.

    A subclass starts its producer in :meth:`_start` (called at the first read, so a stream
    that is opened and never read costs no request), calls :meth:`_put` for every piece and
    :meth:`_finish` once at the end or on a failure, and may override :meth:`_taken` (room was
    made) and :meth:`_release` (a piece the reader is done with, to reuse its buffer).
    """

    def __init__(self, label: str, read_ahead: int, piece: int) -> None:
        super().__init__()
        self.label = label
        self.read_ahead = read_ahead
        self.piece = piece
        #: The most bytes ever queued at once (at most ``read_ahead`` plus one piece).
        self.peak_held = 0
        self._ready = threading.Condition()
        self._queue: collections.deque[memoryview] = collections.deque()
        self._held = 0
        self._head = memoryview(b"")  # the rest of the piece being copied out by readinto()
        self._lent: memoryview | None = None  # the piece the reader holds, given back at its next take
        self._ended = False
        self._error: BaseException | None = None
        self._started = False

    # -- the producer's side --------------------------------------------------------------------

    def _start(self) -> None:
        raise NotImplementedError

    def _put(self, piece: memoryview) -> None:
        """Queue a received piece for the reader (any thread)."""
        with self._ready:
            self._queue.append(piece)
            self._held += len(piece)
            self.peak_held = max(self.peak_held, self._held)
            self._ready.notify_all()

    def _finish(self, error: BaseException | None = None) -> None:
        """The object's end, or the failure that stopped the download (any thread)."""
        with self._ready:
            if error is None:
                self._ended = True
            else:
                self._error = error
            self._ready.notify_all()

    def _taken(self) -> None:
        """A piece left the queue (called holding the lock): a paused producer may go on."""

    def _release(self, piece: memoryview) -> None:
        """The reader is done with ``piece`` (called without the lock)."""

    def _failure(self, err: BaseException) -> OSError:
        if isinstance(err, OSError):
            return err
        # the storage library's own error types: an OSError, saying which
        return SourceError(self.label, f"reading failed ({type(err).__name__}: {err})")

    # -- the reader's side ----------------------------------------------------------------------

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        """Fill ``buffer`` (to its end, or to the object's), copying from the received pieces."""
        target = memoryview(buffer).cast("B")
        filled = 0
        while filled < len(target):
            if not self._head:
                piece = self._take()
                if piece is None:
                    break
                self._head = piece
            n = min(len(self._head), len(target) - filled)
            target[filled : filled + n] = self._head[:n]
            self._head = self._head[n:]
            filled += n
        return filled

    def pieces(self) -> Iterator[memoryview]:
        """The rest of the object as the pieces received, each valid until the next is asked for."""
        if self._head:
            head, self._head = self._head, memoryview(b"")
            yield head
        while (piece := self._take()) is not None:
            yield piece

    def _take(self) -> memoryview | None:
        """The next received piece, waiting for it; None at the end of the object."""
        if not self._started:
            self._started = True
            self._start()
        self._give_back()
        with self._ready:
            while not self._queue and not self._ended and self._error is None:
                self._ready.wait()
            if self._queue:
                piece = self._queue.popleft()
                self._held -= len(piece)
                self._taken()
                self._lent = piece
                return piece
            if self._error is not None:
                raise self._failure(self._error)
            return None

    def _give_back(self) -> None:
        lent, self._lent = self._lent, None
        if lent is not None:
            self._release(lent)

    def close(self) -> None:
        if not self.closed:
            with self._ready:
                self._queue.clear()
                self._held = 0
            self._head = memoryview(b"")
            self._lent = None
        super().close()


#: The first read stops after this many bytes: the reader (an upload) starts on them while the
#: rest of a full piece arrives, instead of waiting for all of it (benchmarks/NOTES.md).
FIRST_PIECE = 256 * 1024


class ThreadedReadAhead(ReadAhead):
    """A producer thread that reads into a pool of reused buffers, ``read_ahead // piece`` of them.

    A buffer goes back to the pool when the reader is done with its piece, so the whole read
    costs that many allocations (and their page faults) whatever the size. The first piece is
    at most :data:`FIRST_PIECE` bytes, so the reader starts as soon as the first bytes arrive.
    A subclass says how to read (:meth:`_read_into`) and may check each piece (:meth:`_received`)
    and the end (:meth:`_at_end`), wake a read blocked when the reader closes early
    (:meth:`_interrupt`) and release what it read from (:meth:`_close_source`, once, on the
    producer's thread or at close when it never started).
    """

    def __init__(self, label: str, read_ahead: int, piece: int) -> None:
        super().__init__(label, read_ahead, piece)
        self._free: list[bytearray] = []
        self._buffers = 0
        self._stopping = False
        self._thread: threading.Thread | None = None

    def _read_into(self, buffer: memoryview) -> int:
        raise NotImplementedError

    def _received(self, piece: memoryview) -> None:
        """A piece was read, before the reader can see it."""

    def _at_end(self) -> None:
        """The read came to its end; raise to fail it instead."""

    def _interrupt(self) -> None:
        """The reader closed the stream: wake a read that may be blocked."""

    def _close_source(self) -> None:
        """Release what the pieces are read from."""

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._produce, name=f"read {self.label}", daemon=True)
        self._thread.start()

    def _release(self, piece: memoryview) -> None:
        buffer = piece.obj
        piece.release()
        with self._ready:
            self._free.append(buffer)  # type: ignore[arg-type]  # every piece is a view of one of ours
            self._ready.notify_all()

    def _buffer(self) -> bytearray | None:
        """A buffer to read into: a given-back one, a new one while under the read-ahead, or None when closing."""
        with self._ready:
            while not self._free and self._buffers * self.piece >= self.read_ahead and not self._stopping:
                self._ready.wait()
            if self._stopping:
                return None
            if self._free:
                return self._free.pop()
            self._buffers += 1
        return bytearray(self.piece)

    def _produce(self) -> None:
        first = True
        try:
            while (buffer := self._buffer()) is not None:
                n = self._read_into(memoryview(buffer)[: FIRST_PIECE if first else None])
                first = False
                if not n:
                    self._at_end()
                    self._finish()
                    return
                piece = memoryview(buffer)[:n]
                self._received(piece)
                self._put(piece)
        except BaseException as err:  # handed to the reader, which raises it naming the source
            self._finish(err)
        finally:
            self._close_source()

    def close(self) -> None:
        if not self.closed:
            with self._ready:
                self._stopping = True
                self._ready.notify_all()
            self._interrupt()
            if self._thread is not None:
                self._thread.join(timeout=30)
            else:
                self._close_source()
        super().close()


class FileReadAhead(ThreadedReadAhead):
    """A file (or any raw reader) read on a thread while the reader sends what was read before.

    Reading a local file copies it from the page cache; sending copies it into the socket. On
    one thread the two take turns; here they overlap, each on a core of its own. The reader
    that was given stays the caller's to close, after this stream.
    """

    def __init__(self, raw: Any, label: str, read_ahead: int, piece: int) -> None:
        super().__init__(label, read_ahead, piece)
        self._raw = raw

    def _read_into(self, buffer: memoryview) -> int:
        return int(self._raw.readinto(buffer) or 0)
