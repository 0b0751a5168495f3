"""Transfers: a table of the Data Tables Service made from another system's data (a SQL query's result)."""
