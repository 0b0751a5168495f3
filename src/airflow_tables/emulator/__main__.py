"""``airflow-tables-emulator``: run the local Data Tables Service.

The server imports (Starlette, uvicorn) happen after the arguments are parsed,
so ``--help`` and configuration errors answer at once, and the socket is bound
here, before the app is built, so ``--port 0`` can report the port it got.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import socket
import sys
from pathlib import Path

from airflow_tables.emulator.config import ConfigError, EmulatorConfig, load

DESCRIPTION = "Run a local, persistent emulator of the Data Tables Service (every endpoint of /v1.0)."

EPILOG = """\
State (tables, their files, credits, readings) lives in --data-dir: SQLite for the
metadata, files/ for the data. Stop or kill the process at any moment; started
again on the same directory it has every table, and readings that were under way
resume.

Configuration (--config FILE, JSON, or TOML on Python 3.11+; default DATA_DIR/config.json):
  organisations  {"acme": {"credits": 1000}}: each import spends one credit of the
                 caller's organisation; the balance is stored in the data directory and
                 reset only when its value in the file changes.
  departments    {"PRJ-sales": {"name": "Sales", "domain": "Sales"}}: ProjectIDs; Domain of
                 their uploaded tables. Departments named by a key exist implicitly.
  api_keys       [{"key": "...", "organisation": "acme", "manage": ["PRJ-sales"],
                   "read": ["PRJ-hr"]}]: send as header X-API-Key. "manage" may list,
                 fetch, import and delete; "read" may list and fetch. Any other
                 department answers 403.
  connectors     [{"project_id": "PRJ-sales", "name": "Accounts", "source": "Salesforce",
                   "status": "active", "rows": 1200, "columns": {"Id": "string"}}]:
                 tables fed by a connected system; "active" ones are LockedFromDelete.
  limits         {"max_bytes": 536870912, "max_columns": 300}

With no configuration file, the first run writes DATA_DIR/config.json with a new
API key, department and 100 credits, and prints them.

Test controls (--test-controls; off by default, for automated tests only): endpoints
under /_emulator/ (no key needed) to inject faults into /v1.0 requests (status codes,
429 with Retry-After, latency, dropped connections), set a processing delay, make
readings fail, switch connector tables and read request statistics. See docs/emulator.md.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="airflow-tables-emulator",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    parser.add_argument("--port", type=int, default=8765, help="port to listen on; 0 picks a free one (default: 8765)")
    parser.add_argument("--data-dir", required=True, type=Path, help="directory of the emulator's state (created)")
    parser.add_argument("--config", type=Path, help="configuration file (default: DATA_DIR/config.json)")
    parser.add_argument(
        "--test-controls", action="store_true", help="mount the /_emulator/ test controls (fault injection and more)"
    )
    parser.add_argument(
        "--processing-delay",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="keep every table being read at least this long after its import (default: 0)",
    )
    parser.add_argument("--ready-file", type=Path, help="write {url, port, pid} as JSON here once serving (for tools)")
    parser.add_argument(
        "--stop-with-parent",
        action="store_true",
        help="stop when the process that started this one exits (test helpers use it, so no server outlives them)",
    )
    parser.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--access-log", action="store_true", help="log every request")
    parser.add_argument("--ssl-certfile", type=Path, help="serve HTTPS with this PEM certificate (chain)")
    parser.add_argument("--ssl-keyfile", type=Path, help="the certificate's PEM private key (with --ssl-certfile)")
    return parser


def bind(host: str, port: int) -> socket.socket:
    """Listen on ``host:port`` now, so the port is known (and taken) before the app is built."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def stop_with_parent() -> None:
    """Ask this process to stop (as Ctrl-C would) once its parent is gone."""
    import signal
    import threading
    import time

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent watch", daemon=True).start()


def connection_lines(config: EmulatorConfig, url: str, *, show_key: bool) -> list[str]:
    """The provider's connection to this emulator, ``export AIRFLOW_CONN_DATATABLES_DEFAULT='{...}'``.

    The key is the first one that may manage data (import, delete), the ``project_id`` extra
    its first department, so operators may leave ``project_id`` out; the host has no ``/v1.0``
    (the provider adds it). The key itself is shown only when it is the emulator's own (the
    data directory's config.json, written on the first run); a key from a ``--config`` file
    is its owner's to paste, and is never printed. Nothing when no key may manage a department.
    """
    numbered = [(i, k) for i, k in enumerate(config.api_keys.values()) if k.manage]
    if not numbered:
        return []
    index, key = numbered[0]
    password = key.key if show_key else f"<api_keys[{index}].key>"
    extra = {"project_id": sorted(key.manage)[0]}
    conn = {"conn_type": "datatables", "host": url, "password": password, "extra": extra}
    export = f"  export AIRFLOW_CONN_DATATABLES_DEFAULT={shlex.quote(json.dumps(conn))}"
    if show_key:
        return ["Airflow connection (the provider's datatables_default), ready to paste:", export]
    return [
        f"Airflow connection (the provider's datatables_default), with the key of api_keys[{index}] in "
        f"{config.config_path} for {password}:",
        export,
    ]


def banner(config: EmulatorConfig, url: str, first_run: bool, own_config: bool) -> str:
    """What the emulator prints once it listens; ``own_config``: the data directory's own config.json."""
    lines = [
        f"Data Tables Service emulator at {url} (endpoints under /v1.0)",
        f"  data: {config.data_dir}",
        f"  config: {config.config_path}",
    ]
    if first_run:
        key = next(iter(config.api_keys.values()))
        project_id = sorted(key.manage)[0]
        lines += [
            "First run: a configuration with a ready-to-use key was written.",
            f"  X-API-Key:  {key.key}",
            f"  ProjectID:  {project_id}",
            f"  credits:    {config.organisations[key.organisation]} (organisation {key.organisation!r})",
            "Try:",
            f'  curl -H "X-API-Key: {key.key}" {url}/v1.0/projects/{project_id}/cards',
            f'  curl -H "X-API-Key: {key.key}" -F ProjectID={project_id} -F "File=@data.csv;type=text/csv" '
            f"{url}/v1.0/data/import",
        ]
    else:
        lines.append(f"  departments: {', '.join(sorted(config.departments))} (API keys are in the config)")
    lines += connection_lines(config, url, show_key=own_config)
    if config.test_controls:
        lines.append(f"  test controls: {url}/_emulator/ (not for normal use)")
    return "\n".join(lines)


#: The server's modules, installed with the provider's ``emulator`` extra.
SERVER_MODULES = ("starlette", "uvicorn", "python_multipart")


def missing_server_modules() -> list[str]:
    """The server modules this environment lacks (looked up, not imported: --help stays instant)."""
    import importlib.util

    return [name for name in SERVER_MODULES if importlib.util.find_spec(name) is None]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if missing := missing_server_modules():
        print(
            f"airflow-tables-emulator: the emulator's server needs {' and '.join(missing)} (not installed here); "
            "install the provider with its 'emulator' extra: pip install 'airflow-tables[emulator]'",
            file=sys.stderr,
        )
        return 1
    if args.ssl_keyfile and not args.ssl_certfile:
        parser.error("--ssl-keyfile needs --ssl-certfile")
    config = EmulatorConfig(
        data_dir=args.data_dir.resolve(),
        host=args.host,
        port=args.port,
        test_controls=args.test_controls,
        processing_delay=max(0.0, args.processing_delay),
    )
    try:
        config, first_run = load(config, args.config)
    except ConfigError as err:
        print(f"airflow-tables-emulator: {err}", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        sock = bind(args.host, args.port)
    except OSError as err:
        print(f"airflow-tables-emulator: cannot listen on {args.host}:{args.port}: {err.strerror}", file=sys.stderr)
        return 1
    config.port = sock.getsockname()[1]
    host = f"[{args.host}]" if ":" in args.host else args.host
    url = f"{'https' if args.ssl_certfile else 'http'}://{host}:{config.port}"

    from airflow_tables.emulator.app import create_app
    from airflow_tables.emulator.store import DataDirInUse

    try:
        app = create_app(config)
    except (DataDirInUse, ConfigError) as err:
        print(f"airflow-tables-emulator: {err}", file=sys.stderr)
        return 2 if isinstance(err, ConfigError) else 1
    if args.stop_with_parent:
        stop_with_parent()
    print(banner(config, url, first_run, own_config=args.config is None), flush=True)
    serve(app, sock, args, {"url": url, "port": config.port, "pid": os.getpid()})
    return 0


def serve(app, sock: socket.socket, args: argparse.Namespace, ready: dict) -> None:
    """Run uvicorn on the bound socket until stopped; write ``ready`` to ``--ready-file`` once serving."""
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets=None) -> None:
            await super().startup(sockets=sockets)
            if args.ready_file and not self.should_exit:
                tmp = args.ready_file.with_name(args.ready_file.name + ".tmp")
                tmp.write_text(json.dumps(ready))
                tmp.replace(args.ready_file)  # atomic: a reader never sees half a file

    config = uvicorn.Config(
        app,
        log_level=args.log_level,
        access_log=args.access_log,
        proxy_headers=False,
        lifespan="on",
        timeout_graceful_shutdown=3,
        ssl_certfile=args.ssl_certfile,
        ssl_keyfile=args.ssl_keyfile,
    )
    Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
