"""A distributed Airflow for the e2e tests: Redis, CeleryExecutor, two workers, two triggerers, and the faults.

* :class:`Redis`: Debian's ``redis-server`` on 127.0.0.1 and a free port, no persistence.
* :class:`WireTap`: a loopback TCP forwarder in front of the emulator, one per Airflow
  component, that records every request the component sends (time, method, path) and
  can hold the answers to imports for a while. Each component reaches the emulator
  through its own tap (its own ``AIRFLOW_CONN_DATATABLES_DEFAULT``), so the test knows
  who sent what (a triggerer's listings, a worker's imports) without touching the
  provider or the emulator; a held answer is an import the service has done whose
  answer has not reached the worker yet, the moment to kill that worker.
* :class:`CeleryStack`: :class:`~tests.e2e.harness.AirflowStack` with the CeleryExecutor:
  scheduler, dag-processor, api-server, named Celery workers and triggerers, each its
  own process with its own log (and log-server port); workers can be killed with
  everything under them and started again.
* :func:`process_tree` and :func:`kill_tree`: a process and all its descendants, found
  by walking ``/proc`` (Airflow's task processes leave the worker's process group, so
  ``killpg`` would miss them), frozen with SIGSTOP so none can fork meanwhile, then
  SIGKILLed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .harness import (
    LOGS,
    MARKER_VAR,
    AirflowStack,
    Postgres,
    Process,
    StackError,
    airflow_executable,
    free_port,
    wait_until,
)

DISTRIBUTED_LOGS = LOGS / "distributed"


# -- processes ----------------------------------------------------------------------------


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, process group) of ``pid``, or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the command name may hold spaces and parentheses
    return fields[0], int(fields[1]), int(fields[2])


def process_tree(root: int) -> list[int]:
    """``root`` and every live descendant of it, parents before children."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None and stat[0] != "Z":
            children.setdefault(stat[1], []).append(int(entry.name))
    if _stat(root) is None:
        return []
    tree, queue = [], [root]
    while queue:
        pid = queue.pop(0)
        tree.append(pid)
        queue.extend(children.get(pid, []))
    return tree


def process_group(pid: int) -> int | None:
    stat = _stat(pid)
    return None if stat is None else stat[2]


def alive(pid: int) -> bool:
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


@dataclass
class Killed:
    """What :func:`kill_tree` killed: every pid, and those that had left the root's process group."""

    root: int
    pids: list[int]
    other_groups: list[int]


def kill_tree(root: int, timeout: float = 10) -> Killed:
    """SIGKILL ``root`` and every process under it, whatever process group each is in.

    The tree is frozen first (SIGSTOP, walked again until no new process appears), so a
    worker cannot start a process between the walk and the kill.
    """
    group = process_group(root)
    frozen: list[int] = []
    while new := [pid for pid in process_tree(root) if pid not in frozen]:
        for pid in new:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        frozen.extend(new)
    other_groups = [pid for pid in frozen if process_group(pid) not in (None, group)]
    for pid in frozen:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not any(alive(pid) for pid in frozen), timeout, f"the processes of {root} to die", 0.05)
    return Killed(root, frozen, other_groups)


# -- Redis --------------------------------------------------------------------------------


class Redis:
    """Debian's ``redis-server`` on 127.0.0.1 and a free port, in memory only (the Celery broker)."""

    def __init__(self, marker: str, log_dir: Path = DISTRIBUTED_LOGS) -> None:
        self.marker = marker
        self.log = log_dir / "redis.log"
        self.port = 0
        self.dir: Path | None = None
        self.process: Process | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 30) -> Redis:
        executable = "/usr/bin/redis-server"
        if not Path(executable).exists():
            raise StackError(f"{executable} is missing (run scripts/system-deps.sh)")
        self.dir = Path(tempfile.mkdtemp(prefix="e2e-redis-"))
        self.port = free_port()
        argv = [executable, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        argv += ["--dir", str(self.dir), "--daemonize", "no", "--logfile", ""]
        env = {"PATH": "/usr/bin:/bin", MARKER_VAR: self.marker}
        self.process = Process("redis", argv, env, self.log, cwd=self.dir).start()
        wait_until(self.ping, timeout, "Redis to answer PING", 0.1, self.process.check_alive)
        return self

    def ping(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop(signal.SIGTERM, timeout=10)
            self.process = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


# -- the wire tap -------------------------------------------------------------------------

_REQUEST_LINE = re.compile(rb"^(GET|POST|PUT|DELETE|HEAD) (\S+) HTTP/1\.[01]$")
_STATUS_LINE = re.compile(rb"^HTTP/1\.[01] (\d{3}) ")
_CARD_ID = re.compile(rb'"CardID"\s*:\s*"([^"]+)"')


@dataclass
class Request:
    """One request a component sent through its tap; ``status`` once its answer has been forwarded."""

    at: float  # time.monotonic() when the request line went through
    method: str
    path: str
    status: int | None = None
    held: bool = False  # its answer was kept back by hold_imports
    card_id: str | None = None  # the CardID in a held import's answer

    @property
    def department(self) -> str | None:
        match = re.match(r"/v1\.0/projects/([^/?]+)/cards", self.path)
        return match.group(1) if match else None

    @property
    def is_listing(self) -> bool:
        return self.method == "GET" and re.fullmatch(r"/v1\.0/projects/[^/?]+/cards(\?.*)?", self.path) is not None


@dataclass
class _Connection:
    waiting: list[Request] = field(default_factory=list)  # sent, answer not yet forwarded (no pipelining)


class WireTap:
    """A TCP forwarder from a free loopback port to ``upstream``, recording the HTTP requests it carries.

    ``hold_imports(seconds)`` keeps every answer to ``POST /v1.0/data/import`` for that long
    before passing it on: the service has imported the file and spent the credit, the
    worker does not know the CardID yet. :meth:`held` lists those answers being held.
    """

    def __init__(self, name: str, upstream_port: int) -> None:
        self.name = name
        self.upstream_port = upstream_port
        self.requests: list[Request] = []
        self.hold = 0.0
        self._holding: list[Request] = []
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, name=f"tap-{name}", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def hold_imports(self, seconds: float) -> None:
        self.hold = seconds

    def held(self) -> list[Request]:
        with self._lock:
            return list(self._holding)

    def snapshot(self) -> list[Request]:
        with self._lock:
            return list(self.requests)

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._server.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            conn = _Connection()
            threading.Thread(target=self._requests, args=(client, upstream, conn), daemon=True).start()
            threading.Thread(target=self._answers, args=(upstream, client, conn), daemon=True).start()

    @staticmethod
    def _lines(buffer: bytearray, chunk: bytes) -> Iterator[bytes]:
        """Complete CRLF-terminated lines of ``buffer + chunk``; the rest stays in ``buffer`` (bounded)."""
        buffer += chunk
        while (end := buffer.find(b"\r\n")) >= 0:
            yield bytes(buffer[:end])
            del buffer[: end + 2]
        if len(buffer) > 65536:  # a body without line breaks: nothing to find in it
            del buffer[:-1024]

    def _requests(self, source: socket.socket, sink: socket.socket, conn: _Connection) -> None:
        buffer = bytearray()
        try:
            while chunk := source.recv(65536):
                for line in self._lines(buffer, chunk):
                    if match := _REQUEST_LINE.match(line):
                        request = Request(time.monotonic(), match.group(1).decode(), match.group(2).decode())
                        with self._lock:
                            self.requests.append(request)
                            conn.waiting.append(request)
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            _close(source, sink)

    def _answers(self, source: socket.socket, sink: socket.socket, conn: _Connection) -> None:
        buffer = bytearray()
        try:
            while chunk := source.recv(65536):
                answered = []
                for line in self._lines(buffer, chunk):
                    match = _STATUS_LINE.match(line)
                    if match and conn.waiting:
                        with self._lock:
                            request = conn.waiting.pop(0)
                            request.status = int(match.group(1))
                        answered.append(request)
                held = next((r for r in answered if self._should_hold(r)), None)
                if held is not None:
                    chunk = self._hold(held, source, chunk)
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            _close(source, sink)

    def _should_hold(self, request: Request) -> bool:
        return self.hold > 0 and request.method == "POST" and request.path.startswith("/v1.0/data/import")

    def _hold(self, request: Request, source: socket.socket, chunk: bytes) -> bytes:
        """Keep an import's answer for ``self.hold`` seconds; return it, with the rest of it read meanwhile."""
        until = time.monotonic() + self.hold
        answer = chunk
        source.settimeout(0.2)
        while not _CARD_ID.search(answer) and time.monotonic() < until:  # the body may follow the head
            with contextlib.suppress(TimeoutError):
                if not (more := source.recv(65536)):
                    break
                answer += more
        source.settimeout(None)
        found = _CARD_ID.search(answer)
        with self._lock:
            request.held = True
            request.card_id = found.group(1).decode() if found else None
            self._holding.append(request)
        time.sleep(max(0.0, until - time.monotonic()))
        with self._lock:
            self._holding.remove(request)
        return answer


def _close(*sockets: socket.socket) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            sock.close()


# -- the Celery stack ---------------------------------------------------------------------


@dataclass
class Component:
    """One Airflow process of the stack: its argv after ``airflow`` and its own environment additions."""

    name: str
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)


class CeleryStack(AirflowStack):
    """Airflow on PostgreSQL and Redis with the CeleryExecutor; every component its own process.

    ``workers`` and ``triggerers`` map a name to the task queues it consumes (``capacities``: a
    triggerer's most triggers at once, where given); ``taps`` maps
    a component name to the URL through which it reaches the Data Tables service (its
    ``datatables_default`` connection); ``connection`` is that connection without a host.
    """

    def __init__(
        self,
        postgres: Postgres,
        redis: Redis,
        dags_folder: Path,
        *,
        marker: str,
        workers: dict[str, list[str]],
        triggerers: dict[str, list[str]],
        connection: dict,
        taps: dict[str, str],
        concurrency: int = 3,
        capacities: dict[str, int] | None = None,
        extra_env: dict[str, str] | None = None,
        log_dir: Path = DISTRIBUTED_LOGS,
    ) -> None:
        self.redis = redis
        self.connection = connection
        self.taps = taps
        env = {
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            "AIRFLOW__CORE__PARALLELISM": "32",
            "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": "64",
            "AIRFLOW__CELERY__BROKER_URL": redis.url,
            "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + postgres.url,
            "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(concurrency),
            "AIRFLOW__CELERY__OPERATION_TIMEOUT": "10",
            # The scheduler notices a killed worker's tasks by their missing heartbeats.
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": "25",
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "3",
            "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT": "120",
            # ...and a killed triggerer's triggers by its missing heartbeats; they go to the other one.
            "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "10",
            "AIRFLOW__TRIGGERER__QUEUES_ENABLED": "True",
        }
        env.update(extra_env or {})
        super().__init__(postgres, dags_folder, marker=marker, extra_env=env, log_dir=log_dir)
        self.components: dict[str, Component] = {
            "api-server": Component("api-server", ["api-server", "--port", str(self.port), "--host", "127.0.0.1"]),
            "scheduler": Component("scheduler", ["scheduler"]),
            "dag-processor": Component("dag-processor", ["dag-processor"]),
        }
        for name, queues in workers.items():
            self.components[name] = Component(
                name,
                ["celery", "worker", "--celery-hostname", f"{name}@%h", "--queues", ",".join(queues)]
                + ["--concurrency", str(concurrency), "--without-mingle", "--without-gossip"],
                {"AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port())},
            )
        for name, queues in triggerers.items():
            self.components[name] = Component(
                name,
                ["triggerer", "--queues", ",".join(queues)]
                + (["--capacity", str(capacities[name])] if capacities and name in capacities else []),
                {"AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port())},
            )
        self.workers = list(workers)
        self.triggerers = list(triggerers)

    @property
    def COMPONENTS(self) -> tuple[str, ...]:  # type: ignore[override]  # noqa: N802 - the base class's name
        return tuple(self.components)

    def _component_env(self, name: str) -> dict[str, str]:
        env = {**self.env, **self.components[name].env}
        if name in self.taps:
            env["AIRFLOW_CONN_DATATABLES_DEFAULT"] = json.dumps({**self.connection, "host": self.taps[name]})
        return env

    def start_component(self, name: str) -> Process:
        argv = [*airflow_executable(), *self.components[name].args]
        process = Process(name, argv, self._component_env(name), self.log_dir / f"{name}.log").start()
        self.processes[name] = process
        return process

    def start(self, timeout: float = 300) -> CeleryStack:
        self.migrate()
        for name in self.components:
            self.start_component(name)
        wait_until(self._healthy, timeout, "every Airflow component to be healthy", 1.0, self.check_alive)
        wait_until(
            lambda: self.live_workers() >= set(self.workers),
            timeout,
            "every Celery worker to answer",
            1.0,
            self.check_alive,
        )
        return self

    def live_workers(self) -> set[str]:
        """Names of the Celery workers that answer a ping through the broker."""
        from celery import Celery

        app = Celery(broker=self.redis.url)
        try:
            replies = app.control.ping(timeout=1.0)
        finally:
            app.close()
        return {hostname.split("@")[0] for reply in replies for hostname in reply}

    def kill(self, name: str) -> Killed:
        """SIGKILL a component and every process under it; it stays down until :meth:`restart`."""
        process = self.processes[name]
        if process.proc is None or not process.alive():
            raise StackError(f"{name} is not running")
        killed = kill_tree(process.proc.pid)
        process.proc.wait(10)
        del self.processes[name]
        return killed

    def restart(self, name: str, timeout: float = 120) -> None:
        self.start_component(name)
        if name in self.workers:
            wait_until(lambda: name in self.live_workers(), timeout, f"{name} to answer", 1.0, self.check_alive)

    def stop(self) -> None:
        # Workers and triggerers first, the api-server last: tasks still running report to it.
        order = [*self.workers, *self.triggerers, "scheduler", "dag-processor", "api-server"]
        for name in order:
            process = self.processes.pop(name, None)
            if process is not None:
                process.stop(signal.SIGTERM, timeout=20)
        shutil.rmtree(self.home, ignore_errors=True)
