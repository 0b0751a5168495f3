"""The asset event an upload records on its table, and reading it back: one schema for both.

Each import or replacement that sends a file records an event on the table's asset
(:mod:`airflow_tables.assets`), through the alias :data:`TABLES_ALIAS` (the table is known
only at run time). Its extras are flat, to filter on, and are also the table's upload record
that ``skip_if_unchanged`` reads back (:func:`last_upload`), whichever DAG wrote it:
:class:`UploadRecord` is both.

Partitions (Airflow 3.2+). The event carries a partition key, so that partitioned consumers
run once per partition: the run's own (a partitioned run's ``partition_key``; Airflow gives it
to every event the run records, alias events included), or the one the task is given. A given
key that is not the run's needs Airflow 3.3, which attaches a key to an event on a concrete
asset only (not through an alias): the event then goes on the table's asset directly, when
Airflow knows that asset (a DAG refers to it, as every consumer scheduled on it does); else it
goes through the alias with the run's key, with a warning. On 3.2 a given key other than the
run's cannot be attached, and on 3.1 no key can: the task warns and the key is kept in the
event's extras (``partition_key``) only.

Any DAG can record an event on a table's asset, with any extras. ``skip_if_unchanged`` skips a
paid replacement on the last record's fingerprint, so a record is signed (``signature``: an
HMAC keyed by the connection's API key, over the extras and the DAG, task and run that recorded
it, :func:`airflow_tables._durable.signature`), and only a record that verifies is read back:
another DAG's event with a ``fingerprint`` extra cannot make a real refresh be skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from airflow.sdk import AssetAlias

from airflow_tables.assets import ALIAS_NAME, SIGNATURE, asset_of, record_signature, signed_record
from airflow_tables.version_compat import AIRFLOW_V_3_2_PLUS, AIRFLOW_V_3_3_PLUS

if TYPE_CHECKING:
    from airflow.sdk import Asset, Context

    from airflow_tables.assets import TableRef
    from airflow_tables.model import TableSummary

TABLES_ALIAS = AssetAlias(name=ALIAS_NAME, group="datatables")
#: How many of a table's newest asset events are searched for the last upload record.
RECORDS_LOOKED_AT = 50

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class UploadRecord:
    """An upload as its asset event's extras say it; ``dag_id``/``task_id``/``run_id`` come from the event.

    :param completion_time: the ``UploadCompletionTime`` seen once the table was read (``None``
        when the task did not wait); ``rows`` likewise.
    :param fingerprint: the bytes sent, when ``skip_if_unchanged`` computed it; a record without
        one is not read back.
    :param partition_key: the partition the upload was recorded for, if any (an extra only when set).
    """

    service: str
    project_id: str
    card_id: str
    card_name: str | None = None
    rows: int | None = None
    completion_time: str | None = None
    replaced: bool = False
    credits: int = 1
    fingerprint: str | None = None
    partition_key: str | None = None
    dag_id: str | None = None
    task_id: str | None = None
    run_id: str | None = None

    @classmethod
    def of(cls, ref: TableRef, table: TableSummary | None, *, replaced: bool, fingerprint: str | None) -> UploadRecord:
        """The record of an upload to ``ref``, with what the look after its read saw (``table``)."""
        return cls(
            ref.service,
            ref.project_id,
            ref.card_id,
            table.name if table else None,
            table.rows if table else None,
            table.completion_time if table else None,
            replaced,
            1,
            fingerprint,
        )

    def to_extra(self, secret: str | None = None) -> dict[str, Any]:
        """The event's extras (the source of the event is the event's own, not an extra).

        With ``secret`` (the connection's API key) and the record's DAG, task and run, the extras
        are signed (``signature``), so that :meth:`from_event` can tell this provider's record from
        another DAG's event that copies its extras.
        """
        extra = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _FROM_EVENT}
        if extra["partition_key"] is None:  # the extras of an upload without partitions stay as they were
            del extra["partition_key"]
        if secret is not None:
            extra[SIGNATURE] = record_signature(secret, extra, self.dag_id, self.task_id, self.run_id)
        return extra

    @classmethod
    def from_event(cls, event: Any, secret: str | None = None) -> UploadRecord | None:
        """The record an asset event holds; ``None`` when it is not one of ours (no fingerprint) or is malformed.

        With ``secret``, also ``None`` when its signature does not verify for the event's DAG, task and run.
        """
        extra: Mapping[str, Any] = event.extra or {}
        if not _is_ours(event):
            return None
        if secret is not None and not _verified(secret, event):
            return None
        known = {f.name for f in fields(cls)} - _FROM_EVENT
        try:
            return cls(
                **{k: v for k, v in extra.items() if k in known},
                dag_id=event.source_dag_id,
                task_id=event.source_task_id,
                run_id=event.source_run_id,
            )
        except TypeError:  # a required extra is missing
            return None


_FROM_EVENT = frozenset({"dag_id", "task_id", "run_id"})


def _verified(secret: str, event: Any) -> bool:
    return signed_record(secret, event.extra, event.source_dag_id, event.source_task_id, event.source_run_id)


def _is_ours(event: Any) -> bool:
    return bool((event.extra or {}).get("fingerprint"))


def record_upload(
    context: Context, ref: TableRef, record: UploadRecord, partition_key: str | None = None, *, secret: str
) -> None:
    """Record the upload's event on the table's asset, with the given partition key or else the run's.

    The event goes through :data:`TABLES_ALIAS`, where the run's own key comes with it
    (Airflow 3.2+); a given key that is not the run's goes on the asset itself (Airflow 3.3+;
    see the module's docstring for what older versions do). Its extras are signed with
    ``secret`` (the connection's API key) for the task instance that records it.
    """
    ti = context["ti"]
    record = replace(record, dag_id=ti.dag_id, task_id=ti.task_id, run_id=ti.run_id)
    run_key = getattr(context.get("dag_run"), "partition_key", None) or None
    key = partition_key or run_key  # an empty rendered template means no key of its own
    if key is not None:
        record = replace(record, partition_key=key)
    asset = asset_of(ref)
    extra = record.to_extra(secret)
    if key is not None and key != run_key and _on_the_asset(context, asset, extra, key):
        return
    context["outlet_events"][TABLES_ALIAS].add(asset, extra=extra)


def _on_the_asset(context: Context, asset: Asset, extra: dict[str, Any], key: str) -> bool:
    """Record the event on ``asset`` itself with partition ``key``; ``False`` (warned) where Airflow cannot."""
    task = context.get("task")
    why = (
        "Airflow 3.1 has no partitions"
        if not AIRFLOW_V_3_2_PLUS
        else "Airflow 3.2 gives an event only its run's partition key"
        if not AIRFLOW_V_3_3_PLUS
        else None
    )
    if why is None and not _known_to_airflow(asset):
        why = f"Airflow knows no asset {asset.uri} yet (no DAG refers to it, so no consumer waits on its partitions)"
    if why is not None:
        getattr(task, "log", log).warning(
            "partition_key %r is kept in the event's extras only, not given to the event of %s: %s",
            key,
            asset.uri,
            why,
        )
        return False
    if task is not None and asset not in task.outlets:
        task.outlets.append(asset)  # Airflow registers a concrete asset's event only for the task's outlets
    accessor = context["outlet_events"][asset]
    accessor.extra = extra
    accessor.add_partitions(key)
    return True


def _known_to_airflow(asset: Asset) -> bool:
    """Whether Airflow has the asset, active (asked of the supervisor, as a task can)."""
    from airflow.sdk.execution_time.comms import ErrorResponse, GetAssetByName
    from airflow.sdk.execution_time.task_runner import SUPERVISOR_COMMS

    try:
        answer = SUPERVISOR_COMMS.send(GetAssetByName(name=asset.name))
    except Exception as err:  # no supervisor (a plain execute()): nothing to attach the event to
        log.warning("could not ask Airflow about asset %s: %s", asset.uri, err)
        return False
    return not isinstance(answer, ErrorResponse) and getattr(answer, "uri", None) == asset.uri


def last_upload(ref: TableRef, secret: str) -> UploadRecord | None:
    """The last upload this provider recorded for a table: its newest asset event signed with ``secret``.

    Events on the asset that are not ours (an ``AssetWatcher``'s, a manual one) carry no
    fingerprint and are passed over; one that carries a fingerprint but no valid signature
    (another DAG's, or one recorded before records were signed) is passed over with a warning.
    ``None`` when there is none (or the events cannot be read here, as in a plain ``execute()``
    outside a task runner).
    """
    from airflow_tables.version_compat import newest_asset_events

    try:
        asset = asset_of(ref)  # name and URI both: by URI alone, Airflow finds only assets a DAG refers to
        for event in newest_asset_events(asset.name, asset.uri, RECORDS_LOOKED_AT):
            if not _is_ours(event):
                continue
            if not _verified(secret, event):
                log.warning(
                    "An event on %s by %s/%s/%s carries a fingerprint but was not recorded by airflow-tables with "
                    "this connection's key: it is not taken as the table's last upload",
                    ref.uri, event.source_dag_id, event.source_task_id, event.source_run_id,
                )  # fmt: skip
                continue
            return UploadRecord.from_event(event)  # the newest of ours decides, even malformed (then: replace)
    except Exception as err:  # no supervisor to ask: behave as if nothing was recorded (import)
        log.warning("could not read the upload record of %s: %s", ref.uri, err)
    return None
