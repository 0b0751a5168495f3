"""The emulator's banner prints the provider's connection, and it works as pasted."""

from __future__ import annotations

import json
import re
import subprocess

from tests.emulator._cli import EMULATOR, start_cli, stop_cli

PASTE = re.compile(r"^  (export AIRFLOW_CONN_DATATABLES_DEFAULT=.*)$", re.MULTILINE)


def test_the_banners_connection_line_works_as_pasted_in_a_shell_and_a_hook(monkeypatch, tmp_path):
    proc, info, log = start_cli([*EMULATOR, "--data-dir", str(tmp_path / "data")], tmp_path)  # a first run
    try:
        banner = log.read_text()
        (line,) = PASTE.findall(banner)
        value = subprocess.run(
            ["bash", "-c", f'{line}\nprintf %s "$AIRFLOW_CONN_DATATABLES_DEFAULT"'],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        conn = json.loads(value)
        assert conn["conn_type"] == "datatables"
        assert conn["host"] == info["url"] and not conn["host"].endswith("/v1.0")
        key = re.search(r"X-API-Key:\s+(\S+)", banner).group(1)
        project_id = re.search(r"ProjectID:\s+(\S+)", banner).group(1)
        assert (conn["password"], conn["extra"]) == (key, {"project_id": project_id})

        from airflow_tables.hooks.tables import DataTablesHook

        monkeypatch.setenv("AIRFLOW_CONN_DATATABLES_DEFAULT", value)
        hook = DataTablesHook()
        path = tmp_path / "pasted.csv"
        path.write_text("id\n1\n")
        card_id = hook.import_csv(None, path)  # no project_id: the connection's default department
        assert hook.wait_for_processed(None, card_id, poll_interval=0.05, timeout=30)["CardName"] == "pasted"
        assert [c["CardID"] for c in hook.list_cards(project_id)] == [card_id]
    finally:
        stop_cli(proc)


def test_a_key_from_a_config_file_is_never_printed(emulator):
    """The shared test emulator runs on a --config file: its banner names the key's place, not the key."""
    banner = emulator.log_tail(10_000)
    (line,) = PASTE.findall(banner)[-1:]
    assert emulator.api_key not in banner
    assert '"password": "<api_keys[0].key>"' in line and emulator.project_id in banner
