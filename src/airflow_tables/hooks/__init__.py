"""The Data Tables Service client (:mod:`airflow_tables.hooks.tables`), its wire rules (``_http``) and transports."""
