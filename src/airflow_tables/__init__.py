"""airflow-tables: an Apache Airflow provider for the Data Tables Service.

Importing this package is free (no Airflow, no pandas): Airflow calls
:func:`get_provider_info` while it parses DAG files.
"""

from __future__ import annotations

__version__ = "0.1.0"


def get_provider_info() -> dict:
    """Describe the provider to Airflow: a literal dict, importing nothing."""
    return {
        "package-name": "airflow-tables",
        "name": "Data Tables",
        "description": "Validate, import, replace, wait for and delete Data Tables Service tables.",
        "versions": [__version__],
    }
