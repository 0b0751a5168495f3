"""A real S3-compatible server for tests and benchmarks: moto's, on 127.0.0.1, in a process of its own.

Reached the way Airflow users reach S3: an ordinary ``aws`` connection whose extra names
the endpoint (``endpoint_url``), through ``airflow.sdk.ObjectStoragePath`` and s3fs. Any
test directory (and the benchmarks) can use it::

    from tests._s3 import S3Server

    with S3Server() as s3:
        s3.create_bucket("landing")
        s3.put("landing", "orders.csv", b"a,b\\n1,2\\n")
        monkeypatch.setenv(*s3.connection_env("aws_test"))   # then s3://aws_test@landing/orders.csv

The server keeps objects in memory and answers any key pair (moto checks no signatures
by default). It also counts the requests it answers (:meth:`S3Server.requests`), so a test
can tell how many times an object was read. ``python tests/_s3.py PORT_FILE`` is the server
process itself: it writes its port to PORT_FILE once it serves, and stops when its parent does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ACCESS_KEY = "testing-access-key"
SECRET_KEY = "testing-secret-key"  # noqa: S105 - moto's server accepts any key; nothing real
REGION = "us-east-1"
POLL = 0.02


class S3Server:
    """One moto S3 server process on a free port of 127.0.0.1."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None
        self.endpoint_url = ""
        self._dir: str | None = None

    def start(self, timeout: float = 60) -> S3Server:
        self._dir = tempfile.mkdtemp(prefix="s3-server-")
        port_file = Path(self._dir) / "port"
        log = open(Path(self._dir) / "server.log", "wb")  # noqa: SIM115 - the child keeps writing to it
        self.process = subprocess.Popen(
            [sys.executable, __file__, str(port_file)], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        log.close()
        deadline = time.monotonic() + timeout
        while not (port_file.exists() and port_file.read_text()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the S3 server did not start:\n{self.log_tail()}")
            time.sleep(POLL)
        self.endpoint_url = f"http://127.0.0.1:{port_file.read_text()}"
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = (Path(self._dir or "") / "server.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- as Airflow users see it ----------------------------------------------------------

    def connection(self) -> dict[str, Any]:
        """An ``aws`` connection to this server, in Airflow's JSON form."""
        return {
            "conn_type": "aws",
            "login": ACCESS_KEY,
            "password": SECRET_KEY,
            "extra": {"endpoint_url": self.endpoint_url, "region_name": REGION},
        }

    def connection_env(self, conn_id: str) -> tuple[str, str]:
        """``(AIRFLOW_CONN_<ID>, json)``: set it, and ``s3://<conn_id>@bucket/key`` reaches this server."""
        return f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(self.connection())

    # -- direct access (arranging and checking, not through the code under test) -----------

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def create_bucket(self, bucket: str) -> None:
        self.client().create_bucket(Bucket=bucket)

    def put(self, bucket: str, key: str, data: bytes | os.PathLike | str) -> None:
        """Store ``data`` (bytes, or the path of a file, streamed) under ``key``, in one PUT."""
        client = self.client()
        if isinstance(data, bytes):
            client.put_object(Bucket=bucket, Key=key, Body=data)
            return
        with open(data, "rb") as f:
            client.put_object(Bucket=bucket, Key=key, Body=f)

    def upload(self, bucket: str, key: str, path: os.PathLike | str, **extra_args: Any) -> None:
        """Store the file at ``path`` as users do: boto3's ``upload_file``, in 8 MiB parts above 8 MiB.

        A multipart object's ETag ends in ``-N`` and its checksum is of the parts' checksums.
        ``extra_args`` go to ``ExtraArgs`` (``ChecksumAlgorithm="SHA256"``).
        """
        self.client().upload_file(str(path), bucket, key, ExtraArgs=extra_args or None)

    def get(self, bucket: str, key: str) -> bytes:
        return self.client().get_object(Bucket=bucket, Key=key)["Body"].read()

    # -- what the server was asked ------------------------------------------------------------

    def requests(self, method: str | None = None, path: str | None = None) -> list[dict[str, str]]:
        """The requests answered since the server started, oldest first: method, path, Range header.

        ``method`` and ``path`` (``/bucket/key``, with the key as the client quoted it)
        keep only those requests. Those made by this class's own helpers count too.
        """
        import urllib.request

        with urllib.request.urlopen(self.endpoint_url + REQUESTS_PATH, timeout=30) as resp:
            seen = json.loads(resp.read())
        return [r for r in seen if (method is None or r["method"] == method) and (path is None or r["path"] == path)]

    def reads(self, bucket: str, key: str) -> int:
        """How many GET requests read the object ``key`` (whole or a range of it)."""
        from urllib.parse import quote

        return len(self.requests("GET", f"/{bucket}/{quote(key)}"))


#: Where the server process lists the requests it answered (an S3 bucket name cannot start with "_").
REQUESTS_PATH = "/_requests"


class _Counted:
    """A WSGI application that records each request's method, path and Range header before moto answers it."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: list[dict[str, str]] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        path = environ.get("RAW_URI") or environ.get("REQUEST_URI") or environ.get("PATH_INFO", "")
        path = path.split("?", 1)[0]
        if path == REQUESTS_PATH:
            body = json.dumps(self.seen).encode()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        self.seen.append({"method": environ["REQUEST_METHOD"], "path": path, "range": environ.get("HTTP_RANGE", "")})
        return self.app(environ, start_response)


def _serve(port_file: str) -> None:
    """The server process: moto on a free port, its port written once it serves; ends with its parent."""
    import threading

    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    app = _Counted(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", 0, app, True, request_handler=MotoRequestHandler)  # as ThreadedMotoServer
    threading.Thread(target=server.serve_forever, daemon=True).start()
    parent = os.getppid()
    port = server.server_address[1]
    tmp = port_file + ".tmp"
    Path(tmp).write_text(str(port))
    os.replace(tmp, port_file)
    while os.getppid() == parent:  # an orphaned server would hold its memory until the machine restarts
        time.sleep(0.5)


if __name__ == "__main__":
    _serve(sys.argv[1])
