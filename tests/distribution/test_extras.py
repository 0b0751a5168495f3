"""What `pip install airflow-tables` brings to a worker, and what only its extras bring.

Read from the installed distribution's metadata (pyproject.toml as built), so a
dependency moved back into the base install fails here.
"""

from __future__ import annotations

import re
from importlib.metadata import requires

# xxhash: skip_if_unchanged's fingerprint; backports.zstd: zstandard files below Python 3.14.
BASE_ONLY = {"apache-airflow", "requests", "httpx", "xxhash", "backports.zstd"}


def _requirements() -> tuple[set[str], dict[str, set[str]]]:
    base: set[str] = set()
    extras: dict[str, set[str]] = {}
    for line in requires("airflow-tables") or []:
        name = re.match(r"[A-Za-z0-9_.-]+(\[[^\]]*\])?", line).group(0).lower()
        marker = re.search(r'extra == "([^"]+)"', line)
        if marker:
            extras.setdefault(marker.group(1), set()).add(name)
        else:
            base.add(name)
    return base, extras


def test_a_worker_installs_neither_the_emulators_server_nor_pandas():
    base, _ = _requirements()
    assert base == BASE_ONLY


def test_the_extras_bring_the_emulator_pandas_and_gx_with_pandas():
    _, extras = _requirements()
    assert extras["emulator"] == {"starlette", "uvicorn"}  # the multipart parser is its own
    assert extras["pandas"] == {"pandas", "pyarrow"}  # a DataFrame is written by the Parquet rules
    assert extras["gx"] == {"great-expectations", "airflow-tables[pandas]"}
    assert extras["parquet"] == {"pyarrow"}  # Parquet and JSON Lines, converted to CSV
    assert extras["sql"] == {"apache-airflow-providers-common-sql", "pyarrow"}  # a query's result, by those rules
    # The test tools are a dependency group, unpublished.
    assert set(extras) == {"emulator", "pandas", "gx", "parquet", "s3", "sql"}
