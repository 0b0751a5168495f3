"""The emulator's banner prints the provider's connection, and it works as pasted."""

from __future__ import annotations

import json
import re
import subprocess

from airflow_tables.emulator.testing import LOG_NAME


def _pasted_line(emulator) -> str:
    banner = (emulator.data_dir / LOG_NAME).read_text()
    lines = re.findall(r"^  (export AIRFLOW_CONN_DATATABLES_DEFAULT=.*)$", banner, flags=re.MULTILINE)
    assert lines, banner
    return lines[-1]  # the latest start of this data directory


def test_the_banners_connection_line_works_as_pasted_in_a_shell_and_a_hook(emulator, monkeypatch, tmp_path):
    line = _pasted_line(emulator)
    value = subprocess.run(
        ["bash", "-c", f'{line}\nprintf %s "$AIRFLOW_CONN_DATATABLES_DEFAULT"'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    conn = json.loads(value)
    assert conn["conn_type"] == "datatables"
    assert conn["host"] == emulator.base_url and not conn["host"].endswith("/v1.0")
    assert conn["password"] == emulator.api_key  # the key that may manage data
    project_id = conn["extra"]["project_id"]
    assert project_id in (emulator.project_id, emulator.other_project_id)

    from airflow_tables.hooks.tables import DataTablesHook

    monkeypatch.setenv("AIRFLOW_CONN_DATATABLES_DEFAULT", value)
    hook = DataTablesHook()
    path = tmp_path / "pasted.csv"
    path.write_text("id\n1\n")
    card_id = hook.import_csv(None, path)  # no project_id: the connection's default department
    assert hook.wait_for_processed(None, card_id, poll_interval=0.05, timeout=30)["CardName"] == "pasted"
    assert any(c["CardID"] == card_id for c in emulator.list_cards(project_id))
    hook.delete_card(None, card_id)
