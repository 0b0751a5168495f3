"""The provider's plugin app served alone on 127.0.0.1, as the api-server mounts it (``/datatables``).

For tests and benchmarks of what workers ask of the api-server (the credit ledger's claims) without
a whole Airflow: the same app, in a process of its own, with the caller's environment (its Airflow
home and metadata database, its connections) and Airflow's server context (it reads the database).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

#: What the process runs: the app mounted where the api-server mounts it.
_SERVE = (
    "import sys, uvicorn; from fastapi import FastAPI; from airflow_tables.plugins.app import create_app; "
    "app = FastAPI(); app.mount('/datatables', create_app()); "
    "uvicorn.run(app, host='127.0.0.1', port=int(sys.argv[1]), log_level='warning')"
)


class PluginAppProcess:
    """``with PluginAppProcess() as app:`` serves the app until the block ends; ``app.url`` is its root."""

    def __init__(self, env: dict[str, str] | None = None, timeout: float = 60.0) -> None:
        self.env = {**(os.environ if env is None else env), "_AIRFLOW_PROCESS_CONTEXT": "server"}
        self.timeout = timeout
        self.process: subprocess.Popen | None = None
        self.url = ""

    def __enter__(self) -> PluginAppProcess:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.process = subprocess.Popen([sys.executable, "-c", _SERVE, str(port)], env=self.env)
        deadline = time.monotonic() + self.timeout
        while True:
            with socket.socket() as attempt:
                if attempt.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                raise RuntimeError(f"the plugin app did not start on port {port}")
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{port}"
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(30)


__all__ = ["PluginAppProcess"]
