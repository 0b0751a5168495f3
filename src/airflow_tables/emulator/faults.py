"""Fault injection and the request log, for proving a client's retry and no-double-import rules.

Mounted only when the server runs with ``--test-controls``; then every ``/v1.0``
request passes through :class:`FaultMiddleware`, which logs it and applies the
first rule that matches and fires:

* ``latency``: wait that many seconds before handling (may be combined with the rest);
* ``drop: "before"``: close the TCP connection without handling the request;
* ``status``: answer that status without handling (``retry_after`` adds ``Retry-After``);
* ``drop: "after"``: handle the request fully (the import happens, the credit is
  spent), then close the connection without sending the response. This is the case
  a client must not answer by sending the file again.

A dropped connection gets no HTTP response at all: the socket of uvicorn's
connection is aborted, so ``http.client`` sees ``RemoteDisconnected`` or a reset,
never a status line.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_tables.emulator.api import json_response

if TYPE_CHECKING:
    from starlette.responses import Response
from airflow_tables.emulator.errors import ApiError

METHODS = frozenset({"GET", "POST", "DELETE", "PUT", "HEAD"})
REASONS = {429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}
LOG_SIZE = 10_000


@dataclass
class FaultRule:
    """One rule of ``PUT /_emulator/faults``; ``applied`` counts the requests it was applied to."""

    methods: frozenset[str]
    path: re.Pattern
    status: int | None = None
    retry_after: float | None = None
    latency: float = 0.0
    drop: str | None = None
    probability: float = 1.0
    times: int | None = None
    applied: int = 0

    @classmethod
    def parse(cls, data: object, where: str) -> FaultRule:
        """Build a rule from JSON, refusing anything unclear with 400."""
        if not isinstance(data, dict):
            raise ApiError(400, f"{where} must be an object")
        allowed = {"methods", "path", "status", "retry_after", "latency", "drop", "probability", "times"}
        if extra := sorted(set(data) - allowed):
            raise ApiError(400, f"{where}: unknown field(s) {', '.join(extra)}; allowed: {', '.join(sorted(allowed))}")
        methods = data.get("methods", sorted(METHODS))
        if not isinstance(methods, list) or not methods or not {str(m).upper() for m in methods} <= METHODS:
            raise ApiError(400, f"{where}.methods must be a non-empty list of {', '.join(sorted(METHODS))}")
        try:
            path = re.compile(data.get("path", r"^/v1\.0/"))
        except (re.error, TypeError) as err:
            raise ApiError(400, f"{where}.path is not a regular expression: {err}") from err
        status = data.get("status")
        if status is not None and not (isinstance(status, int) and 400 <= status <= 599):
            raise ApiError(400, f"{where}.status must be an HTTP error status (400-599), not {status!r}")
        drop = data.get("drop")
        if drop not in (None, "before", "after"):
            raise ApiError(400, f"{where}.drop must be 'before' or 'after', not {drop!r}")
        if drop and status:
            raise ApiError(400, f"{where}: a rule either drops the connection or answers a status, not both")
        rule = cls(
            methods=frozenset(str(m).upper() for m in methods),
            path=path,
            status=status,
            retry_after=_number(data, "retry_after", where, None),
            latency=_amount(data, "latency", where, 0.0),
            drop=drop,
            probability=_amount(data, "probability", where, 1.0),
            times=data.get("times"),
        )
        if rule.probability > 1:
            raise ApiError(400, f"{where}.probability must be between 0 and 1")
        if rule.times is not None and not (isinstance(rule.times, int) and rule.times >= 0):
            raise ApiError(400, f"{where}.times must be a whole number of requests")
        if not (rule.status or rule.drop or rule.latency):
            raise ApiError(400, f"{where} does nothing: give status, drop or latency")
        return rule

    def label(self) -> str:
        """How the request log names what was done: ``latency:0.5+status:503``, ``drop:after``..."""
        parts = [f"latency:{self.latency:g}"] if self.latency else []
        if self.status:
            parts.append(f"status:{self.status}")
        if self.drop:
            parts.append(f"drop:{self.drop}")
        return "+".join(parts)


def _number(data: dict, name: str, where: str, default: float | None) -> float | None:
    value = data.get(name, default)
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
        raise ApiError(400, f"{where}.{name} must be a number of 0 or more, not {value!r}")
    return value


def _amount(data: dict, name: str, where: str, default: float) -> float:
    value = _number(data, name, where, default)
    return default if value is None else value


class Faults:
    """The active rules and the request log; shared by the middleware and the control endpoints."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.rules: list[FaultRule] = []
        self._random = random.Random()
        self.requests: deque[dict] = deque(maxlen=LOG_SIZE)

    def replace(self, rules: list[FaultRule], seed: int | None) -> None:
        with self._lock:
            self.rules = rules
            self._random = random.Random(seed)

    def pick(self, method: str, path: str) -> FaultRule | None:
        """The first rule that matches the request, has uses left and fires by its probability."""
        with self._lock:
            for rule in self.rules:
                if method not in rule.methods or not rule.path.search(path):
                    continue
                if rule.times is not None and rule.applied >= rule.times:
                    continue
                if rule.probability < 1 and self._random.random() >= rule.probability:
                    continue
                rule.applied += 1
                return rule
        return None


class FaultMiddleware:
    """ASGI middleware: log every ``/v1.0`` request and apply the fault rules to it."""

    def __init__(self, app, faults: Faults) -> None:
        self.app = app
        self.faults = faults

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1.0"):
            await self.app(scope, receive, send)
            return
        rule = self.faults.pick(scope["method"], scope["path"])
        entry = {"method": scope["method"], "path": scope["path"], "status": None, "fault": rule and rule.label()}
        self.faults.requests.append(entry)
        if rule is None:
            await self.app(scope, receive, _recording(send, entry))
            return
        if rule.latency:
            await asyncio.sleep(rule.latency)
        if rule.drop == "before":
            await drop_connection(send)
        elif rule.status:
            await _drain(receive)
            await _fault_response(rule, entry)(scope, receive, send)
        elif rule.drop == "after":
            await self.app(scope, receive, _swallow)
            await drop_connection(send)
        else:
            await self.app(scope, receive, _recording(send, entry))


def _fault_response(rule: FaultRule, entry: dict) -> Response:
    if rule.status is None:
        raise ValueError("a fault rule without a status drops the connection; it has no response")
    headers = {}
    if rule.status == 429 or rule.retry_after is not None:
        headers["Retry-After"] = str(math.ceil(rule.retry_after if rule.retry_after is not None else 1))
    reason = REASONS.get(rule.status, "error")
    entry["status"] = rule.status
    return json_response(
        time.perf_counter(),
        rule.status,
        {"Msg": f"injected fault: {rule.status} {reason} (emulator test control)"},
        headers,
    )


def _recording(send, entry: dict):
    async def record(message) -> None:
        if message["type"] == "http.response.start":
            entry["status"] = message["status"]
        await send(message)

    return record


async def _swallow(message) -> None:
    """The response of a request whose connection is dropped afterwards goes nowhere."""


async def _drain(receive) -> None:
    """Read the request body, so a fault answer reaches a client that is still uploading."""
    while True:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body"):
            return


async def drop_connection(send) -> None:
    """Close the client's connection at once, with no response.

    ASGI has no message for this; uvicorn's ``send`` is a method of the connection's
    request-response cycle, which holds the transport. Once it is aborted uvicorn
    marks the cycle disconnected and sends nothing more.
    """
    cycle = getattr(send, "__self__", None)
    transport = getattr(cycle, "transport", None)
    if transport is None:
        raise RuntimeError("dropping a connection needs uvicorn's HTTP protocol")
    transport.abort()
    for _ in range(200):  # connection_lost runs on a later loop iteration
        if getattr(cycle, "disconnected", True):
            return
        await asyncio.sleep(0.001)
