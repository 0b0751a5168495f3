"""State that survives a task's retries: signed notes, and deleting them once no try can read them.

Airflow 3.3's ``ResumableJobMixin`` keeps the CardID of an accepted import in the task
state store, so a retried task re-attaches to the table instead of paying for a second
import. Below 3.3 there is no task state store, and the stand-in of
``airflow.providers.common.compat`` simply imports again on every try, which would
spend a credit per retry. Here, below 3.3, the same decisions are taken over an Airflow
Variable keyed by the task instance (Airflow clears a task's XComs when it retries, so
XCom cannot hold it): :class:`~airflow_tables._durable_job.DurableJobMixin`, which
:mod:`airflow_tables.version_compat` chooses below 3.3 and this module re-exports.
:func:`durable_store` gives the operators that same store for their own notes (an import
whose answer was lost), and :func:`forgotten_when_ended` deletes those Variables once no
later try can read them. This module imports :mod:`~airflow_tables.version_compat` (for the
exceptions a try ends with); the mixin lives in its own module, which imports neither, so that
``version_compat`` can choose it without an import cycle. Both sit below the operators, the
sensor and ``utils`` that use them.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import logging
from collections.abc import Collection, Iterator
from typing import TYPE_CHECKING, Any

from airflow_tables._durable_job import DurableJobMixin, _VariableStore

if TYPE_CHECKING:
    from airflow.sdk import Context


def durable_store(context: Context, secret: str, log: Any = None) -> SignedStore:
    """The task instance's store that outlives its tries (the task state store, or Variables below 3.3), signed.

    ``secret`` is the connection's API key: what the provider reads back was written by a task
    that held it, for this task instance (see :class:`SignedStore`).
    """
    store = context.get("task_state_store")
    return SignedStore(store if store is not None else _VariableStore(context), secret, _scope(context), log)


#: Variables of notes written by a task's own code (``import_csv`` in a ``@task``), by task instance
#: prefix: deleted by the provider's listener when that task instance ends (plugins/listener.py).
_KEPT_UNTIL_THE_END: dict[str, set[str]] = {}


def kept_until_the_end(context: Context, key: str) -> None:
    """Have the note ``key`` of the running task instance deleted when it ends (where it is a Variable)."""
    if context.get("task_state_store") is None:  # the task state store's rows expire with their run
        _KEPT_UNTIL_THE_END.setdefault(_VariableStore(context).prefix, set()).add(key)


def task_instance_ended(ti: Any, *, final: bool) -> None:
    """A try of ``ti`` ended: once no later try can read them (``final``), delete the notes this process kept."""
    prefix = f"airflow_tables.state.{ti.dag_id}.{ti.run_id}.{ti.task_id}.{ti.map_index}."
    keys = _KEPT_UNTIL_THE_END.pop(prefix, set())
    if final and keys:
        _forget_variables(_VariableStore(None, prefix), sorted(keys))


def shared_records(prefix: str, secret: str, description: str, log: Any = None) -> SignedStore:
    """Signed Variables named ``prefix + key`` that belong to no task instance (a table's ``if_older`` record)."""
    store = _VariableStore(None, prefix)
    store.description = description
    return SignedStore(store, secret, prefix, log, owner="this table")


def _scope(context: Context) -> str:
    ti = context["ti"]
    return f"{ti.dag_id}\0{ti.run_id}\0{ti.task_id}\0{ti.map_index}"


#: What a signed value is stored as: ``{"value": ..., SIGNATURE: "<hex>"}``.
SIGNATURE = "airflow_tables_hmac_sha256"


def signature(secret: str, purpose: str, message: Any) -> str:
    """HMAC-SHA256 of ``message`` (canonical JSON) under a key derived from ``secret`` for ``purpose`` (hex).

    ``secret`` is a connection's API key: a DAG author or a Variable writer who does not hold it
    cannot sign. Each ``purpose`` (task notes, upload records) has its own key, so a signature
    made for one is no signature for the other.
    """
    key = hmac.new(f"airflow-tables {purpose}".encode(), secret.encode(), hashlib.sha256).digest()
    text = json.dumps(message, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hmac.new(key, text, hashlib.sha256).hexdigest()


def verifies(given: object, secret: str, purpose: str, message: Any) -> bool:
    """Whether ``given`` is :func:`signature` of ``message`` (compared in constant time); a non-string never is."""
    return isinstance(given, str) and hmac.compare_digest(given, signature(secret, purpose, message))


class SignedStore:
    """A durable store whose values carry an HMAC bound to the task instance, the key and a secret.

    Below Airflow 3.3 the store is made of Variables with predictable names, which any DAG author
    (and any UI user allowed to edit Variables) can write: a forged job or note could make an
    import return another team's table, or a replacement succeed without sending. Each value is
    therefore signed with a key derived from the connection's API key (which a Variable writer
    without the connection does not read), over the task instance (DAG, run, task, map index),
    the note's name and the value: a note copied from another task instance, edited, or written
    by hand does not verify. One that does not is treated as absent, with a warning, and
    deleted, so the task decides from the service alone (which never pays twice: the evidence
    rule of :mod:`airflow_tables.evidence` still holds). A value of the previous release
    (unsigned) is treated the same way.
    """

    def __init__(self, store: Any, secret: str, scope: str, log: Any = None, owner: str = "this task instance") -> None:
        self._store = store
        self._secret = secret
        self._scope = scope
        self._log = log
        self._owner = owner

    def signed(self, key: str, value: Any) -> dict[str, Any]:
        """``value`` as it is stored under ``key`` (a job returned to ``ResumableJobMixin`` is stored by it)."""
        return {"value": value, SIGNATURE: self._signature(key, value)}

    def opened(self, key: str, stored: Any) -> Any:
        """The value of what is stored under ``key`` when it verifies, else ``None`` (with a warning)."""
        if stored is None:
            return None
        given = stored.get(SIGNATURE) if isinstance(stored, dict) and len(stored) == 2 else None
        if given is not None and verifies(given, self._secret, "durable notes", [self._scope, key, stored["value"]]):
            return stored["value"]
        (self._log or logging.getLogger(__name__)).warning(
            "The stored record %r was not written by airflow-tables for %s with this connection's key (edited, "
            "copied from elsewhere, written by hand, or by an earlier release): it is ignored",
            getattr(self._store, "prefix", "") + key,
            self._owner,
        )
        return None

    def get(self, key: str) -> Any:
        stored = self._store.get(key)
        value = self.opened(key, stored)
        if value is None and stored is not None:
            self.delete(key)  # treated as absent: the next write replaces it
        return value

    def set(self, key: str, value: Any) -> None:
        self._store.set(key, self.signed(key, value))

    def delete(self, key: str) -> None:
        self._store.delete(key)

    def _signature(self, key: str, value: Any) -> str:
        return signature(self._secret, "durable notes", [self._scope, key, value])


@contextlib.contextmanager
def forgotten_when_ended(context: Context, task: Any, notes: Collection[str]) -> Iterator[None]:
    """Run a step of ``task`` (``execute``, a resume); once the task instance has ended, delete its Variables.

    Unlike the task state store (whose rows expire and go with their DAG run), a Variable stays
    for ever: 1,000 mapped imports a day would leave 1,000 to 2,000 of them a day. Only a later
    try of the same task instance reads them, so they go when there will be none: the task
    succeeded, was skipped, or failed with no try left (``AirflowFailException`` is never
    retried). They stay while it defers (the resume reads the job) and while a retry may follow.
    A worker killed outright runs nothing: its notes stay until a later try of that task instance
    ends. ``notes`` are the keys the task keeps through :func:`durable_store`; the job of
    :class:`DurableJobMixin` is added when ``task`` is one. Nothing is done where no Variable is used.
    """
    keys = _variable_notes(context, task, notes)
    if not keys:
        yield
        return
    from airflow_tables.version_compat import TaskDeferred

    try:
        yield
    except TaskDeferred:
        raise
    except BaseException as err:
        if _ends_task_instance(err, context):
            _forget(context, keys)
        raise
    _forget(context, keys)


def _variable_notes(context: Context, task: Any, notes: Collection[str]) -> list[str]:
    """The keys among a task's notes that live in Variables (see :func:`durable_store`)."""
    keys = [] if context.get("task_state_store") is not None else list(notes)
    if isinstance(task, DurableJobMixin) and task.durable:
        keys.append(task.external_id_key)
    return keys


def task_series(context: Context) -> int:
    """The task instance's current series of tries, as the database keeps it: a clear starts a new one.

    A retry keeps ``max_tries``; clearing a task sets it to the last try's number plus the task's
    ``retries`` (``clear_task_instances``, Airflow 3.1 to 3.4), so ``max_tries`` names the series.
    It is read from the task instance alone, never from the DAG file: a ``retries`` lowered in
    the file between two tries (which moved ``max_tries - retries``) must not make a retry look
    like a clear, which would send a paid import again. A clear that leaves ``max_tries`` as it
    was (``retries`` lowered by exactly the tries run) is taken for a retry: it adopts on evidence
    rather than pays twice. A note written in an earlier series belongs to a run the user
    cleared, and must not be resumed.
    """
    return max(1, int(context["ti"].max_tries))


def first_try(context: Context) -> bool:
    """Whether this is the task instance's first try: no earlier try of it can have kept anything.

    Airflow numbers each try it schedules, a clear's too (the try after a clear takes the next
    number: 3.1 to 3.4), so only a task instance's first try runs with ``try_number`` 1. At the
    start of that try the reads that look for what an earlier try kept (each a request to the API
    server, twenty milliseconds or more) can be skipped: there is nothing to find. Only at the
    start of a try: a try that resumes after sending reads what it kept, whatever its number.
    """
    return int(context["ti"].try_number) <= 1


def _ends_task_instance(err: BaseException, context: Context) -> bool:
    """Whether the try failing with ``err`` is the task instance's last (as the task runner decides on < 3.3)."""
    from airflow_tables.version_compat import AirflowFailException, AirflowSkipException

    if isinstance(err, (AirflowFailException, AirflowSkipException)):
        return True
    ti = context["ti"]
    return ti.try_number > ti.max_tries


def _forget(context: Context, keys: list[str]) -> None:
    """Delete the notes; a failure to do so is logged, never the task's outcome (nothing would read them)."""
    _forget_variables(_VariableStore(context), keys)


def _forget_variables(store: _VariableStore, keys: list[str]) -> None:
    for key in keys:
        try:
            store.delete(key)
        except Exception as err:
            logging.getLogger(__name__).warning("could not delete the Variable %s%s: %s", store.prefix, key, err)


__all__ = [
    "DurableJobMixin",
    "SignedStore",
    "durable_store",
    "first_try",
    "forgotten_when_ended",
    "shared_records",
    "signature",
    "task_series",
    "verifies",
]
