"""Moved to test_tables.py; tests/plugins/test_monitor.py imports these helpers from here (now in _runs.py)."""

from tests.operators._runs import import_table, orders_csv  # noqa: F401
