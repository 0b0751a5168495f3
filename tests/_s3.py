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
by default). ``python tests/_s3.py PORT_FILE`` is the server process itself: it writes its
port to PORT_FILE once it serves, and stops when its parent does.
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

    def get(self, bucket: str, key: str) -> bytes:
        return self.client().get_object(Bucket=bucket, Key=key)["Body"].read()


def _serve(port_file: str) -> None:
    """The server process: moto on a free port, its port written once it serves; ends with its parent."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    parent = os.getppid()
    _, port = server.get_host_and_port()
    tmp = port_file + ".tmp"
    Path(tmp).write_text(str(port))
    os.replace(tmp, port_file)
    while os.getppid() == parent:  # an orphaned server would hold its memory until the machine restarts
        time.sleep(0.5)


if __name__ == "__main__":
    _serve(sys.argv[1])
