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

from airflow_tables.emulator.config import ConfigError, EmulatorConfig, Timeouts, load
from airflow_tables.emulator.multipart import BODY_ALLOWANCE, MAX_FIELD_BYTES, MAX_HEADER_BYTES, MAX_PARTS

#: A request's line and headers (h11's bound on what it holds unfinished); keys and paths are short.
MAX_REQUEST_HEAD = 16 * 1024

DESCRIPTION = "Run a local, persistent emulator of the Data Tables Service (every endpoint of /v1.0)."

_T = Timeouts()  # the defaults, for the epilog

EPILOG = f"""\
State (tables, their files, credits, readings) lives in --data-dir: SQLite for the
metadata, files/ for the data. Stop or kill the process at any moment; started
again on the same directory it has every table, and readings that were under way
resume.

Configuration (--config FILE, JSON, or TOML on Python 3.11+; default DATA_DIR/config.json):
  organisations  {{"acme": {{"credits": 1000}}}}: each import spends one credit of the
                 caller's organisation; the balance is stored in the data directory and
                 reset only when its value in the file changes.
  departments    {{"PRJ-sales": {{"name": "Sales", "domain": "Sales"}}}}: ProjectIDs; Domain of
                 their uploaded tables. Departments named by a key exist implicitly.
  api_keys       [{{"key": "...", "organisation": "acme", "manage": ["PRJ-sales"],
                   "read": ["PRJ-hr"]}}]: send as header X-API-Key. "manage" may list,
                 fetch, import and delete; "read" may list and fetch. Any other
                 department answers 403.
  connectors     [{{"project_id": "PRJ-sales", "name": "Accounts", "source": "Salesforce",
                   "status": "active", "rows": 1200, "columns": {{"Id": "string"}}}}]:
                 tables fed by a connected system; "active" ones are LockedFromDelete.
  limits         {{"max_bytes": 536870912, "max_columns": 300}}
  timeouts       {{"keep_alive": {_T.keep_alive:g}, "request_headers": {_T.request_headers:g}, "body": {_T.body:g}, \
"body_idle": {_T.body_idle:g}}}:
                 seconds the server waits: for a next request on an idle connection; for
                 a request's line and headers; for a whole import body (408); with no
                 byte of it (408).
  capacity       {{"open_uploads": 64}}: import bodies received at once; one more is
                 answered 429 with Retry-After before its body is read.

Bounds (a development tool, served on a network only behind a TLS proxy; see
"Security notes" in docs/emulator.md): a request's line and headers at most
{MAX_REQUEST_HEAD // 1024} KiB (400); an import body at most limits.max_bytes plus \
{BODY_ALLOWANCE // 1024**2} MiB (413); a form of at
most {MAX_PARTS} parts, {MAX_FIELD_BYTES // 1024} KiB per text field and {MAX_HEADER_BYTES // 1024} KiB of \
headers per part (400).

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
SERVER_MODULES = ("starlette", "uvicorn")  # the import body is parsed by our own .multipart


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
            "install the provider again with its 'emulator' extra, from where you installed it: the wheel "
            "`make dist` built, pip install 'airflow-tables[emulator]' --find-links dist/; a checkout, "
            "pip install -e '.[emulator]' in it; a package index, pip install 'airflow-tables[emulator]' "
            "(docs/install.md, Extras)",
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
    serve(app, sock, args, {"url": url, "port": config.port, "pid": os.getpid()}, config.timeouts)
    return 0


def protocol_with_deadlines(timeouts: Timeouts) -> type:
    """uvicorn's HTTP/1.1 protocol (h11), with a deadline on a request's head and its 400 in the envelope.

    Why: uvicorn times a connection out only once it has answered (``timeout_keep_alive``), so a
    client that connects and sends nothing, or a header line now and then, held its connection
    for ever. The deadline runs while the server waits for a request's line and headers (from
    connecting, or from the first byte of a next request) and while a body it answered without
    reading still drips in; the import body's own deadlines are in :mod:`.api`, which can answer.
    """
    import asyncio

    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class DeadlineProtocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._watch()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._watch()

        def connection_lost(self, exc: Exception | None) -> None:
            self._unwatch()
            super().connection_lost(exc)

        def _watch(self) -> None:
            their, ours = self.conn.their_state, self.conn.our_state
            if their is h11.IDLE or (their is h11.SEND_BODY and ours in (h11.DONE, h11.MUST_CLOSE)):
                if self._deadline is None and not self.transport.is_closing():
                    self._deadline = self.loop.call_later(timeouts.request_headers, self.transport.close)
            else:
                self._unwatch()

        def _unwatch(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def send_400_response(self, msg: str) -> None:
            """The seed's envelope, not uvicorn's plain text, for a request h11 cannot read."""
            body = json.dumps(
                {
                    "Msg": f"the request line or headers are malformed or longer than {MAX_REQUEST_HEAD // 1024} KiB, "
                    "the emulator's limit; send a well-formed HTTP/1.1 request with shorter headers",
                    "ExecTime": 0,
                }
            ).encode()
            head = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
            for event in (
                h11.Response(status_code=400, headers=[*head, (b"connection", b"close")], reason=b"Bad Request"),
                h11.Data(data=body),
                h11.EndOfMessage(),
            ):
                self.transport.write(self.conn.send(event) or b"")
            self.transport.close()

    return DeadlineProtocol


def serve(app, sock: socket.socket, args: argparse.Namespace, ready: dict, timeouts: Timeouts) -> None:
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
        http=protocol_with_deadlines(timeouts),
        timeout_keep_alive=timeouts.keep_alive,  # type: ignore[arg-type]  # uvicorn types it int; a float works
        h11_max_incomplete_event_size=MAX_REQUEST_HEAD,
        ssl_certfile=args.ssl_certfile,
        ssl_keyfile=args.ssl_keyfile,
    )
    Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
