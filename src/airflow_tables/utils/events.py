"""The asset event an upload records on its table, and reading it back: one schema for both.

Each import or replacement that sends a file records an event on the table's asset
(:mod:`airflow_tables.assets`), through the alias :data:`TABLES_ALIAS` (the table is known
only at run time). Its extras are flat, to filter on, and are also the table's upload record
that ``skip_if_unchanged`` reads back (:func:`last_upload`), whichever DAG wrote it:
:class:`UploadRecord` is both.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from airflow.sdk import AssetAlias

from airflow_tables.assets import ALIAS_NAME, asset_of

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow.sdk import Context

    from airflow_tables.assets import TableRef
    from airflow_tables.model import TableSummary

TABLES_ALIAS = AssetAlias(name=ALIAS_NAME, group="datatables")
#: How many of a table's newest asset events are searched for the last upload record.
RECORDS_LOOKED_AT = 50


@dataclass(frozen=True)
class UploadRecord:
    """An upload as its asset event's extras say it; ``dag_id``/``task_id``/``run_id`` come from the event.

    :param completion_time: the ``UploadCompletionTime`` seen once the table was read (``None``
        when the task did not wait); ``rows`` likewise.
    :param fingerprint: the bytes sent, when ``skip_if_unchanged`` computed it; a record without
        one is not read back.
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

    def to_extra(self) -> dict[str, Any]:
        """The event's extras (the source of the event is the event's own, not an extra)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _FROM_EVENT}

    @classmethod
    def from_event(cls, event: Any) -> UploadRecord | None:
        """The record an asset event holds, ``None`` when it is not one of ours (no fingerprint) or is malformed."""
        extra: Mapping[str, Any] = event.extra or {}
        if not _is_ours(event):
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


def _is_ours(event: Any) -> bool:
    return bool((event.extra or {}).get("fingerprint"))


def record_upload(context: Context, ref: TableRef, record: UploadRecord) -> None:
    """Record the upload's event on the table's asset, through :data:`TABLES_ALIAS`."""
    context["outlet_events"][TABLES_ALIAS].add(asset_of(ref), extra=record.to_extra())


def last_upload(ref: TableRef) -> UploadRecord | None:
    """The last upload this provider recorded for a table: its newest asset event with a fingerprint.

    Events on the asset that are not ours (an ``AssetWatcher``'s, a manual one) carry no
    fingerprint and are passed over. ``None`` when there is none (or the events cannot be
    read here, as in a plain ``execute()`` outside a task runner).
    """
    from airflow_tables.version_compat import newest_asset_events

    try:
        asset = asset_of(ref)  # name and URI both: by URI alone, Airflow finds only assets a DAG refers to
        for event in newest_asset_events(asset.name, asset.uri, RECORDS_LOOKED_AT):
            if _is_ours(event):  # the newest of ours decides, even when it is malformed (then: replace)
                return UploadRecord.from_event(event)
    except Exception as err:  # no supervisor to ask: behave as if nothing was recorded (import)
        import logging

        logging.getLogger(__name__).warning("could not read the upload record of %s: %s", ref.uri, err)
    return None
