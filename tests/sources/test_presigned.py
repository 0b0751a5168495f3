"""An S3 object's GET over a URL signed by s3fs's own client, read on a thread (real S3 server, real proxies).

The path is taken only where it sends what s3fs would; anything else, and any refusal before
the first byte, is read by s3fs's own streamed GET. The stored checksum is checked, a read cut
short stops its GET, and the signed URL (a credential for its few minutes) is never logged.
"""

from __future__ import annotations

import logging
import time

import pytest
from tests.sources.conftest import CONN_ID, cut_off_import, received_bytes

from airflow_tables.sources import open_source
from airflow_tables.sources.presigned import PresignedGet, presigned_stream
from airflow_tables.sources.storage import ObjectStream, SourceError

DATA = b"".join(b"%08d,north,%08d\n" % (i, i * 7) for i in range(200_000))  # 4.6 MB
PIECE = 64 * 1024


def _fs_and_key(uri: str):
    from airflow.sdk import ObjectStoragePath

    path = ObjectStoragePath(uri)
    return path.fs, path.path


def _until(condition, what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.005)


def test_an_s3_object_is_read_over_one_signed_get_with_its_checksum_checked(s3_server, bucket, hook, emulator):
    s3_server.put(bucket, "orders.csv", DATA)  # boto3 stores a CRC32 with it, as S3 does by default
    source = open_source(f"s3://{CONN_ID}@{bucket}/orders.csv")
    with source.open_stored() as raw:
        assert isinstance(raw, PresignedGet)
        assert raw.read() == DATA
        assert raw._checksum is not None and raw._checksum.name == "crc32"
    card_id = hook.import_csv(None, source)
    assert received_bytes(emulator, card_id) == DATA
    assert s3_server.reads(bucket, "orders.csv") == 2  # the read above and the upload's


def test_the_read_ahead_is_bounded_and_its_buffers_are_reused(s3_server, bucket):
    s3_server.put(bucket, "big.csv", DATA)
    fs, key = _fs_and_key(f"s3://{CONN_ID}@{bucket}/big.csv")
    stream = presigned_stream(fs, key, "big.csv", read_ahead=256 * 1024, piece=PIECE)
    assert stream is not None
    with stream:
        pieces = stream.pieces()
        received = [bytes(next(pieces))]
        # The reader holds its piece: the thread receives on, unasked, until the read-ahead is full.
        _until(lambda: stream.peak_held >= 256 * 1024 - PIECE, "the read-ahead filled")
        held = stream.peak_held
        time.sleep(0.05)  # nothing more may arrive while every buffer is taken
        assert stream.peak_held == held <= 256 * 1024
        received += [bytes(piece) for piece in pieces]
    assert b"".join(received) == DATA
    assert stream._buffers == 256 * 1024 // PIECE  # 71 pieces through four buffers


def test_closing_a_read_cut_short_stops_its_get(s3_server, bucket):
    s3_server.put(bucket, "big.csv", DATA)
    fs, key = _fs_and_key(f"s3://{CONN_ID}@{bucket}/big.csv")
    stream = presigned_stream(fs, key, "big.csv", read_ahead=256 * 1024, piece=PIECE)
    assert stream is not None
    first = next(stream.pieces())
    stream.close()
    assert first and stream.closed
    assert stream._thread is not None and not stream._thread.is_alive()
    assert stream._connection.sock is None  # closed, not left to the garbage collector


def test_bytes_changed_in_transit_fail_the_read_and_nothing_is_imported(
    s3_server, bucket, through_proxy, hook, emulator
):
    s3_server.put(bucket, "big.csv", DATA)
    base, _ = through_proxy(flip_at=2 * 1024 * 1024)  # inside the body of a GET; a HEAD's answer is far shorter
    source = open_source(f"{base}/big.csv")
    with pytest.raises(SourceError, match=r"big\.csv: its bytes arrived changed in transit \(the storage's CRC32"):
        for _ in source.blocks(PIECE):
            pass
    message = cut_off_import(hook, emulator, source)
    assert "could not be read to its end" in message and "arrived changed in transit" in message


def _with_head_answer(stream: PresignedGet, answer) -> PresignedGet:
    """The stream with its HEAD's answer replaced: the object replaced, or the HEAD failed, in the
    milliseconds between the GET and the HEAD sent after it (no real server does that on demand)."""
    import concurrent.futures

    head = concurrent.futures.Future()
    if isinstance(answer, BaseException):
        head.set_exception(answer)
    else:
        head.set_result(answer)
    stream._head_answer = head
    return stream


def test_an_object_replaced_between_its_get_and_its_head_fails_before_its_first_byte(s3_server, bucket):
    s3_server.put(bucket, "orders.csv", DATA)
    fs, key = _fs_and_key(f"s3://{CONN_ID}@{bucket}/orders.csv")
    stream = presigned_stream(fs, key, "orders.csv")
    assert stream is not None
    real = stream._head_answer.result(timeout=30)
    replaced = {**real, "ETag": '"0123456789abcdef0123456789abcdef"'}
    with _with_head_answer(stream, replaced), pytest.raises(SourceError, match="orders.csv: it was replaced") as err:
        stream.read(1)  # no byte reaches the reader: the first piece is held for the HEAD
    assert "while it was being read" in str(err.value)


def test_a_store_that_leaves_out_an_etag_is_checked_only_where_it_types_its_checksum(s3_server, bucket):
    s3_server.put(bucket, "orders.csv", DATA)
    fs, key = _fs_and_key(f"s3://{CONN_ID}@{bucket}/orders.csv")
    real = {k: v for k, v in _head(s3_server, bucket, "orders.csv").items() if k != "ETag"}
    stream = presigned_stream(fs, key, "orders.csv")
    assert stream is not None
    with _with_head_answer(stream, {**real, "ChecksumType": "FULL_OBJECT"}):
        assert stream.read() == DATA
        assert stream._checksum is not None and stream._checksum.name == "crc32"
    stream = presigned_stream(fs, key, "orders.csv")
    assert stream is not None
    with _with_head_answer(stream, real):  # no ETag, no type: a checksum of an uncertain kind
        assert stream.read() == DATA
        assert stream._checksum is None


def _head(s3_server, bucket: str, key: str) -> dict:
    answer = s3_server.client().head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    return {k: v for k, v in answer.items() if k != "ResponseMetadata"}


def _multipart_upload(s3_server, bucket: str, key: str, data: bytes, tmp_path, **extra) -> None:
    path = tmp_path / "upload.csv"
    path.write_bytes(data)
    s3_server.upload(bucket, key, path, **extra)


MULTIPART_DATA = DATA * 4  # 18.4 MB: three parts of 8 MiB


@pytest.mark.parametrize("algorithm", ["CRC32", "SHA256"])
def test_an_object_uploaded_in_parts_is_imported_whole(s3_server, bucket, hook, emulator, tmp_path, algorithm):
    """boto3's multipart upload stores a checksum of the parts' checksums (moto: with neither a type nor a
    ``-N`` suffix, only the ETag's ``-3``): it is not the body's, so it is not held against the body."""
    _multipart_upload(s3_server, bucket, "orders.csv", MULTIPART_DATA, tmp_path, ChecksumAlgorithm=algorithm)
    head = _head(s3_server, bucket, "orders.csv")
    assert head["ETag"].strip('"').endswith("-3")
    source = open_source(f"s3://{CONN_ID}@{bucket}/orders.csv")
    with source.open_stored() as raw:
        assert isinstance(raw, PresignedGet)
        assert raw.read() == MULTIPART_DATA
        assert raw._checksum is None
    card_id = hook.import_csv(None, source)
    assert received_bytes(emulator, card_id) == MULTIPART_DATA


def test_a_composite_checksum_is_not_checked_and_a_full_object_one_is(s3_server, bucket, tmp_path):
    import base64
    import zlib

    _multipart_upload(s3_server, bucket, "orders.csv", MULTIPART_DATA, tmp_path)
    fs, key = _fs_and_key(f"s3://{CONN_ID}@{bucket}/orders.csv")
    real = _head(s3_server, bucket, "orders.csv")
    composite = {**real, "ChecksumCRC32": "nhkSSQ==-3", "ChecksumType": "COMPOSITE"}  # as S3 says it
    stream = presigned_stream(fs, key, "orders.csv")
    assert stream is not None
    with _with_head_answer(stream, composite):
        assert stream.read() == MULTIPART_DATA
        assert stream._checksum is None
    whole = base64.b64encode(zlib.crc32(MULTIPART_DATA).to_bytes(4, "big")).decode()
    stream = presigned_stream(fs, key, "orders.csv")
    assert stream is not None
    with _with_head_answer(stream, {**real, "ChecksumCRC32": whole, "ChecksumType": "FULL_OBJECT"}):
        assert stream.read() == MULTIPART_DATA  # a multipart upload made with a full-object CRC32
        assert stream._checksum is not None and stream._checksum.expected == whole
    stream = presigned_stream(fs, key, "orders.csv")
    assert stream is not None
    wrong = {**real, "ChecksumCRC32": "nhkSSQ==", "ChecksumType": "FULL_OBJECT"}
    with _with_head_answer(stream, wrong), pytest.raises(SourceError, match="arrived changed in transit"):
        stream.read()


def test_a_head_that_fails_fails_the_read_rather_than_leave_it_unchecked(s3_server, bucket):
    s3_server.put(bucket, "orders.csv", DATA)
    fs, key = _fs_and_key(f"s3://{CONN_ID}@{bucket}/orders.csv")
    stream = presigned_stream(fs, key, "orders.csv")
    assert stream is not None
    with _with_head_answer(stream, PermissionError("HeadObject: Forbidden")), pytest.raises(SourceError) as err:
        stream.read()
    assert "did not give its checksum to check the bytes against (PermissionError: HeadObject: Forbidden)" in str(
        err.value
    )


def test_the_checksum_is_asked_after_the_get_is_sent(s3_server, bucket, monkeypatch):
    """The HEAD goes out after the GET, so that preparing it does not delay the GET's first byte.

    The order is taken where the client sends them (two connections reach the server on two
    threads, which may take them in either order).
    """
    import http.client

    s3_server.put(bucket, "orders.csv", DATA)
    fs, key = _fs_and_key(f"s3://{CONN_ID}@{bucket}/orders.csv")
    sent: list[str] = []
    send_request, head_object = http.client.HTTPConnection.request, fs.s3.head_object

    def request(self, method, url, *args, **kwargs):
        sent.append(method)
        return send_request(self, method, url, *args, **kwargs)

    async def head(**kwargs):
        sent.append("HEAD")
        return await head_object(**kwargs)

    monkeypatch.setattr(http.client.HTTPConnection, "request", request)
    monkeypatch.setattr(fs.s3, "head_object", head)
    stream = presigned_stream(fs, key, "orders.csv")
    assert stream is not None
    with stream:
        assert stream.read() == DATA
        assert stream._checksum is not None  # the HEAD's answer was used
    assert sent == ["GET", "HEAD"]


def test_a_storage_that_refuses_signed_urls_is_read_by_s3fs(s3_server, bucket, through_proxy, hook, emulator, caplog):
    s3_server.put(bucket, "orders.csv", DATA)
    base, proxy = through_proxy(refuse_signed=True)
    caplog.set_level(logging.DEBUG, logger="airflow_tables.sources.presigned")
    source = open_source(f"{base}/orders.csv")
    with source.open_stored() as raw:
        assert isinstance(raw, ObjectStream)
    card_id = hook.import_csv(None, source)
    assert received_bytes(emulator, card_id) == DATA and proxy.refused == 2
    assert "orders.csv through s3fs: the GET answered 403 over a signed URL" in caplog.text
    assert "Signature" not in caplog.text and "testing-access-key" not in caplog.text


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"requester_pays": True}, "versioned reads, requester pays or extra request arguments"),
        ({"version_aware": True}, "versioned reads, requester pays or extra request arguments"),
        ({"s3_additional_kwargs": {"SSECustomerAlgorithm": "AES256"}}, "versioned reads, requester pays"),
        ({"config_kwargs": {"proxies": {"http": "http://127.0.0.1:9"}}}, "a proxy, a signer or a client certificate"),
        ({"client_kwargs": {"verify": False}}, "TLS verification is turned off"),
    ],
    ids=["requester pays", "versioned", "encryption keys", "a proxy", "no TLS verification"],
)
def test_what_a_signed_url_would_not_send_is_left_to_s3fs(s3_server, bucket, caplog, options, why):
    import s3fs
    from tests._s3 import ACCESS_KEY, REGION, SECRET_KEY

    s3_server.put(bucket, "orders.csv", DATA)
    client_kwargs = {"region_name": REGION, **options.pop("client_kwargs", {})}
    fs = s3fs.S3FileSystem(
        key=ACCESS_KEY, secret=SECRET_KEY, endpoint_url=s3_server.endpoint_url, client_kwargs=client_kwargs,
        skip_instance_cache=True, **options,
    )  # fmt: skip
    caplog.set_level(logging.DEBUG, logger="airflow_tables.sources.presigned")
    assert presigned_stream(fs, f"{bucket}/orders.csv", "orders.csv") is None
    assert why in caplog.text


def test_a_proxy_in_the_environment_is_left_to_s3fs(s3_server, bucket, monkeypatch, caplog):
    s3_server.put(bucket, "orders.csv", DATA)
    fs, key = _fs_and_key(f"s3://{CONN_ID}@{bucket}/orders.csv")
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    caplog.set_level(logging.DEBUG, logger="airflow_tables.sources.presigned")
    assert presigned_stream(fs, key, "orders.csv") is None
    assert "a proxy is set in the environment" in caplog.text
