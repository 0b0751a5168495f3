"""Tables as Airflow Assets: ``datatables://<ProjectID>/<CardID>``.

An operator that replaces a known table lists that table's asset in its outlets, so
DAGs scheduled on the asset run after each refresh. The scheme is registered in the
provider info with :func:`sanitize_uri` as its normaliser.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import quote

if TYPE_CHECKING:
    from urllib.parse import SplitResult

    from airflow.sdk import Asset

SCHEME = "datatables"


def table_uri(project_id: str, card_id: str) -> str:
    return f"{SCHEME}://{quote(project_id, safe='')}/{quote(card_id, safe='')}"


def table_asset(project_id: str, card_id: str) -> Asset:
    """The asset of one table, to schedule on (``schedule=[table_asset(...)]``) or to list in outlets."""
    from airflow.sdk import Asset

    return Asset(uri=table_uri(project_id, card_id), name=f"datatables:{project_id}/{card_id}")


def create_asset(project_id: str, card_id: str, extra: dict | None = None) -> Asset:
    """The factory registered for the ``datatables`` scheme."""
    asset = table_asset(project_id, card_id)
    if extra:
        asset.extra = extra
    return asset


def sanitize_uri(uri: SplitResult) -> SplitResult:
    """Accept ``datatables://<ProjectID>/<CardID>`` and nothing else."""
    parts = [p for p in uri.path.split("/") if p]
    if not uri.netloc or len(parts) != 1 or uri.query or uri.fragment:
        raise ValueError(f"a datatables asset URI is datatables://<ProjectID>/<CardID>, not {uri.geturl()!r}")
    return uri
