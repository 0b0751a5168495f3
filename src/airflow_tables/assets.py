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

The extras of those events are an upload record (:class:`airflow_tables.utils.events.UploadRecord`)
signed with the connection's key for the task that recorded it (:func:`record_signature`), since
any DAG can record an event with any extras on a table's asset: ``skip_if_unchanged`` and the Data
Tables page trust only a record that verifies (:func:`signed_record`).
Standard library only at import time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

if TYPE_CHECKING:
    from urllib.parse import SplitResult

    from airflow.sdk import Asset

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
    """Accept ``datatables://<service host>/<ProjectID>/<CardID>`` and nothing else."""
    parse_table_uri(uri.geturl())
    return uri


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
