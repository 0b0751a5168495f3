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

**Exactly once.** A refresh is *claimed* in the store before its event is yielded, and
only the claim's winner yields it; a restarted watch starts from the stored baseline, so
a refresh made while it was down fires once, and one reported before never again. The
one window left is the few milliseconds between a claim and the triggerer's commit of the
event: a triggerer killed there loses that event (never doubles it).

**Two triggerers.** Airflow assigns each trigger to one triggerer (a row-locked
``SELECT ... SKIP LOCKED`` on the ``trigger`` table) and another takes it over only once the
first one's heartbeat is older than ``[triggerer] triggerer_health_check_threshold``; a
triggerer that stalls past that and wakes up still runs its copy until its next loop. Neither
store has a compare-and-set, so a claim is made atomic the way Fischer's mutual exclusion
does it with plain reads and writes: read the stored watch and check it is the one this
refresh moves on from (else someone else reported it), write the new watch with a token of
this claim, wait :data:`SETTLE_SECONDS` (longer than any read-then-write takes), read it
back, and yield only if the token is still ours. Of two claims of one refresh, the last
written wins and the other sees it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import asdict
from typing import Any

from asgiref.sync import sync_to_async

from airflow_tables.model import RefreshWatch

log = logging.getLogger(__name__)

#: Seconds between writing a claim and reading it back: longer than any read-then-write of the store.
SETTLE_SECONDS = 2.0
#: The version of the stored value's shape (a later release reads this one, and says so if it cannot).
STATE_VERSION = 1
VARIABLE_PREFIX = "airflow_tables.refresh."


def state_key(conn_id: str, project_id: str, card_id: str) -> str:
    """The key of one watch's state: connection, department and table (one asset may be watched twice)."""
    return f"refresh_watch.{conn_id}.{project_id}.{card_id}"


class Ledger:
    """A watch's stored :class:`RefreshWatch` with a claim token; subclasses say where it is kept."""

    #: Whether the store outlives the process (only then is a claim worth its settle time).
    durable = True

    def __init__(self, key: str, card_id: str) -> None:
        self.key = key
        self.card_id = card_id

    async def _get(self) -> Any:
        raise NotImplementedError

    async def _set(self, value: dict[str, Any]) -> None:
        raise NotImplementedError

    async def load(self) -> tuple[RefreshWatch | None, str | None]:
        """The stored watch (``None`` before the first look or when unreadable) and its claim token."""
        value = await self._get()
        if not isinstance(value, dict):
            return None, None
        baseline, reading = value.get("baseline"), value.get("reading", False)
        if not (baseline is None or isinstance(baseline, str)) or not isinstance(reading, bool):
            log.warning(
                "the stored state of the watch of %s is not one this release reads (%r); starting over",
                self.card_id,
                value,
            )
            return None, None
        claim = value.get("claim")
        return RefreshWatch(self.card_id, baseline, reading), claim if isinstance(claim, str) else None

    async def save(self, watch: RefreshWatch, claim: str | None = None) -> None:
        state = asdict(watch)
        state.pop("card_id")
        await self._set({**state, "claim": claim, "version": STATE_VERSION})

    async def claim(self, before: RefreshWatch | None, after: RefreshWatch) -> bool:
        """Record ``after`` as reported; True when this caller, and no one else, is to report it.

        ``before`` is the stored watch the caller read and found the refresh against: if the
        store holds another by now, someone else moved it on (reported this refresh) and the
        claim is lost without writing anything.
        """
        stored, _ = await self.load()
        if stored != before:
            return False
        token = uuid.uuid4().hex
        await self.save(after, token)
        if not self.durable:
            return True
        await asyncio.sleep(SETTLE_SECONDS)
        stored, winner = await self.load()
        return winner == token and stored == after


class MemoryLedger(Ledger):
    """The process's memory: what a watch has when no durable store can be reached."""

    durable = False

    def __init__(self, key: str, card_id: str) -> None:
        super().__init__(key, card_id)
        self._value: dict[str, Any] | None = None

    async def _get(self) -> Any:
        return self._value

    async def _set(self, value: dict[str, Any]) -> None:
        self._value = value


class AssetStateLedger(Ledger):
    """One key of the watched asset's state store (Airflow 3.3, in the triggerer)."""

    def __init__(self, key: str, card_id: str, store: Any) -> None:
        super().__init__(key, card_id)
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


async def opened(trigger: Any, key: str, card_id: str) -> tuple[Ledger, RefreshWatch | None]:
    """The store a watch keeps its state in (the asset's state store, a Variable, or memory), and what it holds.

    Raises what the store raises when it cannot be read (the caller tries again at its next look).
    """
    store = getattr(trigger, "asset_state_store", None)
    if store is not None:
        ledger: Ledger = AssetStateLedger(key, card_id, store)
        try:
            return ledger, (await ledger.load())[0]
        except ValueError:  # several assets share this trigger: no one asset to scope the state to
            log.info("the watch of %s serves several assets; its state is kept in a Variable", card_id)
    if in_triggerer():
        ledger = VariableLedger(key, card_id)
        return ledger, (await ledger.load())[0]
    log.warning("the watch of %s runs outside a triggerer: its baseline is kept in memory only", card_id)
    return MemoryLedger(key, card_id), None
