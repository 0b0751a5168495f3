"""A file read on a thread ahead of its upload: bounded, in order, stopped when the reader stops, errors passed on."""

from __future__ import annotations

import io
import threading
import time

import pytest

from airflow_tables.sources import open_source
from airflow_tables.sources.read_ahead import FileReadAhead

PIECE = 64 * 1024
DATA = b"".join(b"%08d,south,%08d\n" % (i, i * 3) for i in range(200_000))  # 4.6 MB


def _until(condition, what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.005)


def test_a_file_is_read_a_few_blocks_ahead_and_no_further(tmp_path):
    path = tmp_path / "orders.csv"
    path.write_bytes(DATA)
    with open(path, "rb", buffering=0) as raw, FileReadAhead(raw, "orders.csv", 4 * PIECE, PIECE) as ahead:
        pieces = ahead.pieces()
        received = [bytes(next(pieces))]  # the reader holds this piece: three more buffers can be filled
        _until(lambda: ahead.peak_held >= 3 * PIECE, "three blocks were read ahead")
        received += [bytes(piece) for piece in pieces]
    assert b"".join(received) == DATA
    assert ahead._buffers == 4 and ahead.peak_held <= 4 * PIECE  # 71 blocks through four reused buffers


def test_an_upload_stopped_early_stops_the_reading_thread_and_closes_the_file(tmp_path):
    path = tmp_path / "orders.csv"
    path.write_bytes(DATA)
    before = {t.ident for t in threading.enumerate()}
    blocks = open_source(str(path)).blocks(PIECE)
    assert bytes(next(blocks)) == DATA[:PIECE]
    readers = [t for t in threading.enumerate() if t.ident not in before and t.name.startswith("read ")]
    assert len(readers) == 1 and readers[0].name == f"read {path}"
    blocks.close()  # what the upload does when the service stops reading
    assert not readers[0].is_alive()


class _FailingReader(io.RawIOBase):
    """A reader whose storage fails after ``good`` bytes."""

    def __init__(self, data: bytes, good: int) -> None:
        self.data = data
        self.good = good
        self.at = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.at >= self.good:
            raise OSError("the disk went away")
        n = min(len(buffer), self.good - self.at)
        buffer[:n] = self.data[self.at : self.at + n]
        self.at += n
        return n


def test_a_read_error_reaches_the_reader_after_the_blocks_read_before_it():
    received: list[bytes] = []

    def send_all(ahead: FileReadAhead) -> None:
        received.extend(bytes(piece) for piece in ahead.pieces())

    ahead = FileReadAhead(_FailingReader(DATA, 3 * PIECE + 10), "orders.csv", 4 * PIECE, PIECE)
    with ahead, pytest.raises(OSError, match="the disk went away"):
        send_all(ahead)
    assert b"".join(received) == DATA[: 3 * PIECE + 10]


@pytest.mark.parametrize("encoding", ["cp1252", "utf-16", "shift_jis"])
def test_a_declared_encoding_is_converted_from_the_pieces_read_ahead(tmp_path, encoding):
    text = "id,name\n1,Zoë\n2,Ærø\n" * 300 if encoding == "cp1252" else "列1,列2\n値,価格\n" * 300
    path = tmp_path / "orders.csv"
    path.write_bytes(text.encode(encoding))
    # Seven-byte blocks: characters (and utf-16's byte-order mark) are split between pieces everywhere.
    sent = b"".join(bytes(block) for block in open_source(str(path), encoding=encoding).blocks(7))
    assert sent == text.encode()
