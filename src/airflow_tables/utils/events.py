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

A keyed event queues only partition-aware DAGs (Airflow's ``AssetManager._queue_dagruns``): a DAG
scheduled on the table's asset the ordinary way would never run again after a keyed upload. So
a key given to the task of an unpartitioned run goes on a second, unkeyed event too (through the
alias: its *twin*, extras ``partition_twin`` set to the key and ``credits`` 0, so that the Data
Tables page counts the import once); Airflow gives it to the ordinary consumers and not to the
partition-aware ones, which it warns have no key. A partitioned run's events all carry its key:
its ordinary consumers wait for an unpartitioned producer (docs/operators.md says so).

One table, one asset, however its URI is written: the scheme's normaliser
(:func:`airflow_tables.assets.sanitize_uri`) gives a hand-written ``datatables://LOCALHOST:8765/P/C``
the URI the operators use, but Airflow also keys an asset by its name, which such an asset takes
from its URI as written. So an event goes on the asset Airflow holds for the table's URI, whatever
its name (:func:`table_asset_in_airflow`): the DAG scheduled on the hand-written asset runs.

Any DAG can record an event on a table's asset, with any extras. ``skip_if_unchanged`` skips a
paid replacement on the last record's fingerprint, so a record is signed (``signature``: an
HMAC keyed by the connection's API key, over the extras and the DAG, task and run that recorded
it, :func:`airflow_tables._durable.signature`), and only a record that verifies is read back:
another DAG's event with a ``fingerprint`` extra cannot make a real refresh be skipped.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from airflow.sdk import AssetAlias

from airflow_tables.assets import ALIAS_NAME, UploadRecord, asset_of, event_verifies, has_fingerprint
from airflow_tables.version_compat import AIRFLOW_V_3_2_PLUS, AIRFLOW_V_3_3_PLUS

if TYPE_CHECKING:
    from airflow.sdk import Asset, Context

    from airflow_tables.assets import TableRef

TABLES_ALIAS = AssetAlias(name=ALIAS_NAME, group="datatables")
#: How many of a table's newest asset events are searched for the last upload record.
RECORDS_LOOKED_AT = 50

log = logging.getLogger(__name__)

__all__ = [
    "RECORDS_LOOKED_AT",
    "TABLES_ALIAS",
    "RecordsTableEvents",
    "UploadRecord",
    "last_upload",
    "record_upload",
    "with_tables_alias",
]


def with_tables_alias(outlets: Any) -> list[Any]:
    """A task's outlets with :data:`TABLES_ALIAS` among them, once."""
    given = list(outlets or [])
    return given if any(getattr(o, "name", None) == ALIAS_NAME for o in given) else [*given, TABLES_ALIAS]


class RecordsTableEvents:
    """An operator whose task records events on tables' assets, through :data:`TABLES_ALIAS`.

    The alias is among its outlets as written in the DAG, mapped or not: ``partial()`` declares it
    too, so that Airflow's DAG processor creates the alias with the DAG. A mapped task declared
    without it got it only when unmapped on the worker; the alias was then created by the first
    events, and two tasks ending at once both created it, one failing on the alias's unique name
    (after its import had succeeded).
    """

    @classmethod
    def partial(cls, **kwargs: Any) -> Any:
        kwargs["outlets"] = with_tables_alias(kwargs.get("outlets"))
        return super().partial(**kwargs)  # type: ignore[misc]  # BaseOperator's, next in the operator's MRO


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
    asset = table_asset_in_airflow(ref)
    extra = record.to_extra(secret)
    if key is not None and key != run_key and _on_the_asset(context, asset, extra, key):
        if run_key is None:  # the ordinary consumers hear of it through an unkeyed twin
            twin = replace(record, partition_key=None, partition_twin=key, credits=0)
            context["outlet_events"][TABLES_ALIAS].add(asset, extra=twin.to_extra(secret))
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
    return _active_asset(asset.uri) is not None


def table_asset_in_airflow(ref: TableRef) -> Asset:
    """The asset Airflow holds, active, for the table's URI (a hand-written one keeps its name); else ours.

    A DAG scheduled on ``Asset("datatables://LOCALHOST:8765/P/C")`` has an asset of that name and
    the normal URI (:func:`~airflow_tables.assets.sanitize_uri`); Airflow activates one asset per
    URI, and queues a DAG only for events on its own asset.
    """
    from airflow.sdk import Asset

    ours = asset_of(ref)
    held = _active_asset(ours.uri)
    if held is None or held.name == ours.name:
        return ours
    return Asset(name=held.name, uri=held.uri, group=held.group or ours.group)


def _active_asset(uri: str) -> Any:
    """The active asset of ``uri``, as the supervisor answers (``name``, ``uri``, ``group``); ``None``: none."""
    from airflow.sdk.execution_time.comms import ErrorResponse, GetAssetByUri
    from airflow.sdk.execution_time.task_runner import SUPERVISOR_COMMS

    try:
        answer = SUPERVISOR_COMMS.send(GetAssetByUri(uri=uri))
    except Exception as err:  # no supervisor (a plain execute()): nothing to attach the event to
        log.warning("could not ask Airflow about asset %s: %s", uri, err)
        return None
    return None if isinstance(answer, ErrorResponse) or getattr(answer, "uri", None) != uri else answer


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
        asset = table_asset_in_airflow(ref)  # name and URI: by URI alone, Airflow finds only assets a DAG refers to
        for event in newest_asset_events(asset.name, asset.uri, RECORDS_LOOKED_AT):
            if not has_fingerprint(event):
                continue
            if not event_verifies(secret, event):
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
