"""The Data Tables Service client (:mod:`airflow_tables.hooks.tables`) and the table status type."""
