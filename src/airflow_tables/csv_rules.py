"""Moved to :mod:`airflow_tables.validation.rules`; re-exported here for one release."""

from airflow_tables.validation.rules import *  # noqa: F403
