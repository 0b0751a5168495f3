"""airflow-tables: an Apache Airflow provider for the Data Tables Service.

Importing this package is free (no Airflow, no pandas): Airflow calls
:func:`get_provider_info` while it parses DAG files.
"""

from __future__ import annotations

__version__ = "0.3.0"


def get_provider_info() -> dict:
    """Describe the provider to Airflow: a literal dict, importing nothing.

    ``conn-fields`` and ``ui-field-behaviour`` let Airflow 3.2+ draw the connection form
    without importing the hook; the hook serves the same data to older versions.
    """
    return {
        "package-name": "airflow-tables",
        "name": "Data Tables",
        "description": "Validate, import, replace, wait for and delete Data Tables Service tables.",
        "versions": [__version__],
        "integrations": [{"integration-name": "Data Tables Service", "tags": ["service"]}],
        "operators": [
            {"integration-name": "Data Tables Service", "python-modules": ["airflow_tables.operators.tables"]}
        ],
        "sensors": [{"integration-name": "Data Tables Service", "python-modules": ["airflow_tables.sensors.tables"]}],
        "triggers": [{"integration-name": "Data Tables Service", "python-modules": ["airflow_tables.triggers.tables"]}],
        "hooks": [{"integration-name": "Data Tables Service", "python-modules": ["airflow_tables.hooks.tables"]}],
        "transfers": [
            {
                "source-integration-name": "Common SQL",
                "target-integration-name": "Data Tables Service",
                "python-module": "airflow_tables.transfers.sql_to_datatables",
                "how-to-guide": "https://github.com/airflow-tables/airflow-tables/tree/main/docs/transfers.md",
            }
        ],
        "extra-links": ["airflow_tables.links.DataTablesTableLink"],
        "notifications": ["airflow_tables.notifiers.DataTablesFreshnessNotifier"],
        # The [datatables] section: settings a deployer makes once, for every DAG and component.
        "config": {
            "datatables": {
                "description": "Settings of the Data Tables provider (airflow-tables).",
                "options": {
                    "ui_refresh_seconds": {
                        "description": "How long the Data Tables page keeps a department's listing before it "
                        "lists it again (at most one list request per department per interval, whatever "
                        "the number of viewers).",
                        "version_added": "0.1.0",
                        "type": "float",
                        "example": "30",
                        "default": "30",
                    },
                    "ui_timeout_seconds": {
                        "description": "The longest a Data Tables page request waits for the service (a listing "
                        "or a table's details); past it the page shows the last listing with its age, and the "
                        "request goes on in the background. No retry and no Retry-After is waited out inside "
                        "the api-server.",
                        "version_added": "0.2.0",
                        "type": "float",
                        "example": "2",
                        "default": "2",
                    },
                    "max_response_mib": {
                        "description": "The largest answer (MiB) the hook reads from the service; a larger one "
                        "fails the request clearly instead of filling the worker's or triggerer's memory.",
                        "version_added": "0.2.0",
                        "type": "float",
                        "example": "64",
                        "default": "64",
                    },
                    "min_poll_interval": {
                        "description": "The shortest interval (seconds) between two listings of a department "
                        "by the triggerer's shared poller, whatever poll_interval a waiter asks for: one "
                        "waiter's tiny interval must not set the rate of every wait in its department.",
                        "version_added": "0.2.0",
                        "type": "float",
                        "example": "1",
                        "default": "1",
                    },
                    "credit_budget": {
                        "description": "Credits each department may spend a day (UTC): a whole number for every "
                        "department, or a JSON object of them with '*' for the rest. Claimed before each paid "
                        "import in a ledger the api-server keeps; an import over it is not sent (the operators' "
                        "on_budget_exhausted: fail, or wait for the next day). Empty: no budget. See docs/plan.md.",
                        "version_added": "0.3.0",
                        "type": "string",
                        "example": '{"PRJ-1": 10, "*": 50}',
                        "default": "",
                    },
                    "dry_run": {
                        "description": "Every Data Tables operator of the deployment runs dry: its checks and "
                        "free looks (list, fetch) run, nothing is imported or deleted, no asset event is "
                        "recorded, and its decision goes to XCom 'plan' (a staging Airflow pointed at the real "
                        "service). An operator's own dry_run=True does the same for one task. See docs/plan.md.",
                        "version_added": "0.3.0",
                        "type": "boolean",
                        "example": "True",
                        "default": "False",
                    },
                    "allowed_sources": {
                        "description": "Where operators and validate_csv may read files from: a comma-separated "
                        "list of allowed prefixes (local directories such as /data/incoming, URIs such as "
                        "s3://aws_default@bucket/incoming/ naming scheme, connection id, bucket and path). "
                        "Empty: any file the worker can read. See docs/sources.md, 'Security'.",
                        "version_added": "0.2.0",
                        "type": "string",
                        "example": "/data/incoming,s3://aws_default@landing/incoming/",
                        "default": "",
                    },
                },
            }
        },
        "plugins": [{"name": "datatables", "plugin-class": "airflow_tables.plugins.plugin.DataTablesPlugin"}],
        "asset-uris": [
            {
                "schemes": ["datatables"],
                "handler": "airflow_tables.assets.sanitize_uri",
                "factory": "airflow_tables.assets.create_asset",
                "to_openlineage_converter": "airflow_tables.assets.convert_asset_to_openlineage",
            }
        ],
        "connection-types": [
            {
                "connection-type": "datatables",
                "hook-class-name": "airflow_tables.hooks.tables.DataTablesHook",
                "hook-name": "Data Tables",
                "conn-fields": {
                    "project_id": {
                        "label": "Default department (ProjectID)",
                        "description": "Used when a task does not name a department; also checked by Test.",
                        "schema": {"type": ["string", "null"]},
                    },
                    "timeout": {
                        "label": "Timeout (seconds)",
                        "description": "Seconds for each request's whole answer, not each read (default 60). For an "
                        "upload it counts from the moment the file has been sent; sending the file is limited "
                        "only per write.",
                        "schema": {"type": ["number", "null"], "default": 60, "exclusiveMinimum": 0},
                    },
                    "max_retries": {
                        "label": "Max retries",
                        "description": "Retries after the first attempt for reads and deletes; "
                        "an import is retried only when it never reached the service.",
                        "schema": {"type": ["integer", "null"], "default": 5, "minimum": 0},
                    },
                    "retry_backoff": {
                        "label": "Retry backoff (seconds)",
                        "description": "Retry n waits a random time up to this times 2**n (full jitter), "
                        "unless the service sends Retry-After.",
                        "schema": {"type": ["number", "null"], "default": 1, "minimum": 0},
                    },
                    "verify": {
                        "label": "Verify TLS",
                        "description": "true (default), false, or the path of a CA bundle file.",
                        "schema": {"type": ["string", "null"], "default": "true"},
                    },
                    "app_url": {
                        "label": "Web application URL",
                        "description": "Where people open tables; used for links in the Airflow UI.",
                        "schema": {"type": ["string", "null"]},
                    },
                },
                "ui-field-behaviour": {
                    "hidden-fields": ["schema", "port", "login", "extra"],
                    "relabeling": {"host": "Base URL", "password": "API key"},
                    "placeholders": {
                        "host": "https://tables.example.com",
                        "password": "the X-API-Key from the application's API access page",
                        "project_id": "a ProjectID from the API access page",
                        "timeout": "60",
                        "max_retries": "5",
                        "retry_backoff": "1",
                        "verify": "true",
                        "app_url": "https://app.tables.example.com",
                    },
                },
            }
        ],
    }
