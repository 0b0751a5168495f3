"""An S3 object's GET made over a presigned URL on a thread: the cheapest way to receive its bytes.

Through s3fs, the body of a GET passes aiohttp's parser and buffers and the event loop's
wake-ups, 64 KiB at a time: much more of the task's CPU than ``http.client`` spends reading
the same answer straight into reused buffers (figures: ``benchmarks/NOTES.md``).
Credentials, endpoint, region and signing stay s3fs's and Airflow's: the URL is signed by the
filesystem's own client (``generate_presigned_url``), so every way an Airflow ``aws`` connection
authenticates works unchanged, and only the transfer of the body is ours.

The checksum that botocore checks on a GET is checked here too: a HEAD through the same client
(``ChecksumMode=ENABLED``), sent once the GET is on its way and answered while the storage
prepares the GET's answer, gives the stored object's checksum and ETag; the checksum is checked
only where the store says it covers the whole object (not a multipart upload's checksum of its
parts: :func:`_checksum_of`). Its answer
is awaited by the first piece, on the thread that receives, so it holds nothing up: the upload
waits for the GET's first bytes anyway. The body is summed as it arrives and compared at its
end, and a mismatch fails the read there, before an upload's form is complete (it stops short:
nothing is imported). An ETag that differs between the HEAD and the GET means the object was
replaced while it was read; a HEAD that fails leaves the bytes unchecked: both fail the read
before its first byte reaches the reader (a task's retry reads the object again).

Used only where it reproduces what s3fs would send exactly; anything it does not (a proxy,
a custom signer, server-side encryption keys, requester pays, versioned reads, TLS without
verification or with a client certificate), and any answer but ``200`` before the first byte,
falls back to the standard streamed GET (:class:`.storage.ObjectStream`). The signed URL is a
credential for its few minutes: it is never logged or put in a message.
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import hashlib
import http.client
import logging
import os
import socket
import ssl
import urllib.parse
import urllib.request
from typing import Any

try:  # zlib-ng's CRC-32 folds with carry-less multiplies, faster than zlib's (benchmarks/NOTES.md)
    from zlib_ng.zlib_ng import crc32
except ImportError:  # the s3 extra brings it; a plain s3fs install still works, on zlib's
    from zlib import crc32

from airflow_tables.sources.errors import SourceError
from airflow_tables.sources.read_ahead import ThreadedReadAhead

log = logging.getLogger(__name__)

#: Bytes received into each reused buffer: 1, 2 and 4 MiB take the same time, and 4 MiB the least
#: CPU on a large object: fewer, larger hand-overs between the two threads (benchmarks/NOTES.md).
PIECE = 4 * 1024 * 1024
#: Bytes received ahead of the reader, at most (four buffers): the task's memory grows by this.
READ_AHEAD = 16 * 1024 * 1024
#: How long the signed URL is valid: it only has to start the GET (S3 checks it once, at the start).
URL_SECONDS = 300
#: The options of an ``s3fs`` filesystem this path cannot reproduce; with any of them set, s3fs reads.
_CONFIG_KEPT_BY_S3FS = ("proxies", "proxies_config", "signature_version", "client_cert")


class ChecksumMismatchError(SourceError):
    """The bytes received are not the bytes stored: the storage's checksum of the object differs."""


class PresignedGet(ThreadedReadAhead):
    """The body of one GET, read on a thread into reused buffers, at most ``read_ahead`` bytes ahead."""

    def __init__(
        self,
        connection: http.client.HTTPConnection,
        response: http.client.HTTPResponse,
        label: str,
        head: concurrent.futures.Future,
        timeout: float,
        read_ahead: int,
        piece: int,
    ) -> None:
        super().__init__(label, read_ahead, piece)
        self._connection = connection
        self._response = response
        self._head_answer = head
        self._timeout = timeout
        self._checksum: _Checksum | None = None
        self._checked_head = False

    def _read_into(self, buffer: memoryview) -> int:
        return self._response.readinto(buffer)

    def _received(self, piece: memoryview) -> None:
        if not self._checked_head:  # the first piece: the HEAD has answered by now, or soon will
            self._checksum = self._stored_checksum()
            self._checked_head = True
        if self._checksum is not None:
            self._checksum.update(piece)

    def _stored_checksum(self) -> _Checksum | None:
        """The stored object's checksum from the HEAD, once its ETag is the GET's; else the read fails."""
        try:
            stored = self._head_answer.result(timeout=self._timeout)
        except Exception as err:  # the storage library's own error, said as s3fs's path says it
            detail = f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
            raise SourceError(
                self.label, f"the storage did not give its checksum to check the bytes against ({detail})"
            ) from None
        got, listed = self._response.getheader("ETag"), stored.get("ETag")
        if got and listed and got != listed:  # a store that leaves one out is compared by its checksum alone
            raise SourceError(self.label, "it was replaced in the storage while it was being read")
        return _checksum_of(stored)

    def _at_end(self) -> None:
        if self._response.length:  # http.client's readinto() ends quietly where the answer was cut
            raise SourceError(
                self.label, f"the storage's answer ended {self._response.length:,} bytes before the object's end"
            )
        if not self._checked_head:  # an empty object: no piece came
            self._checksum = self._stored_checksum()
        if self._checksum is not None:
            self._checksum.check(self.label)

    def _interrupt(self) -> None:
        sock = self._connection.sock
        if sock is not None:  # wakes a receive blocked on the socket: a read cut short stops the GET
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _close_source(self) -> None:
        self._connection.close()  # a HEAD still out finishes on the storage's loop (cancelled, aiohttp warns)


class _Checksum:
    """The stored object's full-object checksum, and the running one of the bytes received."""

    def __init__(self, name: str, expected: str) -> None:
        self.name = name
        self.expected = expected
        self._crc = 0
        self._hash = hashlib.new(name) if name in ("sha1", "sha256") else None

    def update(self, data: memoryview) -> None:
        if self._hash is not None:
            self._hash.update(data)
        else:
            self._crc = crc32(data, self._crc)  # releases the GIL: the reader sends meanwhile

    def check(self, label: str) -> None:
        digest = self._hash.digest() if self._hash is not None else self._crc.to_bytes(4, "big")
        got = base64.b64encode(digest).decode()
        if got != self.expected:
            raise ChecksumMismatchError(
                label,
                f"its bytes arrived changed in transit (the storage's {self.name.upper()} is {self.expected}, "
                f"the bytes received give {got})",
            )


#: The checksums the standard library computes, as S3's HEAD names them; others (CRC32C, CRC64NVME)
#: need awscrt, which botocore too needs to check them; without it botocore does not check them either.
_CHECKSUMS = {"ChecksumCRC32": "crc32", "ChecksumSHA1": "sha1", "ChecksumSHA256": "sha256"}


def _checksum_of(head: dict[str, Any]) -> _Checksum | None:
    """The checksum to hold the bytes to, only where the store says it is of the whole object.

    A multipart upload's checksum (what boto3's ``upload_file`` makes above 8 MiB) is by default a
    checksum of its parts' checksums: S3 says so with ``ChecksumType: COMPOSITE`` and a ``-N``
    suffix, moto with neither (only its ETag's ``-N`` tells). A checksum is therefore checked when
    ``ChecksumType`` is ``FULL_OBJECT``, or, where the store gives no type, when the ETag shows a
    single-part object; a checksum of an uncertain kind is left unchecked (TLS and the length
    still hold the transfer), never taken for a mismatch that would fail a good read.
    """
    kind = head.get("ChecksumType")
    if kind is None and not _single_part(head):
        return None
    if kind is not None and kind != "FULL_OBJECT":
        return None  # a composite checksum (a multipart upload's) is of the parts, not of the bytes
    for field, name in _CHECKSUMS.items():
        value = head.get(field)
        if value and "-" not in value:  # "...-3": composite, whatever the type said
            return _Checksum(name, value)
    return None


def _single_part(head: dict[str, Any]) -> bool:
    """Whether the HEAD shows an object stored in one part: an ETag without a multipart ``-N`` suffix."""
    etag = str(head.get("ETag") or "").strip('"')
    if not etag or int(head.get("PartsCount") or 1) > 1:
        return False
    return "-" not in etag


def presigned_stream(
    fs: Any, key: str, label: str, read_ahead: int = READ_AHEAD, piece: int = PIECE
) -> PresignedGet | None:
    """The object's GET over a presigned URL, its answer's headers read; None where s3fs must read it.

    None (and a debug line saying why) for a filesystem this path does not reproduce, or an
    answer other than ``200``; the caller then makes the standard GET, which reports any real
    problem the way s3fs does.
    """
    why = _not_reproduced(fs)
    if why:
        log.debug("Reading %s through s3fs: %s", label, why)
        return None
    import asyncio

    from fsspec.asyn import sync

    bucket, object_key, _ = fs.split_path(key)
    connection = None
    try:
        url = sync(
            fs.loop, fs.s3.generate_presigned_url, "get_object", Params={"Bucket": bucket, "Key": object_key},
            ExpiresIn=URL_SECONDS,
        )  # fmt: skip
        connection = _connect(fs, url)
        parts = urllib.parse.urlsplit(url)
        connection.request("GET", f"{parts.path}?{parts.query}", headers={"Accept-Encoding": "identity"})
        head = asyncio.run_coroutine_threadsafe(
            fs.s3.head_object(Bucket=bucket, Key=object_key, ChecksumMode="ENABLED"), fs.loop
        )  # sent after the GET, so that preparing it does not hold the GET up
        response = connection.getresponse()
        if response.status != 200:
            log.info("Reading %s through s3fs: the GET answered %s over a signed URL", label, response.status)
            connection.close()
            return None
    except Exception as err:  # anything before the first byte: the standard GET says what is wrong
        log.debug("Reading %s through s3fs: %s", label, type(err).__name__)
        if connection is not None:
            connection.close()
        return None
    return PresignedGet(connection, response, label, head, _timeout(fs), read_ahead, piece)


def _not_reproduced(fs: Any) -> str | None:
    """Why a request this path would make could differ from the one s3fs makes; None when it cannot."""
    try:
        from s3fs import S3FileSystem
    except ImportError:
        return "not an S3 filesystem"
    if not isinstance(fs, S3FileSystem):
        return "not an S3 filesystem"
    if fs.version_aware or fs.req_kw or fs.s3_additional_kwargs:
        return "versioned reads, requester pays or extra request arguments"
    if any(fs.config_kwargs.get(name) for name in _CONFIG_KEPT_BY_S3FS):
        return "a proxy, a signer or a client certificate is configured"
    if fs.client_kwargs.get("verify") is False:
        return "TLS verification is turned off"
    endpoint = fs.s3.meta.endpoint_url
    parts = urllib.parse.urlsplit(endpoint)
    if parts.scheme in urllib.request.getproxies() and not urllib.request.proxy_bypass(parts.hostname or ""):
        return "a proxy is set in the environment"
    return None


def _timeout(fs: Any) -> float:
    config = fs.s3.meta.config
    return float(max(config.connect_timeout or 60, config.read_timeout or 60))


def _connect(fs: Any, url: str) -> http.client.HTTPConnection:
    parts = urllib.parse.urlsplit(url)
    timeout = _timeout(fs)
    if parts.scheme == "http":
        return http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=timeout)
    return http.client.HTTPSConnection(parts.hostname or "", parts.port, timeout=timeout, context=_tls(fs))


def _tls(fs: Any) -> ssl.SSLContext:
    """Verification as botocore does it: the client's ``verify`` bundle, ``AWS_CA_BUNDLE``, or certifi's."""
    verify = fs.client_kwargs.get("verify")
    bundle = verify if isinstance(verify, str) else None
    bundle = bundle or os.environ.get("AWS_CA_BUNDLE") or fs.session.get_config_variable("ca_bundle")
    if not bundle:
        from botocore.httpsession import DEFAULT_CA_BUNDLE

        bundle = DEFAULT_CA_BUNDLE
    return ssl.create_default_context(cafile=bundle)
