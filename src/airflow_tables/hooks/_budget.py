"""The credit budget, claimed before each paid request (:func:`credit_claimed`, around the hook's one import).

Where the claim is made: a process that holds Airflow's metadata database (``dag.test()``, the plan
command, a script on the scheduler's machine) writes the ledger itself; a task on a worker (which has
no database in Airflow 3) asks the api-server, through the provider's plugin, signing the request
with the connection's key. Both end in :func:`airflow_tables.budget.claim_in`.

It fails closed: no answer, an answer that is not a verdict, a ledger that cannot be trusted: the
import is not sent (:class:`~airflow_tables.exceptions.DataTablesBudgetUnavailableError`, which
Airflow's retries may try again). A claim whose request then never reached the service, or was
refused by it, is released; one whose import may have landed is kept.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from airflow_tables import budget
from airflow_tables.exceptions import (
    DataTablesBudgetExceededError,
    DataTablesBudgetUnavailableError,
    DataTablesError,
    DataTablesImportUncertainError,
)

if TYPE_CHECKING:
    from airflow_tables.hooks._connection import ConnectionSettings

#: Where the provider's plugin takes claims, under the api-server's root.
CLAIM_PATH = "/datatables/api/budget/claim"
RELEASE_PATH = "/datatables/api/budget/release"
#: The header that carries a claim request's signature (:func:`airflow_tables.budget.request_signature`).
SIGNATURE_HEADER = "X-DataTables-Signature"
TIMEOUT = 10.0


@contextlib.contextmanager
def credit_claimed(settings: ConnectionSettings, conn_id: str, project: str, log: Any) -> Iterator[None]:
    """Claim one credit of ``project``'s budget for the request sent in the block; no budget, no claim.

    Raises :class:`DataTablesBudgetExceededError` (nothing sent) when the day's budget is spent.
    """
    limit = budget.Budgets.from_conf().limit(project)
    if limit is None:
        yield
        return
    claim = _claim(settings, project)
    verdict = _send(CLAIM_PATH, conn_id, settings.api_key, {"claim": claim.to_json(), "limit": limit}, claim, limit)
    if not verdict.granted:
        raise DataTablesBudgetExceededError(None, verdict.refusal(project, claim.day), seen=True)
    log.info("Credit %d of %d of department %s on %s claimed", verdict.spent, verdict.limit, project, claim.day)
    try:
        yield
    except DataTablesImportUncertainError:
        raise  # it may have landed: the credit stays counted
    except DataTablesError:
        _release(conn_id, settings.api_key, claim, log)  # refused, or cut off before its end: nothing was imported
        raise


def _claim(settings: ConnectionSettings, project: str) -> budget.Claim:
    from airflow_tables.assets import service_of

    now = budget.utc_now()
    ti = _task_instance()
    return budget.Claim(
        claim_id=uuid.uuid4().hex,
        service=service_of(settings.base_url),
        project_id=project,
        day=budget.day_of(now),
        dag_id=getattr(ti, "dag_id", None),
        task_id=getattr(ti, "task_id", None),
        run_id=getattr(ti, "run_id", None),
        map_index=getattr(ti, "map_index", None),
        at=now.isoformat(),
    )


def _task_instance() -> Any:
    try:
        from airflow.sdk import get_current_context

        return get_current_context()["ti"]
    except Exception:  # outside a task: the claim names no DAG
        return None


def _release(conn_id: str, secret: str, claim: budget.Claim, log: Any) -> None:
    """Give the credit back; a release that fails leaves it counted (the budget errs on the side of spending less)."""
    try:
        _send(RELEASE_PATH, conn_id, secret, {"claim": claim.to_json()}, claim, None)
    except DataTablesError as err:
        log.warning("The credit claimed for a request that did not import was not given back: %s", err)


def _send(path: str, conn_id: str, secret: str, body: dict, claim: budget.Claim, limit: int | None) -> budget.Verdict:
    """The ledger's answer, from the database here or from the api-server; fails closed."""
    where = f"the credit ledger of department {claim.project_id}"
    try:
        if _holds_the_database():
            return _in_database(secret, claim, limit)
        return _from_api_server(path, conn_id, secret, body)
    except DataTablesError:
        raise
    except budget.LedgerError as err:
        raise DataTablesBudgetUnavailableError(None, f"{where}: {err}", seen=True) from None
    except Exception as err:
        raise DataTablesBudgetUnavailableError(
            None, f"{where} could not be reached ({type(err).__name__}: {err}); nothing was sent", seen=True
        ) from None


def _holds_the_database() -> bool:
    """Whether this process may use Airflow's metadata database: ``dag.test()``'s in-process tasks, the api-server,
    the plan command; not a task on a worker (a supervised process, which asks the api-server)."""
    try:
        from airflow.sdk.execution_time import task_runner
    except ImportError:
        return False
    comms = getattr(task_runner, "SUPERVISOR_COMMS", None)
    if comms is not None:
        return type(comms).__name__ == "InProcessSupervisorComms"
    return os.environ.get("_AIRFLOW_PROCESS_CONTEXT") == "server"


def _in_database(secret: str, claim: budget.Claim, limit: int | None) -> budget.Verdict:
    from airflow.utils.session import create_session

    with create_session() as session:
        if limit is None:
            budget.release_in(session, claim, secret)
            return budget.Verdict(True, 0, 0, {})
        return budget.claim_in(session, claim, limit, secret)


def _from_api_server(path: str, conn_id: str, secret: str, body: dict) -> budget.Verdict:
    import requests

    data = json.dumps({"conn_id": conn_id, **body}, sort_keys=True).encode()
    headers = {"Content-Type": "application/json", SIGNATURE_HEADER: budget.request_signature(secret, data)}
    answer = requests.post(api_server_root() + path, data=data, headers=headers, timeout=TIMEOUT)
    if answer.status_code != 200:
        detail = _detail(answer)
        raise DataTablesBudgetUnavailableError(
            answer.status_code, f"the api-server did not keep the credit ledger ({detail}); nothing was sent", seen=True
        )
    return budget.Verdict.from_json(answer.json())


def _detail(answer: Any) -> str:
    try:
        return str(answer.json().get("detail"))[:300]
    except ValueError:
        return f"HTTP {answer.status_code}"


def api_server_root() -> str:
    """The api-server's root URL, as workers reach it: ``[core] execution_api_server_url`` without
    ``/execution/``, else ``[api] base_url``."""
    from airflow_tables.version_compat import conf

    execution = conf.get("core", "execution_api_server_url", fallback="") or ""
    if execution:
        root = execution.rstrip("/")
        return root[: -len("/execution")] if root.endswith("/execution") else root
    return (conf.get("api", "base_url", fallback="") or "http://localhost:8080").rstrip("/")


__all__ = ["CLAIM_PATH", "RELEASE_PATH", "SIGNATURE_HEADER", "api_server_root", "credit_claimed"]
