"""Moved to :mod:`airflow_tables.validation.types`; re-exported here for one release."""

from airflow_tables.validation.types import *  # noqa: F403
