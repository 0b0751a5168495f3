"""Moved to :mod:`airflow_tables.expectations`; kept for one release (benchmarks/expectations.py names it)."""

from airflow_tables.expectations import *  # noqa: F403
from airflow_tables.expectations import __all__  # noqa: F401
