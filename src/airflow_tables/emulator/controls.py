"""``/_emulator/...``: switches for tests, mounted only with ``--test-controls`` and needing no key.

* ``PUT /_emulator/faults`` ``{"rules": [...], "seed": 123}`` / ``DELETE /_emulator/faults``
* ``PUT /_emulator/settings`` ``{"processing_delay": s, "fail_readings": n, "failure_reason": text,
  "lose_rows": n, "lock_while_reading": b, "replacement_card_id": b}`` / ``DELETE`` (back to start-up values)
* ``GET /_emulator/stats`` / ``POST /_emulator/stats/reset``
* ``PUT /_emulator/connectors/{card_id}`` ``{"status": "active" | "paused"}``

They live outside ``/v1.0`` so that faults never hit them and a client under
test can never reach them by accident.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from starlette.routing import Route

from airflow_tables.emulator.api import endpoint, summary
from airflow_tables.emulator.config import CONNECTOR_STATUSES
from airflow_tables.emulator.errors import ApiError
from airflow_tables.emulator.faults import FaultRule

if TYPE_CHECKING:
    from starlette.requests import Request

    from airflow_tables.emulator.api import Api
    from airflow_tables.emulator.faults import Faults
    from airflow_tables.emulator.reader import ReadingControls


async def _json_body(request: Request) -> dict:
    try:
        data = json.loads(await request.body() or b"{}")
    except ValueError as err:
        raise ApiError(400, f"the body is not JSON: {err}") from err
    if not isinstance(data, dict):
        raise ApiError(400, "the body must be a JSON object")
    return data


class Controls:
    """The test-control endpoints over the API's state, the reading settings and the fault rules."""

    def __init__(self, api: Api, reading: ReadingControls, faults: Faults) -> None:
        self.api = api
        self.reading = reading
        self.faults = faults

    def routes(self) -> list[Route]:
        return [
            Route("/_emulator/faults", endpoint(self.set_faults), methods=["PUT"]),
            Route("/_emulator/faults", endpoint(self.clear_faults), methods=["DELETE"]),
            Route("/_emulator/settings", endpoint(self.set_settings), methods=["PUT"]),
            Route("/_emulator/settings", endpoint(self.reset_settings), methods=["DELETE"]),
            Route("/_emulator/stats", endpoint(self.stats), methods=["GET"]),
            Route("/_emulator/stats/reset", endpoint(self.reset_stats), methods=["POST"]),
            Route("/_emulator/connectors/{card_id}", endpoint(self.set_connector), methods=["PUT"]),
        ]

    async def set_faults(self, request: Request) -> dict:
        data = await _json_body(request)
        rules = data.get("rules", [])
        if not isinstance(rules, list):
            raise ApiError(400, "rules must be a list of fault rules")
        seed = data.get("seed")
        if seed is not None and not isinstance(seed, int):
            raise ApiError(400, "seed must be a whole number")
        self.faults.replace([FaultRule.parse(r, f"rules[{i}]") for i, r in enumerate(rules)], seed)
        return {"rules": len(rules)}

    async def clear_faults(self, request: Request) -> dict:
        self.faults.replace([], None)
        return {"rules": 0}

    async def set_settings(self, request: Request) -> dict:
        data = await _json_body(request)
        flags = ("lock_while_reading", "replacement_card_id")
        counts = ("fail_readings", "lose_rows")
        known = ("processing_delay", *counts, "failure_reason", *flags)
        if extra := sorted(set(data) - set(known)):
            raise ApiError(400, f"unknown setting(s) {', '.join(extra)}; settings: {', '.join(known)}")
        for name in flags:
            if data.get(name) is not None and not isinstance(data[name], bool):
                raise ApiError(400, f"{name} must be true or false, not {data[name]!r}")
        for name in counts:
            value = data.get(name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ApiError(400, f"{name} must be a whole number, 0 or more, not {value!r}")
        delay, reason = data.get("processing_delay"), data.get("failure_reason")
        if delay is not None and (isinstance(delay, bool) or not isinstance(delay, (int, float)) or delay < 0):
            raise ApiError(400, f"processing_delay must be a number of seconds, 0 or more, not {delay!r}")
        if reason is not None and (not isinstance(reason, str) or not reason.strip()):
            raise ApiError(400, f"failure_reason must be a non-empty text, not {reason!r}")
        self.reading.update(
            processing_delay=delay,
            fail_readings=data.get("fail_readings"),
            failure_reason=reason,
            lose_rows=data.get("lose_rows"),
            lock_while_reading=data.get("lock_while_reading"),
            replacement_card_id=data.get("replacement_card_id"),
        )
        return self.reading.as_dict()

    async def reset_settings(self, request: Request) -> dict:
        self.reading.reset()
        return self.reading.as_dict()

    async def stats(self, request: Request) -> dict:
        return {
            "requests": list(self.faults.requests),
            "credits": self.api.store.credits(),
            "imports_accepted": self.api.imports_accepted,
        }

    async def reset_stats(self, request: Request) -> dict:
        self.faults.requests.clear()
        self.api.imports_accepted = 0
        return {}

    async def set_connector(self, request: Request) -> dict:
        status = (await _json_body(request)).get("status")
        if status not in CONNECTOR_STATUSES:
            raise ApiError(400, f"status must be 'active' or 'paused', not {status!r}")
        return summary(self.api.store.set_connector_status(request.path_params["card_id"], status))
