"""The api-server's side of the credit budget: claims from workers, written to the day's ledger.

A task on a worker has no metadata database (Airflow 3), so it sends its claim here
(``POST /datatables/api/budget/claim``, and ``/release`` for a request that never imported). There
is no user session to check: the request is signed with the connection's API key
(:func:`airflow_tables.budget.request_signature`), which the api-server reads from the same
connection; a claim signed otherwise is refused (403) and writes nothing. The budget applied is
the smaller of the api-server's ``[datatables] credit_budget`` and the one the worker read, so a
worker configured otherwise cannot spend more than the deployment allows.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from airflow_tables import budget
from airflow_tables.hooks._budget import CLAIM_PATH, RELEASE_PATH, SIGNATURE_HEADER
from airflow_tables.plugins.plugin import URL_PREFIX


def add_routes(app: FastAPI) -> None:
    """The claim and release routes (outside the OpenAPI document: they are for workers, not people)."""

    async def answer(request: Request, *, release: bool) -> JSONResponse:
        body = await request.body()  # the bytes signed: read as sent, not as parsed
        signed = request.headers.get(SIGNATURE_HEADER, "")
        verdict = await run_in_threadpool(decide, body, signed, release=release)  # the database, off the event loop
        return JSONResponse(verdict.to_json())

    @app.post(CLAIM_PATH.removeprefix(URL_PREFIX), include_in_schema=False)
    async def claim(request: Request) -> JSONResponse:
        return await answer(request, release=False)

    @app.post(RELEASE_PATH.removeprefix(URL_PREFIX), include_in_schema=False)
    async def release(request: Request) -> JSONResponse:
        return await answer(request, release=True)


def decide(body: bytes, signature: str, *, release: bool) -> budget.Verdict:
    """A claim (or its release), checked and written; an :class:`HTTPException` saying why not."""
    from airflow.utils.session import create_session

    request = _parsed(body)
    secret, service = _connection(str(request.get("conn_id") or ""))
    if not budget.request_verifies(secret, body, signature):
        raise HTTPException(403, "the claim is not signed with the connection's key")
    try:
        claim = budget.Claim.from_json(request.get("claim"))
    except ValueError as err:
        raise HTTPException(400, str(err)) from None
    # The ledger is the service's as the api-server's connection names it (what the page counts): a
    # worker may reach the same service by another address (a proxy), under the same key.
    claim = replace(claim, service=service)
    with create_session() as session:
        try:
            if release:
                budget.release_in(session, claim, secret)
                return budget.Verdict(True, 0, 0, {})
            limit = _limit(claim.project_id, request.get("limit"))
            return budget.claim_in(session, claim, limit, secret)
        except budget.LedgerError as err:
            raise HTTPException(409, str(err)) from None


def _parsed(body: bytes) -> dict[str, Any]:
    try:
        request = json.loads(body)
    except ValueError:
        raise HTTPException(400, "the body is not JSON") from None
    if not isinstance(request, dict):
        raise HTTPException(400, "the body is not a JSON object")
    return request


def _connection(conn_id: str) -> tuple[str, str]:
    """The connection's key and service, as the hook reads them; 404 when the api-server cannot read it."""
    from airflow_tables.assets import service_of
    from airflow_tables.hooks.tables import DataTablesHook

    try:
        settings = DataTablesHook(conn_id).settings
    except Exception:
        raise HTTPException(404, f"the api-server cannot read the datatables connection {conn_id!r}") from None
    return settings.api_key, service_of(settings.base_url)


def _limit(project_id: str, asked: Any) -> int:
    """The smaller of the deployment's budget and the worker's; a department neither budgets is an error."""
    mine = budget.Budgets.from_conf().limit(project_id)
    theirs = asked if isinstance(asked, int) and not isinstance(asked, bool) and asked >= 0 else None
    found = [limit for limit in (mine, theirs) if limit is not None]
    if not found:
        raise HTTPException(400, f"department {project_id} has no credit budget")
    return min(found)


__all__ = ["add_routes", "decide"]
