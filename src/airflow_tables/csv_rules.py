"""Moved to :mod:`airflow_tables.validation.rules` and `.dialect`; re-exported here for one release."""

from airflow_tables.validation.dialect import *  # noqa: F403
from airflow_tables.validation.rules import *  # noqa: F403
