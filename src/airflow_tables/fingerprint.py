"""Moved to :mod:`airflow_tables.sources.fingerprint`; re-exported here for one release."""

from airflow_tables.sources.fingerprint import *  # noqa: F403
