"""Tables as Airflow Assets, named the way OpenLineage names datasets.

One table is one asset, whose identity includes the service it lives on, because two
services (or regions) may both have a department ``sales`` with tables of their own:

- OpenLineage namespace: ``datatables://<service>``, where ``<service>`` is the host (and
  port, and path prefix if any) of the connection's base URL, e.g. ``tables.example.com``;
- OpenLineage name: ``<ProjectID>/<CardID>``;
- Airflow asset URI: namespace and name joined, ``datatables://<service>/<ProjectID>/<CardID>``,
  and asset name ``datatables:<service>/<ProjectID>/<CardID>``.

Ids are percent-encoded as single path segments. :func:`table_asset` builds the asset a DAG
schedules on; the operators record events on the same asset after every successful import.
The scheme is registered in the provider info with :func:`sanitize_uri` as its normaliser.

The extras of those events are an upload record (:class:`UploadRecord`)
signed with the connection's key for the task that recorded it (:func:`record_signature`), since
any DAG can record an event with any extras on a table's asset: ``skip_if_unchanged`` and the Data
Tables page trust only a record that verifies (:func:`signed_record`).
Standard library only at import time.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

if TYPE_CHECKING:
    from urllib.parse import SplitResult

    from airflow.sdk import Asset

    from airflow_tables.model import TableSummary

SCHEME = "datatables"
#: The asset alias through which import and replace tasks record their table's event: the
#: table (a new CardID, a templated id, the connection's service) is known only at run time.
ALIAS_NAME = "datatables-tables"
#: The extra of an upload record's event that holds its signature.
SIGNATURE = "signature"


@dataclass(frozen=True)
class TableRef:
    """Which table an asset stands for: ``service`` (host[:port][/prefix]), department and CardID."""

    service: str
    project_id: str
    card_id: str

    @property
    def namespace(self) -> str:
        """The OpenLineage namespace of the service's tables."""
        return f"{SCHEME}://{self.service}"

    @property
    def name(self) -> str:
        """The OpenLineage dataset name of the table."""
        return f"{quote(self.project_id, safe='')}/{quote(self.card_id, safe='')}"

    @property
    def uri(self) -> str:
        """The Airflow asset URI."""
        return f"{self.namespace}/{self.name}"


def service_of(base_url: str) -> str:
    """The service part of an identity: a base URL's host, port and path prefix, lower-cased host.

    One service has one identity however its URL is spelled: ``https://Tables.example.com/``,
    ``tables.example.com`` (a bare host means https) and ``https://tables.example.com:443`` are
    the same service (a scheme's default port is dropped: 443 for https, 80 for http); so are
    ``http://localhost:8765`` and ``http://127.0.0.1:8765`` (every loopback name is written
    ``127.0.0.1``: ``localhost``, ``localhost.``, ``::1``). ``http://127.0.0.1:8765`` keeps its port.
    """
    text = base_url.strip()
    parts = urlsplit(text if "://" in text else f"https://{text}")
    if not parts.hostname:
        raise ValueError(f"{base_url!r} is not a base URL such as https://tables.example.com")
    host = parts.hostname.lower().rstrip(".")
    if host in _LOOPBACK:
        host = "127.0.0.1"
    if ":" in host:  # IPv6
        host = f"[{host}]"
    port = parts.port
    shown = f":{port}" if port is not None and port != _DEFAULT_PORTS.get(parts.scheme.lower()) else ""
    return f"{host}{shown}{parts.path.rstrip('/')}"


#: Names of this machine that reach the same service as 127.0.0.1.
_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1", "0:0:0:0:0:0:0:1"})
#: The port a scheme means when none is written.
_DEFAULT_PORTS = {"https": 443, "http": 80}


def table_ref(project_id: str, card_id: str, *, service: str) -> TableRef:
    """The identity of a table on the service at ``service`` (a base URL or a host)."""
    return TableRef(service_of(service), str(project_id), str(card_id))


def table_asset(
    project_id: str,
    card_id: str,
    *,
    service: str | None = None,
    datatables_conn_id: str = "datatables_default",
) -> Asset:
    """The asset of one table, to schedule on (``schedule=[table_asset(...)]``).

    :param service: the service's base URL (or host). When omitted, the host of connection
        ``datatables_conn_id`` is read, so the asset is the one that tasks using that
        connection record events on. Pass ``service`` to keep the DAG file from reading a
        connection while it is parsed.
    """
    if service is None:
        service = _connection_host(datatables_conn_id)
    return asset_of(table_ref(project_id, card_id, service=service))


def asset_of(ref: TableRef) -> Asset:
    """The Airflow asset of a table identity."""
    from airflow.sdk import Asset

    return Asset(uri=ref.uri, name=f"{SCHEME}:{ref.service}/{ref.name}", group="datatables")


def parse_table_uri(uri: str) -> TableRef:
    """The table an asset URI names: ``datatables://<service>/<ProjectID>/<CardID>``."""
    parts = urlsplit(uri)
    segments = [s for s in parts.path.split("/") if s]
    if parts.scheme != SCHEME or not parts.netloc or len(segments) < 2 or parts.query or parts.fragment:
        raise ValueError(f"a datatables asset URI is datatables://<service host>/<ProjectID>/<CardID>, not {uri!r}")
    prefix = "/".join(segments[:-2])
    service = parts.netloc.lower() + (f"/{prefix}" if prefix else "")
    return TableRef(service, unquote(segments[-2]), unquote(segments[-1]))


def create_asset(*, project_id: str, card_id: str, service: str, extra: dict | None = None) -> Asset:
    """The factory registered for the ``datatables`` scheme (hook lineage's ``asset_kwargs``)."""
    asset = asset_of(table_ref(project_id, card_id, service=service))
    if extra:
        asset.extra = extra
    return asset


def sanitize_uri(uri: SplitResult) -> SplitResult:
    """The normal form of ``datatables://<service host>/<ProjectID>/<CardID>``; ``ValueError`` for anything else.

    Airflow calls this (the provider info's ``asset-uris`` handler) for every asset of the scheme,
    so a hand-written ``datatables://LOCALHOST:8765/P/C`` or ``datatables://Tables.Example.com:443/P/C``
    is the asset the operators record events on: the service as :func:`service_of` writes it (host
    lower-cased, every loopback name ``127.0.0.1``, the default port of https or http dropped), the
    ids percent-encoded as :class:`TableRef` encodes them.
    """
    return urlsplit(normal_ref(parse_table_uri(uri.geturl())).uri)


def normal_ref(ref: TableRef) -> TableRef:
    """``ref`` with its service in the normal form (``service_of``): a port 80 counts as http's default too."""
    service = service_of(ref.service)
    if urlsplit(f"https://{service}").port == 80:
        service = service_of(f"http://{service}")
    return TableRef(service, ref.project_id, ref.card_id)


def convert_asset_to_openlineage(asset: Asset, lineage_context: Any) -> Any:
    """The OpenLineage dataset of a table's asset (the provider info's ``to_openlineage_converter``).

    What lets a table used as a task's ``inlets`` or ``outlets`` show in lineage, named as the
    operators' own events name it.
    """
    from openlineage.client.event_v2 import Dataset

    ref = normal_ref(parse_table_uri(asset.uri))
    return Dataset(namespace=ref.namespace, name=ref.name)


def _connection_host(conn_id: str) -> str:
    from airflow.sdk import Connection

    try:
        conn = Connection.get(conn_id)
    except Exception as exc:  # AirflowNotFoundException and the Task SDK's own lookup errors
        raise ValueError(
            f"table_asset: connection {conn_id!r} could not be read to name the service ({type(exc).__name__}); "
            "pass service='https://your-service' (the connection's host)"
        ) from None
    if not conn.host:
        raise ValueError(f"table_asset: connection {conn_id!r} has no host; pass service='https://your-service'")
    return conn.host if conn.port is None or ":" in conn.host.split("//")[-1] else f"{conn.host}:{conn.port}"


def _record_message(extra: Mapping[str, Any], dag_id: str | None, task_id: str | None, run_id: str | None) -> list:
    """What an upload record's signature covers: its extras but the signature, and the task that records them."""
    return [{k: v for k, v in extra.items() if k != SIGNATURE}, dag_id, task_id, run_id]


def record_signature(
    secret: str, extra: Mapping[str, Any], dag_id: str | None, task_id: str | None, run_id: str | None
) -> str:
    """The signature of an upload record's extras for the task that records them."""
    from airflow_tables._durable import signature

    return signature(secret, "upload records", _record_message(extra, dag_id, task_id, run_id))


def signed_record(secret: str, extra: object, dag_id: str | None, task_id: str | None, run_id: str | None) -> bool:
    """Whether an event's extras are an upload record this provider signed with ``secret`` for that task.

    Any DAG can record an event with the same extras on a table's asset; only the provider,
    holding the connection's key, signs them (:func:`record_signature`).
    """
    from airflow_tables._durable import verifies

    if not isinstance(extra, Mapping):
        return False
    return verifies(extra.get(SIGNATURE), secret, "upload records", _record_message(extra, dag_id, task_id, run_id))


@dataclass(frozen=True)
class UploadRecord:
    """An upload as its asset event's extras say it; ``dag_id``/``task_id``/``run_id`` come from the event.

    Written by the import and replace tasks (:func:`airflow_tables.utils.events.record_upload`),
    read back by ``skip_if_unchanged`` (:meth:`from_event`) and by the Data Tables page
    (:meth:`from_extra`): it lives here, below both, so that both read the same schema.

    :param completion_time: the ``UploadCompletionTime`` seen once the table was read (``None``
        when the task did not wait); ``rows`` likewise.
    :param fingerprint: the bytes sent, when ``skip_if_unchanged`` computed it; a record without
        one is not read back.
    :param partition_key: the partition the upload was recorded for, if any (an extra only when set).
    :param partition_twin: on the unkeyed twin of an event recorded for a partition, that partition
        (see :func:`airflow_tables.utils.events.record_upload`): the same upload, for the consumers
        that are not partition-aware; its ``credits`` are 0, the keyed event counts the import.
    :param bad_rows: the rows ``on_bad_rows="quarantine"`` set aside, and ``rejects`` where they were
        written (extras only when a quarantine ran).
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
    partition_twin: str | None = None
    bad_rows: int | None = None
    rejects: str | None = None
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
        for optional in ("partition_key", "partition_twin", "bad_rows", "rejects"):  # absent: extras as they were
            if extra[optional] is None:
                del extra[optional]
        if secret is not None:
            extra[SIGNATURE] = record_signature(secret, extra, self.dag_id, self.task_id, self.run_id)
        return extra

    @classmethod
    def from_event(cls, event: Any, secret: str | None = None) -> UploadRecord | None:
        """The record an asset event holds; ``None`` when it is not one of ours (no fingerprint) or is malformed.

        With ``secret``, also ``None`` when its signature does not verify for the event's DAG, task and run.
        """
        if not has_fingerprint(event):
            return None
        if secret is not None and not event_verifies(secret, event):
            return None
        return cls.from_extra(
            event.extra, dag_id=event.source_dag_id, task_id=event.source_task_id, run_id=event.source_run_id
        )

    @classmethod
    def from_extra(
        cls,
        extra: object,
        *,
        ref: TableRef | None = None,
        dag_id: str | None = None,
        task_id: str | None = None,
        run_id: str | None = None,
    ) -> UploadRecord | None:
        """The record an event's extras hold, read field by field: the one reader of those extras.

        An extra of the wrong type (a hand-made or older event) reads as the field's default;
        ``None`` when the extras do not name the table. ``ref``, the table of the asset the event
        is on, names it whatever the extras say (the Data Tables page reads events by asset).
        """
        given = extra if isinstance(extra, Mapping) else {}
        values = {name: given[name] for name, kind in _extra_kinds().items() if _fits(given.get(name), kind)}
        if ref is not None:
            values.update(service=ref.service, project_id=ref.project_id, card_id=ref.card_id)
        try:
            return cls(**values, dag_id=dag_id, task_id=task_id, run_id=run_id)
        except TypeError:  # the table's identity is missing
            return None


_FROM_EVENT = frozenset({"dag_id", "task_id", "run_id"})


@functools.cache
def _extra_kinds() -> dict[str, type]:
    """Each extra of an upload record and the type it holds (besides ``None``), from the record's fields."""
    hints = typing.get_type_hints(UploadRecord)
    kinds = {}
    for each in fields(UploadRecord):
        if each.name not in _FROM_EVENT:
            hint = hints[each.name]
            kinds[each.name] = next((a for a in typing.get_args(hint) if a is not type(None)), hint)
    return kinds


def _fits(value: object, kind: type) -> bool:
    """Whether ``value`` is a ``kind`` (a ``bool`` is no ``int`` here: ``rows=True`` is no count)."""
    return isinstance(value, kind) and isinstance(value, bool) == (kind is bool)


def event_verifies(secret: str, event: Any) -> bool:
    """Whether an asset event's extras are an upload record signed with ``secret`` for the task that recorded it."""
    return signed_record(secret, event.extra, event.source_dag_id, event.source_task_id, event.source_run_id)


def has_fingerprint(event: Any) -> bool:
    """Whether an asset event's extras carry a fingerprint: the records ``skip_if_unchanged`` reads back."""
    return bool((event.extra or {}).get("fingerprint"))
