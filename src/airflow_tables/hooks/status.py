"""Moved to :mod:`airflow_tables.model`; this re-export goes in the next minor release."""

from airflow_tables.hooks._deprecated import warn_deprecated
from airflow_tables.model import *  # noqa: F403
from airflow_tables.model import REPLACEMENT_SPACING, Look, RefreshWatch, TableStatus, TableWatch  # noqa: F401

warn_deprecated("airflow_tables.hooks.status", "airflow_tables.model")
