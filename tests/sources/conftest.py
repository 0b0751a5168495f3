"""Fixtures for reading files from object storage: a real S3 server (``tests/_s3.py``) and a bucket per test."""

from __future__ import annotations

import json
import uuid

import pytest
from tests._s3 import S3Server
from tests.hooks.conftest import hook, make_hook  # noqa: F401 - the hook tests' fixtures, reused
from tests.sources._proxy import StorageProxy

CONN_ID = "aws_test"


@pytest.fixture(scope="session")
def s3_server():
    with S3Server() as server:
        yield server


@pytest.fixture
def bucket(s3_server, monkeypatch) -> str:
    """A fresh bucket, reached as ``s3://aws_test@<bucket>/...`` through an ``aws`` connection in the environment."""
    monkeypatch.setenv(*s3_server.connection_env(CONN_ID))
    name = f"test-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(name)
    return name


@pytest.fixture
def through_proxy(s3_server, bucket, monkeypatch):
    """``through_proxy(**faults)``: ``(s3://aws_proxied_<n>@<bucket>, proxy)``, the S3 server behind a StorageProxy."""
    proxies: list[StorageProxy] = []

    def make(**faults) -> tuple[str, StorageProxy]:
        proxy = StorageProxy(s3_server.endpoint_url, **faults)
        proxies.append(proxy)
        conn = s3_server.connection()
        conn["extra"] = {**conn["extra"], "endpoint_url": proxy.url, "config_kwargs": {"retries": {"max_attempts": 1}}}
        conn_id = f"aws_proxied_{len(proxies)}_{proxy.url.rsplit(':', 1)[1]}"  # filesystems are cached per connection
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))
        return f"s3://{conn_id}@{bucket}", proxy

    yield make
    for proxy in proxies:
        proxy.close()


def received_bytes(emulator, card_id: str) -> bytes:
    """The bytes the emulator received for a table (its data file, as its store records it)."""
    return emulator.received_bytes(card_id)


def cut_off_import(datatables_hook, emulator, source) -> str:
    """Import ``source``, which must be cut off mid-way: no import accepted, no credit spent, not "uncertain".

    Returns the error's message, for the caller to check why.
    """
    from airflow_tables import exceptions as ex

    emulator.reset_stats()
    credits = emulator.credits()
    with pytest.raises(ex.DataTablesError) as info:
        datatables_hook.import_csv(None, source)
    assert not isinstance(info.value, ex.DataTablesImportUncertainError)
    assert emulator.stats()["imports_accepted"] == 0 and emulator.credits() == credits
    assert "nothing was imported" in str(info.value)
    return str(info.value)


@pytest.fixture
def copy_scans(monkeypatch) -> list[str]:
    """The local files the validator scanned on disk: a scan made while an object was copied is not one.

    ``dag.test()`` runs tasks in this process, so the operators' scans are counted too.
    """
    import airflow_tables.validation.report as report_module

    scanned: list[str] = []
    scan_file = report_module.scan_file

    def counting(path, *args, **kwargs):
        scanned.append(str(path))
        return scan_file(path, *args, **kwargs)

    monkeypatch.setattr(report_module, "scan_file", counting)
    return scanned
