"""OpenLineage for the import and replace operators: the uploaded file in, the table out.

Called by the OpenLineage provider only; its client is imported here, never when a DAG is parsed.
Tables are named as :mod:`airflow_tables.assets` names them: ``<ProjectID>/<CardID>`` in the
namespace ``datatables://<service>``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_tables.assets import TableRef


def import_lineage(file_path: Any, table: TableRef | None) -> Any:
    """The ``OperatorLineage`` of an upload of ``file_path`` into ``table`` (``None``: no table was made)."""
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import Dataset

    outputs = [] if table is None else [Dataset(namespace=table.namespace, name=table.name)]
    parts = list(file_path) if isinstance(file_path, (list, tuple)) else [file_path]  # combine=: each part an input
    return OperatorLineage(inputs=[file_dataset(part) for part in parts], outputs=outputs)


def file_dataset(file_path: Any) -> Any:
    """The OpenLineage dataset of a local path (``file``) or an object (``s3://bucket`` and its key)."""
    from urllib.parse import urlsplit

    from openlineage.client.event_v2 import Dataset

    from airflow_tables.sources.storage import is_storage_path, is_uri, label_of

    if is_uri(file_path) or is_storage_path(file_path):
        parts = urlsplit(label_of(file_path))
        bucket = parts.netloc.rpartition("@")[2]  # no connection id in a dataset's name
        return Dataset(namespace=f"{parts.scheme}://{bucket}" if bucket else parts.scheme, name=parts.path)
    return Dataset(namespace="file", name=os.path.abspath(file_path))
