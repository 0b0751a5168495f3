"""A real Airflow 3 stack for end-to-end tests: PostgreSQL, four Airflow processes, a REST client, a browser.

* :class:`Postgres`: ``initdb`` and ``postgres`` from Debian's packages, in a temporary
  directory, on 127.0.0.1 and a free port (as the ``postgres`` OS user when run as root).
* :class:`AirflowStack`: ``airflow db migrate``, then ``scheduler``, ``dag-processor``,
  ``triggerer`` and ``api-server`` as separate processes (LocalExecutor), configured only
  through environment variables; ready once ``/api/v2/monitor/health`` says every
  component is healthy. The simple auth manager has real users with roles (an ``admin``
  and a ``viewer``, see :data:`USERS`), not everyone-is-admin, so authorisation is tested.
* :class:`AirflowApi`: the REST API v2 as the admin (unpause, trigger, wait for a run while
  recording every task-instance state seen, connections, XComs, logs).
* :class:`Browser`: Playwright's sync API driving Debian's ``/usr/bin/chromium`` (no
  browser download), with screenshots; logged in as the admin.

Every process is started in a session of its own, with a marker in its environment;
:func:`kill_marked` ends whatever still carries the marker (task processes put
themselves in process groups of their own, so killing a group is not enough). Every
wait polls against a deadline. Logs go to ``artifacts/e2e/logs/``.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "artifacts" / "e2e"
LOGS = ARTIFACTS / "logs"
CHROMIUM = "/usr/bin/chromium"
MARKER_VAR = "AIRFLOW_TABLES_E2E_RUN"
TERMINAL_RUN_STATES = frozenset({"success", "failed"})
#: The simple auth manager's users: name -> role. A viewer may read DAGs and assets, not connections.
USERS = {"admin": "admin", "viewer": "viewer"}


class StackError(RuntimeError):
    """A component could not be started, died, or did not become ready in time."""


# -- processes ----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"({path} not readable)"
    return "\n".join(text.splitlines()[-lines:])


def _die_with_parent() -> None:
    """In the child, before exec: own session; SIGTERM when the test process dies (Linux)."""
    os.setsid()
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _marked_pids(marker: str) -> list[int]:
    needle = f"{MARKER_VAR}={marker}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def kill_marked(marker: str, timeout: float = 10) -> list[int]:
    """SIGTERM, then SIGKILL, every process whose environment carries ``marker``; return those found."""
    found = _marked_pids(marker)
    for pid in found:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while (left := _marked_pids(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return found


class Process:
    """One long-running child in a session of its own, output to ``log``."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path, **popen: Any) -> None:
        self.name, self.argv, self.env, self.log = name, argv, env, log
        self.popen_kwargs = popen
        self.proc: subprocess.Popen | None = None

    def start(self) -> Process:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            out.write(f"\n=== {time.strftime('%H:%M:%S')} {' '.join(self.argv)}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                self.argv,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
                **self.popen_kwargs,
            )
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def check_alive(self) -> None:
        if self.proc is not None and not self.alive():
            raise StackError(
                f"{self.name} exited with {self.proc.returncode}; last lines of {self.log}:\n{tail(self.log)}"
            )

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
        """Signal the whole process group, wait, then SIGKILL the group."""
        if self.proc is None:
            return
        pgid = self.proc.pid
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)


def wait_until(predicate, timeout: float, what: str, interval: float = 0.25, check=None):
    """Poll ``predicate`` until it returns a truthy value (returned) or ``timeout`` passes (StackError).

    ``check`` runs before every poll and may raise to stop early (a component died).
    """
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        if check is not None:
            check()
        try:
            value = predicate()
            if value:
                return value
        except Exception as err:  # noqa: BLE001 - remembered and reported on timeout
            last_error = err
        if time.monotonic() > deadline:
            detail = f" (last error: {last_error!r})" if last_error else ""
            raise StackError(f"timed out after {timeout:.0f} s waiting for {what}{detail}")
        time.sleep(interval)


# -- PostgreSQL ---------------------------------------------------------------------------


def postgres_bin_dir() -> Path | None:
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name))
    return candidates[-1].parent if candidates else None


class Postgres:
    """A throwaway PostgreSQL server: ``initdb`` in a temporary directory, loopback only, trust auth."""

    def __init__(self, marker: str, log_dir: Path = LOGS, database: str = "airflow") -> None:
        self.marker = marker
        self.log = log_dir / "postgres.log"
        self.database = database
        self.user = "postgres"
        self.port = 0
        self.dir: Path | None = None
        self.process: Process | None = None
        bin_dir = postgres_bin_dir()
        if bin_dir is None:
            raise StackError("PostgreSQL is not installed (run scripts/system-deps.sh)")
        self.bin = bin_dir

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://{self.user}@127.0.0.1:{self.port}/{self.database}"

    def _as_owner(self) -> dict[str, Any]:
        """Popen arguments to run as the ``postgres`` OS user when root (initdb refuses root)."""
        if os.geteuid() != 0:
            return {}
        import pwd

        pw = pwd.getpwnam("postgres")
        return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}

    def start(self, timeout: float = 60) -> Postgres:
        self.dir = Path(tempfile.mkdtemp(prefix="e2e-postgres-"))
        data = self.dir / "data"
        owner = self._as_owner()
        if owner:
            os.chown(self.dir, owner["user"], owner["group"])
        env = {
            "PATH": f"{self.bin}:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "HOME": str(self.dir),
            MARKER_VAR: self.marker,
        }
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as out:
            result = subprocess.run(
                [str(self.bin / "initdb"), "-D", str(data), "-U", self.user, "--auth=trust", "-E", "UTF8"]
                + ["--no-sync", "--locale=C.UTF-8"],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=120,
                cwd=self.dir,
                **owner,
            )
        if result.returncode != 0:
            raise StackError(f"initdb failed ({result.returncode}):\n{tail(self.log)}")
        self.port = free_port()
        argv = [str(self.bin / "postgres"), "-D", str(data), "-p", str(self.port)]
        settings = {
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": str(self.dir),
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "max_connections": "200",
        }
        for key, value in settings.items():
            argv += ["-c", f"{key}={value}"]
        self.process = Process("postgres", argv, env, self.log, cwd=self.dir, **owner).start()
        wait_until(self._ready, timeout, "PostgreSQL to accept connections", check=self.process.check_alive)
        self._create_database()
        return self

    def _connect(self, dbname: str):
        import psycopg2

        return psycopg2.connect(host="127.0.0.1", port=self.port, user=self.user, dbname=dbname, connect_timeout=3)

    def query(self, sql: str, *params: Any) -> list[tuple]:
        """The rows of one read-only query of the Airflow database (for what the REST API does not show)."""
        with contextlib.closing(self._connect(self.database)) as conn, conn.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()

    def _ready(self) -> bool:
        self._connect("postgres").close()
        return True

    def _create_database(self) -> None:
        conn = self._connect("postgres")
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(f'CREATE DATABASE "{self.database}"')
        finally:
            conn.close()

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop(signal.SIGINT, timeout=30)  # SIGINT: fast shutdown
            self.process = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


# -- Airflow ------------------------------------------------------------------------------


def airflow_executable() -> list[str]:
    script = Path(sys.executable).parent / "airflow"
    return [str(script)] if script.exists() else [sys.executable, "-m", "airflow"]


class AirflowStack:
    """Airflow 3 on PostgreSQL: scheduler, dag-processor, triggerer and api-server, LocalExecutor.

    ``dags_folder`` is the ``dags-folder`` bundle; ``extra_bundles`` maps more bundle
    names to local folders (tests bring DAGs of their own without touching the repo's
    ``dags/``). ``extra_env`` is added to every component's environment (connections as
    ``AIRFLOW_CONN_*``, for instance).
    """

    COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
    HEALTH_KEYS = ("metadatabase", "scheduler", "triggerer", "dag_processor")

    def __init__(
        self,
        postgres: Postgres,
        dags_folder: Path,
        *,
        marker: str,
        extra_bundles: dict[str, Path] | None = None,
        extra_env: dict[str, str] | None = None,
        log_dir: Path = LOGS,
    ) -> None:
        self.postgres = postgres
        self.dags_folder = Path(dags_folder)
        self.extra_bundles = dict(extra_bundles or {})
        self.marker = marker
        self.log_dir = log_dir
        self.home = Path(tempfile.mkdtemp(prefix="e2e-airflow-home-"))
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.processes: dict[str, Process] = {}
        self.passwords = {name: secrets.token_urlsafe(12) for name in USERS}
        self.passwords_file = self.home / "simple_auth_manager_passwords.json"
        self.passwords_file.write_text(json.dumps(self.passwords))
        self.env = self._environment(extra_env or {})

    def _environment(self, extra: dict[str, str]) -> dict[str, str]:
        # Start from the caller's environment minus any Airflow settings of its own.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW__", "AIRFLOW_CONN_"))}
        bundles = [
            {
                "name": "dags-folder",
                "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                "kwargs": {"path": str(self.dags_folder)},
            }
        ] + [
            {
                "name": name,
                "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                "kwargs": {"path": str(path)},
            }
            for name, path in self.extra_bundles.items()
        ]
        task_logs = self.log_dir / "tasks"
        env.update(
            {
                MARKER_VAR: self.marker,
                "AIRFLOW_HOME": str(self.home),
                "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}",
                "PYTHONUNBUFFERED": "1",
                "NO_PROXY": "127.0.0.1,localhost",
                "no_proxy": "127.0.0.1,localhost",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.postgres.url,
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                "AIRFLOW__CORE__PARALLELISM": "4",
                "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
                "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(bundles),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
                "AIRFLOW__CORE__AUTH_MANAGER": (
                    "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
                ),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, r in USERS.items()),
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.passwords_file),
                # One set of secrets for every process: the scheduler signs the tasks' execution
                # API tokens and the api-server checks them; connections are encrypted with Fernet.
                "AIRFLOW__CORE__FERNET_KEY": base64.urlsafe_b64encode(os.urandom(32)).decode(),
                "AIRFLOW__API__SECRET_KEY": secrets.token_hex(16),
                "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
                "AIRFLOW__API__HOST": "127.0.0.1",
                "AIRFLOW__API__PORT": str(self.port),
                "AIRFLOW__API__WORKERS": "1",
                "AIRFLOW__API__BASE_URL": self.base_url,
                "AIRFLOW__API__EXPOSE_STACKTRACE": "True",
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base_url}/execution/",
                # Fast discovery and heartbeats: 2 cores, a few minutes for everything.
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                "AIRFLOW__DAG_PROCESSOR__BUNDLE_REFRESH_CHECK_INTERVAL": "2",
                "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "30",
                "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
                "AIRFLOW__DAG_PROCESSOR__PRINT_STATS_INTERVAL": "300",
                "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.5",
                "AIRFLOW__SCHEDULER__JOB_HEARTBEAT_SEC": "2",
                "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
                "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
                # A killed triggerer's triggers go to another after this long without its heartbeat
                # (30 s by default; not less: a loaded machine delays heartbeats by seconds);
                # tests/e2e/test_refresh_watcher.py kills one.
                "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "20",
                # Logs where CI keeps them; ports of our own so parallel stacks do not clash.
                "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(task_logs),
                "AIRFLOW__LOGGING__DAG_PROCESSOR_CHILD_PROCESS_LOG_DIRECTORY": str(
                    self.log_dir / "dag-processor-files"
                ),
                "AIRFLOW__LOGGING__COLORED_CONSOLE_LOG": "False",
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
                "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
            }
        )
        env.update(extra)
        return env

    # -- lifecycle

    def migrate(self, timeout: float = 300) -> None:
        log = self.log_dir / "db-migrate.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as out:
            try:
                result = subprocess.run(
                    [*airflow_executable(), "db", "migrate"],
                    env=self.env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    timeout=timeout,
                    preexec_fn=_die_with_parent,
                )
            except subprocess.TimeoutExpired as err:
                raise StackError(f"airflow db migrate took over {timeout} s:\n{tail(log)}") from err
        if result.returncode != 0:
            raise StackError(f"airflow db migrate failed ({result.returncode}):\n{tail(log)}")

    def start(self, timeout: float = 240) -> AirflowStack:
        self.migrate()
        for name in self.COMPONENTS:
            argv = [*airflow_executable(), name]
            if name == "api-server":
                argv += ["--port", str(self.port), "--host", "127.0.0.1"]
            self.processes[name] = Process(name, argv, self.env, self.log_dir / f"{name}.log").start()
        wait_until(self._healthy, timeout, "every Airflow component to be healthy", 1.0, self.check_alive)
        return self

    def check_alive(self) -> None:
        for process in self.processes.values():
            process.check_alive()

    def start_component(self, name: str, command: str | None = None) -> Process:
        """Start ``airflow <command>`` (by default ``name``) as component ``name``, its output in ``<name>.log``.

        A second triggerer, say: ``start_component("triggerer-2", "triggerer")``; or a component
        :meth:`kill` ended, started again under its name.
        """
        if name in self.processes:
            raise StackError(f"{name} is running already")
        argv = [*airflow_executable(), command or name]
        if (command or name) == "api-server":
            argv += ["--port", str(self.port), "--host", "127.0.0.1"]
        self.processes[name] = process = Process(name, argv, self.env, self.log_dir / f"{name}.log").start()
        return process

    def kill(self, name: str) -> None:
        """SIGKILL a component's whole process group, as a crash or an OOM kill does (nothing runs on the way out)."""
        process = self.processes.pop(name)
        process.stop(signal.SIGKILL, timeout=10)

    def stop_component(self, name: str) -> None:
        """Stop a component the way a deployment does (SIGTERM, then SIGKILL after 20 s)."""
        self.processes.pop(name).stop(signal.SIGTERM, timeout=20)

    def token(self, user: str = "admin") -> str:
        """A JWT for one of :data:`USERS`, from ``POST /auth/token`` with its password."""
        body = {"username": user, "password": self.passwords[user]}
        resp = requests.post(f"{self.base_url}/auth/token", json=body, timeout=30)
        if resp.status_code != 201:
            raise StackError(f"POST /auth/token for {user} answered {resp.status_code}: {resp.text[:500]}")
        return resp.json()["access_token"]

    def health(self) -> dict:
        resp = requests.get(f"{self.base_url}/api/v2/monitor/health", timeout=5)
        resp.raise_for_status()
        return resp.json()

    def _healthy(self) -> bool:
        health = self.health()
        return all((health.get(key) or {}).get("status") == "healthy" for key in self.HEALTH_KEYS)

    def stop(self) -> None:
        # The api-server last: tasks still running report to it while they end.
        others = [name for name in self.processes if name not in self.COMPONENTS]  # a second triggerer, say
        for name in ("scheduler", "triggerer", *others, "dag-processor", "api-server"):
            process = self.processes.get(name)
            if process is not None:
                process.stop(signal.SIGTERM, timeout=20)
        self.processes.clear()
        shutil.rmtree(self.home, ignore_errors=True)

    def log_tails(self, lines: int = 30) -> str:
        parts = []
        others = [name for name in self.processes if name not in self.COMPONENTS]
        for name in (*self.COMPONENTS, *others, "db-migrate"):
            path = self.log_dir / f"{name}.log"
            if path.exists():
                parts.append(f"----- {path} (last {lines} lines) -----\n{tail(path, lines)}")
        return "\n".join(parts)


# -- REST API -----------------------------------------------------------------------------


def _log_line(entry: str | dict) -> str:
    """One line of a task log as the API returns it: a plain line, or a structured event."""
    if isinstance(entry, str):
        return entry
    fields = " ".join(f"{k}={v}" for k, v in entry.items() if k not in ("timestamp", "event", "level", "logger"))
    return f"{entry.get('timestamp', '')} [{entry.get('level', '')}] {entry.get('event', '')} {fields}".rstrip()


class AirflowApi:
    """A small client for ``/api/v2``; remembers every task-instance state it has seen per run.

    ``token`` (a callable) gives a JWT when the API answers 401 or 403; without it the
    client asks ``GET /auth/token``, which answers when everyone is an admin.
    """

    def __init__(self, base_url: str, token: Callable[[], str] | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.session = requests.Session()
        self.session.trust_env = False
        self._token = token
        self._token_tried = False
        # (dag_id, run_id) -> {task key: [states in the order first seen]}
        self.observed: dict[tuple[str, str], dict[str, list[str]]] = {}

    def request(self, method: str, path: str, *, ok: Iterable[int] = (200,), **kwargs) -> requests.Response:
        url = f"{self.base_url}{path}"
        resp = self.session.request(method, url, timeout=30, **kwargs)
        if resp.status_code in (401, 403) and not self._token_tried:
            self._token_tried = True
            token = self._token() if self._token is not None else self._all_admins_token()
            if token:
                self.session.headers["Authorization"] = f"Bearer {token}"
                resp = self.session.request(method, url, timeout=30, **kwargs)
        if resp.status_code not in set(ok):
            raise requests.HTTPError(f"{method} {path} answered {resp.status_code}: {resp.text[:2000]}", response=resp)
        return resp

    def _all_admins_token(self) -> str | None:
        resp = self.session.get(f"{self.base_url}/auth/token", timeout=30)
        return resp.json()["access_token"] if resp.ok else None

    def get(self, path: str, **kwargs) -> Any:
        return self.request("GET", path, **kwargs).json()

    # -- DAGs and runs

    def dag(self, dag_id: str) -> dict:
        return self.get(f"/api/v2/dags/{quote(dag_id, safe='')}")

    def import_errors(self) -> list[dict]:
        return self.get("/api/v2/importErrors", params={"limit": 100})["import_errors"]

    def wait_for_dag(self, dag_id: str, timeout: float = 120, check=None) -> dict:
        """Wait until the dag-processor has parsed ``dag_id``; fail early on an import error naming it."""

        def parsed():
            try:
                return self.dag(dag_id)
            except requests.HTTPError as err:
                if err.response is None or err.response.status_code != 404:
                    raise
            for error in self.import_errors():
                if dag_id in error.get("filename", "") or dag_id in error.get("stack_trace", ""):
                    raise StackError(f"import error for {dag_id}: {error.get('stack_trace')}")
            return None

        return wait_until(parsed, timeout, f"DAG {dag_id} to be parsed", 1.0, check)

    def unpause(self, dag_id: str) -> None:
        self.request("PATCH", f"/api/v2/dags/{quote(dag_id, safe='')}", json={"is_paused": False})

    def trigger(self, dag_id: str, conf: dict | None = None) -> str:
        body = {"logical_date": None, "conf": conf or {}}
        run = self.request("POST", f"/api/v2/dags/{quote(dag_id, safe='')}/dagRuns", json=body).json()
        return run["dag_run_id"]

    def dag_run(self, dag_id: str, run_id: str) -> dict:
        return self.get(f"/api/v2/dags/{quote(dag_id, safe='')}/dagRuns/{quote(run_id, safe='')}")

    def task_instances(self, dag_id: str, run_id: str) -> list[dict]:
        path = f"/api/v2/dags/{quote(dag_id, safe='')}/dagRuns/{quote(run_id, safe='')}/taskInstances"
        return self.get(path, params={"limit": 100})["task_instances"]

    def _record(self, dag_id: str, run_id: str) -> None:
        seen = self.observed.setdefault((dag_id, run_id), {})
        for ti in self.task_instances(dag_id, run_id):
            key = ti["task_id"] if ti.get("map_index", -1) in (-1, None) else f"{ti['task_id']}[{ti['map_index']}]"
            states = seen.setdefault(key, [])
            state = ti.get("state") or "none"
            if not states or states[-1] != state:
                states.append(state)

    def observed_states(self, dag_id: str, run_id: str) -> dict[str, list[str]]:
        """Task key -> the states seen while waiting, in order (consecutive repeats collapsed)."""
        return self.observed.get((dag_id, run_id), {})

    def wait_for_run(self, dag_id: str, run_id: str, timeout: float = 180, interval: float = 0.5, check=None) -> str:
        """Poll the run and its task instances until the run ends; return its final state."""
        state = None

        def ended():
            nonlocal state
            self._record(dag_id, run_id)
            state = self.dag_run(dag_id, run_id)["state"]
            return state in TERMINAL_RUN_STATES

        try:
            wait_until(ended, timeout, f"run {run_id} of {dag_id} to end", interval, check)
        except StackError as err:
            raise StackError(f"{err}; last state {state}; seen {self.observed_states(dag_id, run_id)}") from err
        self._record(dag_id, run_id)
        return state

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1, map_index: int = -1) -> str:
        path = (
            f"/api/v2/dags/{quote(dag_id, safe='')}/dagRuns/{quote(run_id, safe='')}"
            f"/taskInstances/{quote(task_id, safe='')}/logs/{try_number}"
        )
        # JSON is the one form every Airflow 3 answers (3.3 refuses text/plain with a 406).
        content = self.get(path, params={"full_content": True, "map_index": map_index})["content"]
        return "\n".join(_log_line(entry) for entry in content)

    def run_report(self, dag_id: str, run_id: str, log_lines: int = 40) -> str:
        """Task states and the tail of every unsuccessful task's log (mapped ones too): for assertion messages."""
        parts = [f"observed states: {self.observed_states(dag_id, run_id)}"]
        try:
            instances = self.task_instances(dag_id, run_id)
        except Exception as err:  # noqa: BLE001 - a report must not hide the failure it reports
            return "\n".join([*parts, f"(could not read task instances: {err!r})"])
        for ti in instances:
            map_index = ti.get("map_index", -1)
            name = ti["task_id"] if map_index in (-1, None) else f"{ti['task_id']}[{map_index}]"
            parts.append(f"{name}: {ti.get('state')} (try {ti.get('try_number')})")
            if ti.get("state") in ("success", "skipped") or not ti.get("try_number"):
                continue
            try:
                text = self.task_log(dag_id, run_id, ti["task_id"], ti["try_number"], map_index=map_index)
            except Exception as err:  # noqa: BLE001 - one unreadable log must not hide the others
                parts.append(f"(could not read {name}'s log: {err!r})")
            else:
                parts.append("\n".join(text.splitlines()[-log_lines:]))
        return "\n".join(parts)

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value", map_index: int = -1) -> Any:
        path = (
            f"/api/v2/dags/{quote(dag_id, safe='')}/dagRuns/{quote(run_id, safe='')}"
            f"/taskInstances/{quote(task_id, safe='')}/xcomEntries/{quote(key, safe='')}"
        )
        return self.get(path, params={"map_index": map_index, "deserialize": True})["value"]

    # -- connections

    def set_connection(
        self,
        conn_id: str,
        conn_type: str,
        host: str | None = None,
        password: str | None = None,
        extra: dict | None = None,
        **fields: Any,
    ) -> None:
        """Create the connection, or replace its fields if it exists."""
        body = {"connection_id": conn_id, "conn_type": conn_type, "host": host, "password": password, **fields}
        if extra is not None:
            body["extra"] = json.dumps(extra)
        resp = self.request("POST", "/api/v2/connections", json=body, ok=(201, 409))
        if resp.status_code == 409:
            self.request("PATCH", f"/api/v2/connections/{quote(conn_id, safe='')}", json=body)

    def connection(self, conn_id: str) -> dict:
        return self.get(f"/api/v2/connections/{quote(conn_id, safe='')}")


# -- browser ------------------------------------------------------------------------------

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


class Browser:
    """Headless Debian Chromium through Playwright's sync API; a fresh profile each time."""

    def __init__(self, executable: str = CHROMIUM, artifacts: Path = ARTIFACTS) -> None:
        self.executable = executable
        self.artifacts = artifacts
        self.profile: Path | None = None
        self._playwright = None
        self.context = None
        self.page = None

    def start(self) -> Browser:
        from playwright.sync_api import sync_playwright

        if not Path(self.executable).exists():
            raise StackError(f"{self.executable} is missing (run scripts/system-deps.sh)")
        self.profile = Path(tempfile.mkdtemp(prefix="e2e-chromium-"))
        self._playwright = sync_playwright().start()
        try:
            self.context = self._playwright.chromium.launch_persistent_context(
                str(self.profile),
                executable_path=self.executable,
                headless=True,
                args=CHROMIUM_ARGS,
                viewport={"width": 1440, "height": 1000},
                env={**os.environ, "NO_PROXY": "127.0.0.1,localhost"},
                timeout=60_000,
            )
        except Exception:
            self.stop()
            raise
        self.context.set_default_timeout(30_000)
        self.page = self.context.pages[0] if self.context.pages else self.context.new_page()
        return self

    def login(self, base_url: str, token: str) -> None:
        """Be logged in to the Airflow UI: the api-server reads the JWT from the ``_token`` cookie."""
        self.context.add_cookies([{"name": "_token", "value": token, "url": base_url, "httpOnly": True}])

    def goto(self, url: str) -> None:
        self.page.goto(url, wait_until="domcontentloaded")

    def screenshot(self, path: str | Path, full_page: bool = True) -> Path:
        """Save a PNG; a relative ``path`` lands in ``artifacts/e2e/``."""
        path = Path(path)
        if not path.is_absolute():
            path = self.artifacts / path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(path), full_page=full_page)
        return path

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            if self.context is not None:
                self.context.close()
        with contextlib.suppress(Exception):
            if self._playwright is not None:
                self._playwright.stop()
        self.context = self._playwright = self.page = None
        if self.profile is not None:
            shutil.rmtree(self.profile, ignore_errors=True)
            self.profile = None


def new_marker() -> str:
    return uuid.uuid4().hex
