"""Moved to :mod:`airflow_tables.model`; this re-export goes in the next minor release."""

from airflow_tables.hooks._http import _deprecated
from airflow_tables.model import *  # noqa: F403
from airflow_tables.model import REPLACEMENT_SPACING, Look, RefreshWatch, TableStatus, TableWatch  # noqa: F401

_deprecated("airflow_tables.hooks.status", "airflow_tables.model")
