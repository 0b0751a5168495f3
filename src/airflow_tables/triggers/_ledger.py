"""Where ``DataTablesTableRefreshedTrigger`` keeps the last read it reported, so restarts neither repeat nor miss one.

The watch's baseline (:class:`~airflow_tables.model.RefreshWatch`: the completion time of
the last read seen to end) used to live in the triggerer's memory: a refresh made while
the triggerer was down was never reported, because the restarted watch took the table as
it found it for its starting point. It is now kept durably, per watch (connection,
department, table), in what each Airflow minor lets a trigger use:

* **Airflow 3.3**: the watched asset's state store (AIP-103), which the triggerer hands an
  asset watcher's trigger as ``asset_state_store``. It is the store made for this: scoped
  to the asset, cleared with it, readable in the UI and the REST API.
* **Airflow 3.1 and 3.2** (and on 3.3 when one trigger serves several assets, where the
  store has no single asset to scope to): an Airflow Variable named
  ``airflow_tables.refresh.<conn>.<department>.<table>``, through the Task SDK (the
  triggerer forwards ``GetVariable``/``PutVariable`` to the API server). The metadata
  database itself is out of reach: the triggerer runs triggers in a subprocess whose ORM
  access Airflow blocks, and Airflow gives a trigger no serialized state of its own to
  update (its kwargs are written once, by the task or the DAG processor).
* Anywhere else (a trigger run outside a triggerer, a store that cannot be reached): the
  process's memory, with a warning, as before.

**Exactly once.** A refresh is *claimed* in the store before its event is yielded (the new
baseline, a token, ``reported`` false), only the claim's winner yields it, and the claim is
marked reported as soon as the triggerer has taken the event. A restarted watch starts from
the stored baseline, so a refresh made while it was down fires once and one reported before
never again. A claim found unreported and older than :func:`abandoned_after` was left by a
triggerer stopped between claiming and firing: the next watch fires it, if that read is still
the table's last. What is left: a triggerer killed in the instant between taking the event
and committing it to the database loses that event (its claim is marked reported); it never
fires one twice.

**Two triggerers.** Airflow assigns each trigger to one triggerer (a row-locked
``SELECT ... SKIP LOCKED`` on the ``trigger`` table) and another takes it over only once the
first one's heartbeat is older than ``[triggerer] triggerer_health_check_threshold``; a
triggerer that stalls past that and wakes up still runs its copy until its next loop. Neither
store has a compare-and-set, so a claim is made atomic the way Fischer's mutual exclusion
does it with plain reads and writes: read the stored watch and check it is the one this
refresh moves on from (else someone else reported it), write the new watch with a token of
this claim, wait :data:`SETTLE_SECONDS` (longer than any read-then-write takes), read it
back, and yield only if the token is still ours. Of two claims of one refresh, the last
written wins and the other sees it, provided each read-then-write takes less than the settle
time: a triggerer paused longer between its read and its claim fires the refresh again, so under
two triggerers a refresh is reported at least once, and its event names the read
(``completion_time``) for consumers to de-duplicate on.

**Signed and checked.** Any task may write a Variable, and on 3.3 an asset's state store: a
baseline in the future would silence the watch for good, and ``reading: true`` written before
each restart would fire the same refresh again each time. So each stored value is signed with
the connection's API key (:func:`airflow_tables._durable.signature`, over the watch's key and
the value), one that does not verify is taken as absent (the watch starts over from the table
as it finds it, with a warning), and one whose baseline is later than the table's last read
(checked against the service at the first look) is taken as absent too.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

from asgiref.sync import sync_to_async

from airflow_tables.model import RefreshWatch

log = logging.getLogger(__name__)

#: Seconds between writing a claim and reading it back: longer than any read-then-write of the store.
SETTLE_SECONDS = 2.0
#: The version of the stored value's shape (a later release reads this one, and says so if it cannot).
STATE_VERSION = 1
VARIABLE_PREFIX = "airflow_tables.refresh."
#: The stored value's signature field (see "Signed and checked" above).
SIGNATURE = "signature"


def state_key(conn_id: str, project_id: str, card_id: str) -> str:
    """The key of one watch's state: connection, department and table (one asset may be watched twice)."""
    return f"refresh_watch.{conn_id}.{project_id}.{card_id}"


@dataclass(frozen=True)
class Entry:
    """What the store holds for a watch: its :class:`RefreshWatch` and the claim that last moved it.

    ``reported`` is false from a claim until its event has been handed to the triggerer: a
    claim left unreported for :func:`abandoned_after` seconds was made by a triggerer that
    stopped (or was killed) before firing its event, and the next watch fires it.
    """

    watch: RefreshWatch
    claim: str | None = None
    claimed_at: float | None = None
    reported: bool = True

    @property
    def abandoned(self) -> bool:
        if self.reported or self.claimed_at is None:
            return False
        return time.time() - self.claimed_at > abandoned_after()


def abandoned_after() -> float:
    """Seconds after which an unreported claim is taken as abandoned: well past any claim's settle time."""
    return 3 * SETTLE_SECONDS


class Ledger:
    """A watch's stored :class:`Entry`; subclasses say where it is kept."""

    #: Whether the store outlives the process (only then is a claim worth its settle time).
    durable = True

    def __init__(self, key: str, card_id: str, secret: str = "") -> None:
        self.key = key
        self.card_id = card_id
        self._secret = secret

    async def _get(self) -> Any:
        raise NotImplementedError

    async def _set(self, value: dict[str, Any]) -> None:
        raise NotImplementedError

    async def load(self) -> Entry | None:
        """The stored entry; ``None`` before the watch's first look, or when what is stored cannot be read."""
        value = await self._get()
        if not isinstance(value, dict):
            return None
        if not self._verified(value):
            log.warning(
                "the stored state of the watch of %s was not written by airflow-tables with this connection's key "
                "(edited, or written by hand): it is ignored, and the watch starts from the table as it is",
                self.card_id,
            )
            return None
        baseline, reading = value.get("baseline"), value.get("reading", False)
        claim, claimed_at, reported = value.get("claim"), value.get("claimed_at"), value.get("reported", True)
        if (
            not (baseline is None or isinstance(baseline, str))
            or not isinstance(reading, bool)
            or not (claim is None or isinstance(claim, str))
            or not (claimed_at is None or (isinstance(claimed_at, (int, float)) and not isinstance(claimed_at, bool)))
            or not isinstance(reported, bool)
        ):
            log.warning(
                "the stored state of the watch of %s is not one this release reads (%r); starting over",
                self.card_id,
                value,
            )
            return None
        return Entry(RefreshWatch(self.card_id, baseline, reading), claim, claimed_at, reported)

    async def save(self, watch: RefreshWatch, *, claim: str | None = None, reported: bool = True) -> None:
        state: dict[str, Any] = asdict(watch)
        state.pop("card_id")
        state.update(claim=claim, claimed_at=None if claim is None else time.time(), reported=reported)
        value = {**state, "version": STATE_VERSION}
        await self._set({**value, SIGNATURE: self._signature(value)})

    def _signature(self, value: dict[str, Any]) -> str:
        from airflow_tables._durable import signature

        return signature(
            self._secret, "refresh watches", [self.key, {k: v for k, v in value.items() if k != SIGNATURE}]
        )

    def _verified(self, value: dict[str, Any]) -> bool:
        from airflow_tables._durable import verifies

        unsigned = {k: v for k, v in value.items() if k != SIGNATURE}
        return verifies(value.get(SIGNATURE), self._secret, "refresh watches", [self.key, unsigned])

    async def claim(self, before: Entry | None, after: RefreshWatch) -> bool:
        """Record ``after`` as claimed; True when this caller, and no one else, is to report it.

        ``before`` is the stored entry the caller read and found the refresh against: if the
        store holds another by now, someone else moved it on (reported this refresh) and the
        claim is lost without writing anything; so it is while another's claim is in progress.
        The caller reports the refresh, then :meth:`save` s ``after`` (``reported`` true).
        """
        stored = await self.load()
        if stored != before or (stored is not None and not stored.reported and not stored.abandoned):
            return False
        token = uuid.uuid4().hex
        await self.save(after, claim=token, reported=False)
        if not self.durable:
            return True
        await asyncio.sleep(SETTLE_SECONDS)
        stored = await self.load()
        return stored is not None and stored.claim == token and stored.watch == after


class MemoryLedger(Ledger):
    """The process's memory: what a watch has when no durable store can be reached."""

    durable = False

    def __init__(self, key: str, card_id: str, secret: str = "") -> None:
        super().__init__(key, card_id, secret)
        self._value: dict[str, Any] | None = None

    async def _get(self) -> Any:
        return self._value

    async def _set(self, value: dict[str, Any]) -> None:
        self._value = value


class AssetStateLedger(Ledger):
    """One key of the watched asset's state store (Airflow 3.3, in the triggerer)."""

    def __init__(self, key: str, card_id: str, store: Any, secret: str = "") -> None:
        super().__init__(key, card_id, secret)
        self._store = store

    async def _get(self) -> Any:
        if hasattr(self._store, "aget"):
            return await self._store.aget(self.key, default=None)
        return await sync_to_async(self._store.get)(self.key, default=None)  # 3.3.0 and 3.3.1: blocking only

    async def _set(self, value: dict[str, Any]) -> None:
        if hasattr(self._store, "aset"):
            await self._store.aset(self.key, value)
        else:
            await sync_to_async(self._store.set)(self.key, value)


class VariableLedger(Ledger):
    """An Airflow Variable, through the Task SDK (the triggerer forwards the requests to the API server)."""

    async def _get(self) -> Any:
        from airflow.sdk import Variable

        return await sync_to_async(Variable.get)(VARIABLE_PREFIX + self.key, None, True)

    async def _set(self, value: dict[str, Any]) -> None:
        from airflow.sdk import Variable

        description = f"the last read of {self.card_id} that its refresh watch reported (airflow-tables)"
        await sync_to_async(Variable.set)(VARIABLE_PREFIX + self.key, value, description, True)


def in_triggerer() -> bool:
    """Whether this process talks to a triggerer's supervisor (Variables and asset state reach the API server)."""
    from airflow.sdk.execution_time import task_runner

    comms = getattr(task_runner, "SUPERVISOR_COMMS", None)
    return comms is not None and type(comms).__name__ == "TriggerCommsDecoder"


async def opened(trigger: Any, key: str, card_id: str, secret: str) -> tuple[Ledger, Entry | None]:
    """The store a watch keeps its state in (the asset's state store, a Variable, or memory), and what it holds.

    ``secret`` (the connection's API key) signs what the watch stores. Raises what the store
    raises when it cannot be read (the caller tries again at its next look).
    """
    store = getattr(trigger, "asset_state_store", None)
    if store is not None:
        ledger: Ledger = AssetStateLedger(key, card_id, store, secret)
        try:
            return ledger, await ledger.load()
        except ValueError:  # several assets share this trigger: no one asset to scope the state to
            log.info("the watch of %s serves several assets; its state is kept in a Variable", card_id)
    if in_triggerer():
        ledger = VariableLedger(key, card_id, secret)
        return ledger, await ledger.load()
    log.warning("the watch of %s runs outside a triggerer: its baseline is kept in memory only", card_id)
    return MemoryLedger(key, card_id, secret), None
