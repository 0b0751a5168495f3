"""The provider as Airflow sees it: provider info, the hooks list, the connection form."""

from __future__ import annotations

import json

import pytest

from airflow_tables import get_provider_info
from airflow_tables.hooks.tables import DataTablesHook
from airflow_tables.version_compat import AIRFLOW_V_3_2_PLUS

FIELDS = {"timeout", "verify", "max_retries", "retry_backoff", "project_id", "app_url"}


def connection_type() -> dict:
    (conn_type,) = get_provider_info()["connection-types"]
    return conn_type


def test_provider_info_is_literal_data():
    info = get_provider_info()
    assert info["package-name"] == "airflow-tables"
    assert {"name", "description", "versions"} <= info.keys()
    conn_type = connection_type()
    assert conn_type["connection-type"] == DataTablesHook.conn_type == "datatables"
    assert conn_type["hook-class-name"] == "airflow_tables.hooks.tables.DataTablesHook"
    assert conn_type["hook-name"] == DataTablesHook.hook_name
    assert set(conn_type["conn-fields"]) == FIELDS
    json.dumps(info)  # plain data


def test_hook_serves_the_same_form_to_older_airflow():
    behaviour = DataTablesHook.get_ui_field_behaviour()
    assert behaviour["relabeling"] == {"host": "Base URL", "password": "API key"}
    assert behaviour["placeholders"]["host"].startswith("https://")
    assert {"login", "schema", "port"} <= set(behaviour["hidden_fields"])
    assert "host" not in behaviour["hidden_fields"]
    assert "password" not in behaviour["hidden_fields"]


def test_airflow_providers_hooks_lists_the_connection_type(airflow_cli):
    result = airflow_cli("providers", "hooks", "-o", "json")
    assert result.returncode == 0, result.stderr
    hooks = json.loads(result.stdout[result.stdout.index("[") :])
    (ours,) = [h for h in hooks if h["connection_type"] == "datatables"]
    assert ours["class"] == "airflow_tables.hooks.tables.DataTablesHook"
    assert ours["package_name"] == "airflow-tables"
    assert ours["conn_id_attribute_name"] == "datatables_conn_id"


@pytest.mark.skipif(
    not AIRFLOW_V_3_2_PLUS,
    reason="Airflow 3.1's ProvidersManager builds forms from FAB widgets only; its UI mocks FAB (next test)",
)
def test_providers_manager_registers_the_form_without_warnings(recwarn):
    from airflow.providers_manager import ProvidersManager

    manager = ProvidersManager()
    widgets = {k.removeprefix("extra__datatables__"): v for k, v in manager.connection_form_widgets.items()}
    assert widgets.keys() >= FIELDS
    assert widgets["timeout"].field["value"] == 60
    assert widgets["max_retries"].field["value"] == 5
    behaviour = manager.field_behaviours["datatables"]
    assert behaviour["relabeling"]["host"] == "Base URL"
    assert behaviour["placeholders"]["extra__datatables__project_id"]
    hook = manager.hooks["datatables"]
    assert hook.connection_testable
    assert not [w for w in recwarn if "DataTablesHook" in str(w.message)]


def test_the_ui_serves_the_labelled_form_on_every_airflow():
    """What the UI's add-connection dialog is built from: on 3.1 through mocked FAB widgets, later from conn-fields."""
    from airflow.api_fastapi.core_api.services.ui.connections import HookMetaService

    (ours,) = [hook for hook in HookMetaService.hook_meta_data() if hook.connection_type == "datatables"]
    assert ours.hook_class_name == "airflow_tables.hooks.tables.DataTablesHook"
    assert ours.standard_fields.host.title == "Base URL"
    assert ours.standard_fields.password.title == "API key"
    assert ours.standard_fields.login.hidden
    labels = {name: field["schema"]["title"] for name, field in ours.extra_fields.items()}
    assert labels == {name: field["label"] for name, field in connection_type()["conn-fields"].items()}


def test_every_module_and_class_named_in_the_provider_info_imports():
    import importlib

    info = get_provider_info()
    for kind in ("operators", "sensors", "triggers", "hooks"):
        for entry in info[kind]:
            for module in entry["python-modules"]:
                importlib.import_module(module)
    for name in [*info["extra-links"], *(c["hook-class-name"] for c in info["connection-types"])]:
        module, _, attribute = name.rpartition(".")
        assert isinstance(getattr(importlib.import_module(module), attribute), type)


def test_the_form_is_the_hook_class_s_own_as_airflow_3_1_looks_for_it():
    """Airflow 3.1's ProvidersManager reads the form methods from ``DataTablesHook.__dict__`` only (not a base's)."""
    from airflow_tables.hooks.tables import DataTablesHook

    assert {"get_ui_field_behaviour", "get_connection_form_widgets"} <= set(vars(DataTablesHook))
    assert DataTablesHook.get_ui_field_behaviour()["relabeling"]["host"] == "Base URL"
