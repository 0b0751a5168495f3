"""Credit budgets: at most so many credits per department per UTC day, claimed before each paid request.

``[datatables] credit_budget`` is an integer (every department) or a JSON object
(``{"PRJ-1": 10, "*": 50}``; ``*`` for the departments not named). A department without a
budget claims nothing.

The ledger of a department's day is one Airflow Variable (``airflow_tables.budget.<service>.<department>.<day>``)
holding the day's claims, each naming the DAG, run and task that made it, signed with the
connection's key. A claim is written by compare-and-swap (``UPDATE ... WHERE val = <what was
read>``, or an ``INSERT`` that the key's uniqueness lets only one racer make), on every database
Airflow supports: two claims racing at the edge of the budget are taken one after the other, and
the second counts the first. Nothing else writes it, so its count of claims is the day's spending
(what the Data Tables page shows).

Who writes it: Airflow 3's workers have no metadata database, so a task asks the api-server,
through the provider's plugin (:mod:`airflow_tables.plugins.budget`), with the request signed with
the connection's key (:func:`request_signature`); a process that holds the database (``dag.test()``,
``airflow-tables plan``, the api-server itself) writes it directly. Either way the same function,
:func:`claim_in`, decides. It fails closed: a ledger that cannot be read or written, or whose
signature does not verify, sends nothing.

Everything here is I/O-free except the functions that take a ``session``.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_tables._durable import SIGNATURE, signature, verifies

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

#: Variables holding the ledgers: one per service, department and UTC day.
LEDGER_PREFIX = "airflow_tables.budget."
#: What a ledger's signature and a claim request's signature are for (an HMAC of one is never the other's).
LEDGER_PURPOSE = "credit-ledger"
REQUEST_PURPOSE = "credit-claim"
#: How often a claim that lost a race reads the ledger again before it gives up (failing closed).
CAS_ATTEMPTS = 200


def utc_now() -> datetime:
    """The clock budgets count days by (UTC). Tests replace it to cross midnight."""
    return datetime.now(UTC)


def day_of(moment: datetime) -> str:
    """The UTC day a moment falls in, ``YYYY-MM-DD``: a budget's period."""
    return moment.astimezone(UTC).date().isoformat()


def next_day(moment: datetime) -> datetime:
    """The UTC midnight after ``moment``: when a spent budget is whole again."""
    midnight = moment.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return midnight + timedelta(days=1)


@dataclass(frozen=True)
class Budgets:
    """``[datatables] credit_budget`` as read: credits per department per UTC day."""

    per_department: dict[str, int] = field(default_factory=dict)
    default: int | None = None

    def limit(self, project_id: str) -> int | None:
        """The department's budget; ``None``: it has none (nothing is claimed)."""
        return self.per_department.get(project_id, self.default)

    @property
    def any(self) -> bool:
        return self.default is not None or bool(self.per_department)

    @classmethod
    def parse(cls, text: str | None) -> Budgets:
        """``""`` (none), ``"10"``, or ``'{"PRJ-1": 10, "*": 50}'``; anything else is a :class:`ValueError`."""
        text = (text or "").strip()
        if not text:
            return cls()
        where = "[datatables] credit_budget"
        try:
            value = json.loads(text)
        except ValueError:
            raise ValueError(f"{where} is {text!r}: give a whole number, or a JSON object of them") from None
        if isinstance(value, dict):
            found = {str(name): _credits(count, f"{where}[{name!r}]") for name, count in value.items()}
            default = found.pop("*", None)
            return cls(found, default)
        return cls({}, _credits(value, where))

    @classmethod
    def from_conf(cls) -> Budgets:
        from airflow_tables.version_compat import conf

        return cls.parse(conf.get("datatables", "credit_budget", fallback=""))


def _credits(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where} is {value!r}: a budget is a whole number of credits, 0 or more")
    return value


@dataclass(frozen=True)
class Claim:
    """One paid request's credit, claimed before it is sent: by whom (the task instance), where, which day."""

    claim_id: str
    service: str
    project_id: str
    day: str
    dag_id: str | None = None
    task_id: str | None = None
    run_id: str | None = None
    map_index: int | None = None
    at: str = ""

    @property
    def by(self) -> str:
        """Who spent it, as the refusal lists spenders: ``dag.task``, or what ran outside a DAG."""
        return f"{self.dag_id}.{self.task_id}" if self.dag_id else "outside a DAG run"

    @property
    def ledger_key(self) -> str:
        return ledger_key(self.service, self.project_id, self.day)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> Claim:
        if not isinstance(data, dict) or not all(isinstance(data.get(k), str) for k in ("claim_id", "service", "day")):
            raise ValueError(f"not a credit claim: {str(data)[:200]}")
        known: dict[str, Any] = {name: data.get(name) for name in cls.__dataclass_fields__}
        return cls(**known)


def ledger_key(service: str, project_id: str, day: str) -> str:
    """The Variable of a department's day; the service as a short hash (a URL is no Variable name)."""
    digest = hashlib.sha256(service.encode()).hexdigest()[:12]
    return f"{LEDGER_PREFIX}{digest}.{project_id}.{day}"


@dataclass(frozen=True)
class Verdict:
    """A claim's answer: granted or not, the budget, and what the day's ledger holds (after it, when granted)."""

    granted: bool
    limit: int
    spent: int
    by: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> Verdict:
        if not isinstance(data, dict) or not isinstance(data.get("granted"), bool):
            raise ValueError(f"not a budget verdict: {str(data)[:200]}")
        return cls(data["granted"], int(data["limit"]), int(data["spent"]), dict(data.get("by") or {}))

    def refusal(self, project_id: str, day: str) -> str:
        """Why nothing was sent, for a person: the budget, what was spent that day and by which tasks."""
        spenders = ", ".join(f"{name} ({count})" for name, count in sorted(self.by.items(), key=lambda kv: -kv[1]))
        return (
            f"the credit budget of department {project_id} is {self.limit} a day (UTC, [datatables] credit_budget); "
            f"{self.spent} spent on {day}" + (f" by {spenders}" if spenders else "") + "; nothing was sent. "
            f"It is whole again at {next_day(datetime.fromisoformat(day).replace(tzinfo=UTC)).isoformat()}"
        )


class LedgerError(Exception):
    """The ledger could not be read or trusted: the claim fails closed (nothing is sent)."""


# -- the ledger, in the metadata database ---------------------------------------------------------------------------


def claim_in(session: Session, claim: Claim, limit: int, secret: str) -> Verdict:
    """Add ``claim`` to its day's ledger if the day's claims are fewer than ``limit``; say what was decided.

    A claim already in the ledger (a retried request whose answer was lost) is granted again,
    not counted twice. Raises :class:`LedgerError` when the ledger is not ours or the races did
    not settle.
    """
    for _ in range(CAS_ATTEMPTS):
        read = _read(session, claim.ledger_key, secret)
        claims = read.claims
        if any(c.claim_id == claim.claim_id for c in claims):
            return _verdict(True, limit, claims)
        if len(claims) >= limit:
            session.rollback()
            return _verdict(False, limit, claims)
        if _write(session, claim.ledger_key, read.raw, [*claims, claim], secret, claim):
            return _verdict(True, limit, [*claims, claim])
        time.sleep(0.001)
    raise LedgerError(f"the ledger {claim.ledger_key} changed {CAS_ATTEMPTS} times while this claim was made")


def release_in(session: Session, claim: Claim, secret: str) -> bool:
    """Take ``claim`` back out of its ledger (its request never reached the service); whether it was there."""
    for _ in range(CAS_ATTEMPTS):
        read = _read(session, claim.ledger_key, secret)
        kept = [c for c in read.claims if c.claim_id != claim.claim_id]
        if len(kept) == len(read.claims):
            session.rollback()
            return False
        if _write(session, claim.ledger_key, read.raw, kept, secret, claim):
            return True
        time.sleep(0.001)
    raise LedgerError(f"the ledger {claim.ledger_key} changed {CAS_ATTEMPTS} times while a claim was released")


def spent_in(session: Session, service: str, project_id: str, day: str, secret: str) -> list[Claim]:
    """The day's claims of a department (what the Data Tables page counts)."""
    return _read(session, ledger_key(service, project_id, day), secret).claims


@dataclass(frozen=True)
class _Read:
    raw: str | None  # the column as stored (encrypted), compared by the write; None: no ledger yet
    claims: list[Claim]


def _read(session: Session, key: str, secret: str) -> _Read:
    from airflow.models.variable import Variable
    from sqlalchemy import select

    row = session.scalar(select(Variable).where(Variable.key == key))
    if row is None:
        return _Read(None, [])
    try:
        stored = json.loads(row.val)
        body = stored["claims"]
        signed = stored.get(SIGNATURE)
    except (ValueError, TypeError, KeyError):
        raise LedgerError(f"the Variable {key} is not a credit ledger airflow-tables wrote") from None
    if not verifies(signed, secret, LEDGER_PURPOSE, [key, body]):
        raise LedgerError(
            f"the Variable {key} was not written by airflow-tables with this connection's key (changed by hand, or "
            "another key): the budget cannot be counted, so nothing is sent. Delete it only if you know the day's "
            "spending, as deleting it starts the day's count again"
        )
    try:
        return _Read(row._val, [Claim.from_json(each) for each in body])
    except ValueError as err:
        raise LedgerError(f"the Variable {key} holds {err}") from None


def _write(session: Session, key: str, raw: str | None, claims: list[Claim], secret: str, claim: Claim) -> bool:
    """Compare-and-swap the ledger: whether this write won (the ledger was still ``raw``)."""
    from airflow.models.variable import Variable
    from sqlalchemy import update
    from sqlalchemy.exc import IntegrityError, OperationalError

    body = [c.to_json() for c in claims]
    value = json.dumps({"claims": body, SIGNATURE: signature(secret, LEDGER_PURPOSE, [key, body])})
    described = f"Credits spent in department {claim.project_id} on {claim.day} (UTC), by airflow-tables' budget"
    fresh = Variable(key=key, val=value, description=described)
    try:
        if raw is None:
            session.add(fresh)
            session.commit()
            return True
        changed = session.execute(
            update(Variable)
            .where(Variable.key == key, Variable._val == raw)
            .values(_val=fresh._val, is_encrypted=fresh.is_encrypted)
            .execution_options(synchronize_session=False)
        )
        session.commit()
        return bool(getattr(changed, "rowcount", 0) == 1)
    except IntegrityError:  # another claim made the day's ledger first: read it
        session.rollback()
        return False
    except OperationalError as err:  # SQLite's "database is locked": another writer holds it; read it again
        session.rollback()
        if "locked" not in str(err).lower():
            raise
        return False


def _verdict(granted: bool, limit: int, claims: list[Claim]) -> Verdict:
    return Verdict(granted, limit, len(claims), dict(Counter(c.by for c in claims)))


# -- a claim sent to the api-server --------------------------------------------------------------------------------


def request_signature(secret: str, body: bytes) -> str:
    """The signature of a claim request's body, made with the connection's key: the api-server checks it."""
    return signature(secret, REQUEST_PURPOSE, body.decode())


def request_verifies(secret: str, body: bytes, given: str) -> bool:
    return verifies(given, secret, REQUEST_PURPOSE, body.decode())


__all__ = [
    "Budgets",
    "Claim",
    "LedgerError",
    "Verdict",
    "claim_in",
    "day_of",
    "ledger_key",
    "next_day",
    "release_in",
    "request_signature",
    "request_verifies",
    "spent_in",
    "utc_now",
]
