"""assets.py: one table is one asset, whose identity names its service."""

from __future__ import annotations


def test_the_same_ids_on_two_services_are_two_assets():
    from airflow_tables.assets import parse_table_uri, table_asset

    one = table_asset("sales", "CRD-1", service="https://eu.tables.example.com")
    two = table_asset("sales", "CRD-1", service="https://us.tables.example.com")
    assert one != two and one.uri != two.uri
    assert one.uri == "datatables://eu.tables.example.com/sales/CRD-1"
    assert parse_table_uri(one.uri).service == "eu.tables.example.com"
    # A bare host means https, and case or a trailing slash do not make another service.
    assert table_asset("sales", "CRD-1", service="EU.tables.example.com/").uri == one.uri


def test_table_asset_reads_the_service_from_the_connection(datatables_conn):
    from airflow_tables.assets import table_asset

    host = datatables_conn.base_url.split("://", 1)[1]
    asset = table_asset("sales", "CRD-1")
    assert asset.uri == f"datatables://{host}/sales/CRD-1"
