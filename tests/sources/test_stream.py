"""An object streamed from a real S3 server: read ahead on the storage's event loop, bounded, and cut off cleanly."""

from __future__ import annotations

import re
import time

import pytest
from tests.sources.conftest import CONN_ID, cut_off_import

from airflow_tables.sources import SourceError, open_source
from airflow_tables.sources.storage import ObjectStream

PIECE = 64 * 1024
DATA = b"".join(b"%08d,north,%08d\n" % (i, i * 7) for i in range(200_000))  # 4.6 MB


def _stream(uri: str, **kwargs) -> ObjectStream:
    from airflow.sdk import ObjectStoragePath

    path = ObjectStoragePath(uri)
    return ObjectStream(path.fs, path.path, uri, **kwargs)


def _until(condition, what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.005)


def test_the_next_pieces_are_read_ahead_while_the_reader_works_and_no_further(s3_server, bucket):
    s3_server.put(bucket, "big.csv", DATA)
    stream = _stream(f"s3://{CONN_ID}@{bucket}/big.csv", read_ahead=512 * 1024, piece=PIECE)
    with stream:
        pieces = stream.pieces()
        received = [bytes(next(pieces))]
        # The reader holds on to its piece: the pump reads on without being asked, until the read-ahead is full.
        _until(lambda: stream.peak_held >= 512 * 1024, "the read-ahead filled")
        _until(lambda: stream._paused, "the pump paused")
        held = stream.peak_held
        time.sleep(0.05)  # nothing more may arrive while it is paused
        assert stream.peak_held == held <= 512 * 1024 + PIECE
        received += [bytes(piece) for piece in pieces]
    assert b"".join(received) == DATA
    assert stream.peak_held <= 512 * 1024 + PIECE
    assert s3_server.reads(bucket, "big.csv") == 1


def test_readinto_fills_the_buffer_from_the_received_pieces(s3_server, bucket):
    s3_server.put(bucket, "big.csv", DATA)
    with open_source(f"s3://{CONN_ID}@{bucket}/big.csv").open() as raw:
        buffer = bytearray(1_000_003)  # not a multiple of any piece
        out = []
        while n := raw.readinto(buffer):
            assert n == len(buffer) or not raw.readinto(bytearray(1)), "a short read before the end"
            out.append(bytes(buffer[:n]))
    assert b"".join(out) == DATA


def test_closing_a_stream_read_in_part_stops_its_get(s3_server, bucket):
    s3_server.put(bucket, "big.csv", DATA)
    stream = _stream(f"s3://{CONN_ID}@{bucket}/big.csv", read_ahead=256 * 1024, piece=PIECE)
    first = next(stream.pieces())
    stream.close()
    assert first and stream.closed
    assert stream._pump_future is None and not stream._queue


@pytest.mark.parametrize("refuse_signed", [False, True], ids=["the signed GET", "s3fs's GET"])
def test_an_object_unreadable_midway_is_cut_off_and_nothing_is_imported(
    s3_server, bucket, through_proxy, hook, emulator, refuse_signed
):
    s3_server.put(bucket, "big.csv", DATA)
    # The connection drops after 1 MiB of an answer; a store that refuses signed URLs is read by s3fs.
    base, proxy = through_proxy(cut_after=1024 * 1024, refuse_signed=refuse_signed)
    source = open_source(f"{base}/big.csv")
    with pytest.raises(SourceError, match="big.csv") as info:
        for _ in source.blocks(PIECE):
            pass
    if not refuse_signed:  # the signed GET says how much was missing; s3fs's says what its client raised
        assert re.search(r"answer ended [\d,]+ bytes before the object's end", str(info.value))
    assert "could not be read to its end" in cut_off_import(hook, emulator, source)
    assert proxy.refused == (2 if refuse_signed else 0)
