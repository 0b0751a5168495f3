"""The hook against the emulator over HTTP: every endpoint, refusal, typed error, retry and key rule."""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import threading
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import pytest

from airflow_tables import exceptions as ex

UNKNOWN_CARD = "CRD-00000000-0000-4000-8000-000000000000"
CARD_SHAPE = re.compile(r"CRD-[0-9a-fA-F-]{36}\Z")


@pytest.fixture(autouse=True)
def _clean(request):
    """Every emulator test starts with no faults and empty request statistics."""
    if "emulator" not in request.fixturenames:
        yield
        return
    emulator = request.getfixturevalue("emulator")
    emulator.clear_faults()
    emulator.reset_stats()
    yield  # the root conftest clears faults and settings afterwards


def requests_to(emulator, method: str, pattern: str = "") -> list[dict]:
    return [r for r in emulator.stats()["requests"] if r["method"] == method and re.search(pattern, r["path"])]


def credits(emulator) -> int:
    return emulator.credits()


def find_summary(cards: list[dict], card_id: str) -> dict | None:
    """The listing's entry for ``card_id``, or ``None``."""
    return next((card for card in cards if card["CardID"] == card_id), None)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- endpoints ------------------------------------------------------------------------------------


def test_list_and_get_return_the_service_fields_without_envelope(hook, emulator):
    cards = hook.list_cards()  # the connection's project_id extra
    connector = find_summary(cards, emulator.connector_card_id)
    assert connector is not None
    assert connector["LockedFromDelete"] is True
    assert all("Msg" not in c and "ExecTime" not in c for c in cards)
    assert hook.list_cards(emulator.project_id) == cards
    detail = hook.get_card(emulator.project_id, emulator.connector_card_id)
    assert detail["CardID"] == emulator.connector_card_id
    assert {"Columns", "Description", "Processed", "SuccessfulUpload"} <= detail.keys()
    assert "Msg" not in detail
    assert "ExecTime" not in detail


def test_import_wait_replace_delete(hook, emulator, csv_path):
    before = credits(emulator)
    card_id = hook.import_csv(emulator.project_id, csv_path)
    assert CARD_SHAPE.match(card_id)
    summary = hook.wait_for_processed(emulator.project_id, card_id, poll_interval=0.05, timeout=30)
    assert summary["Processed"] is True
    assert summary["SuccessfulUpload"] is True
    assert summary["Rows"] == 3
    csv_path.write_text("id,region,amount\n1,north,10\n")
    assert hook.import_csv(emulator.project_id, csv_path, card_id=card_id) == card_id
    assert hook.wait_for_processed(emulator.project_id, card_id, poll_interval=0.05, timeout=30)["Rows"] == 1
    assert credits(emulator) == before - 2
    hook.delete_card(emulator.project_id, card_id)
    assert find_summary(hook.list_cards(), card_id) is None
    with pytest.raises(ex.DataTablesNotFoundError) as info:
        hook.get_card(emulator.project_id, card_id)
    assert info.value.status_code == 404
    with pytest.raises(ex.DataTablesNotFoundError):
        hook.wait_for_processed(emulator.project_id, card_id, poll_interval=0.05, timeout=5)


def test_import_dataframe_uploads_a_validated_csv_and_removes_it(hook, emulator, tmp_path, monkeypatch):
    import tempfile

    import pandas as pd

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    df = pd.DataFrame({"id": range(1000), "city": ["Lisbon", "Zürich, CH", 'say "hi"', "a\nb"] * 250})
    card_id = hook.import_dataframe(None, df, "cities")
    summary = hook.wait_for_processed(None, card_id, poll_interval=0.05, timeout=30)
    assert summary["Rows"] == 1000
    assert summary["CardName"].startswith("cities")
    assert list(tmp_path.iterdir()) == []
    hook.delete_card(None, card_id)


def test_import_dataframe_refuses_an_invalid_frame_before_any_request(hook, emulator):
    import pandas as pd

    df = pd.DataFrame({f"c{i}": [1] for i in range(301)})
    with pytest.raises(ex.CsvValidationError):
        hook.import_dataframe(None, df, "wide.csv")
    assert emulator.stats()["requests"] == []


def test_wait_after_a_replacement_waits_for_the_new_file(hook, emulator, csv_path):
    card_id = hook.import_csv(None, csv_path)
    before = hook.wait_for_processed(None, card_id, poll_interval=0.05, timeout=30)
    emulator.set_processing_delay(0.5)
    csv_path.write_text("id,region,amount\n9,west,90\n")
    hook.import_csv(None, csv_path, card_id=card_id)
    after = hook.wait_for_processed(
        None, card_id, poll_interval=0.05, timeout=30, replaced_after=before["UploadCompletionTime"]
    )
    assert after["Rows"] == 1
    assert after["UploadCompletionTime"] >= before["UploadCompletionTime"]
    hook.delete_card(None, card_id)


def test_wait_times_out_on_a_wall_clock_deadline(hook, emulator, csv_path):
    emulator.set_processing_delay(30)
    card_id = hook.import_csv(None, csv_path)
    started = time.monotonic()
    with pytest.raises(ex.DataTablesTimeoutError, match="still being read"):
        hook.wait_for_processed(None, card_id, poll_interval=0.1, timeout=0.5)
    assert 0.5 <= time.monotonic() - started < 3
    assert len(requests_to(emulator, "GET", rf"/cards/{card_id}$")) >= 3  # it looked again and again: a fetch each


# -- refusals and typed errors ------------------------------------------------------------------


def test_unknown_key_is_an_authentication_error(make_hook, emulator):
    hook = make_hook(emulator.base_url, "not-a-key", project_id=emulator.project_id)
    with pytest.raises(ex.DataTablesAuthenticationError) as info:
        hook.list_cards()
    assert info.value.status_code == 401
    assert isinstance(info.value, ex.DataTablesPermissionError)
    assert len(requests_to(emulator, "GET")) == 1  # never retried


def test_read_only_key_may_list_but_not_import_or_delete(make_hook, emulator, csv_path):
    hook = make_hook(emulator.base_url, emulator.read_only_key, project_id=emulator.project_id)
    assert find_summary(hook.list_cards(), emulator.connector_card_id) is not None
    before = credits(emulator)
    with pytest.raises(ex.DataTablesPermissionError) as info:
        hook.import_csv(None, csv_path)
    assert info.value.status_code == 403
    with pytest.raises(ex.DataTablesPermissionError):
        hook.delete_card(None, emulator.connector_card_id)
    with pytest.raises(ex.DataTablesPermissionError):
        hook.list_cards(emulator.other_project_id)
    assert credits(emulator) == before
    assert len(requests_to(emulator, "POST")) == 1


def test_unknown_card_is_not_found_and_not_retried(hook, emulator):
    with pytest.raises(ex.DataTablesNotFoundError):
        hook.get_card(None, UNKNOWN_CARD)
    with pytest.raises(ex.DataTablesNotFoundError):
        hook.delete_card(None, UNKNOWN_CARD)
    assert len(emulator.stats()["requests"]) == 2


@pytest.mark.parametrize(
    ("name", "text", "cls", "status"),
    [
        ("sales.txt", "a,b\n1,2\n", ex.DataTablesBadRequestError, 400),  # the hook leaves names to the service
        ("wide.csv", ",".join(f"c{i}" for i in range(301)) + "\n" + ",".join("1" * 301) + "\n",
         ex.DataTablesRejectedFileError, 422),
    ],
)  # fmt: skip
def test_files_the_service_refuses_are_typed_and_cost_nothing(hook, emulator, tmp_path, name, text, cls, status):
    path = tmp_path / name
    path.write_text(text)
    before = credits(emulator)
    with pytest.raises(cls) as info:
        hook.import_csv(None, path)
    assert info.value.status_code == status
    assert credits(emulator) == before


def test_missing_file_fails_before_any_request(hook, emulator, tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing was sent"):
        hook.import_csv(None, tmp_path / "nope.csv")
    with pytest.raises(FileNotFoundError, match="not a file"):
        hook.import_csv(None, tmp_path)
    assert emulator.stats()["requests"] == []


def test_replace_and_delete_while_being_read_are_conflicts(hook, emulator, csv_path):
    emulator.set_processing_delay(30)
    card_id = hook.import_csv(None, csv_path)
    with pytest.raises(ex.DataTablesConflictError) as info:
        hook.import_csv(None, csv_path, card_id=card_id)
    assert info.value.status_code == 409
    with pytest.raises(ex.DataTablesConflictError) as info:
        hook.delete_card(None, card_id)
    assert not isinstance(info.value, ex.DataTablesLockedError)
    assert len(requests_to(emulator, "DELETE")) == 1
    emulator.set_processing_delay(0)
    emulator.wait_until_processed(emulator.project_id, card_id, 30)
    hook.delete_card(None, card_id)


def test_deleting_a_locked_connector_table_is_a_locked_error(hook, emulator):
    with pytest.raises(ex.DataTablesLockedError) as info:
        hook.delete_card(None, emulator.connector_card_id)
    assert info.value.status_code == 409
    assert "LockedFromDelete" in str(info.value)
    assert len(requests_to(emulator, "DELETE")) == 1


def test_failed_reading_raises_upload_failed(hook, emulator, csv_path):
    emulator.set_fail_readings(1)
    card_id = hook.import_csv(None, csv_path)
    with pytest.raises(ex.DataTablesUploadFailedError, match=card_id):
        hook.wait_for_processed(None, card_id, poll_interval=0.05, timeout=30)
    hook.delete_card(None, card_id)


def test_no_credit_and_too_large_are_typed_and_cost_nothing(make_hook, tmp_path):
    from airflow_tables.emulator.testing import EmulatorProcess, make_test_config

    config = {**make_test_config(credits=1), "limits": {"max_bytes": 4096, "max_columns": 300}}
    with EmulatorProcess(config=config) as emu:
        hook = make_hook(emu.base_url, emu.api_key, project_id=emu.project_id)
        big, small = tmp_path / "big.csv", tmp_path / "small.csv"
        big.write_text("a,b\n" + "1,2\n" * 2000)
        small.write_text("a,b\n1,2\n")
        with pytest.raises(ex.DataTablesRejectedFileError) as info:
            hook.import_csv(None, big)
        assert info.value.status_code == 413
        assert emu.credits() == 1
        hook.import_csv(None, small)
        assert emu.credits() == 0
        with pytest.raises(ex.DataTablesCreditsError) as info:
            hook.import_csv(None, small)
        assert info.value.status_code == 402
        assert [r["status"] for r in emu.stats()["requests"] if r["method"] == "POST"] == [413, 200, 402]


# -- ids in paths -----------------------------------------------------------------------------------

TRICKS = ["../../data/import", "P/cards/CRD-x", "x?ProjectID=y", "x#frag", "a%2F..%2Fb", "..%2F", "a b"]


@pytest.mark.parametrize("project_id", TRICKS)
def test_project_id_tricks_reach_only_the_list_url(hook, emulator, project_id):
    imports = emulator.stats()["imports_accepted"]
    # A department this key cannot see (403), or a path the server will not route once it decodes %2F (404).
    with pytest.raises((ex.DataTablesPermissionError, ex.DataTablesNotFoundError)) as info:
        hook.list_cards(project_id)
    assert info.value.url.endswith(f"/v1.0/projects/{quote(project_id, safe='')}/cards")
    (only,) = emulator.stats()["requests"]
    assert (only["method"], only["status"]) == ("GET", info.value.status_code)
    assert only["path"] in (
        f"/v1.0/projects/{project_id}/cards",
        f"/v1.0/projects/{quote(project_id, safe='')}/cards",
    )
    assert emulator.stats()["imports_accepted"] == imports


@pytest.mark.parametrize("card_id", ["CRD-x/../../cards", "../CRD-1", "CRD-1?x=1", "CRD-1#f", "CRD-%2F", ".."])
def test_card_id_tricks_are_refused_before_any_request(hook, emulator, card_id, csv_path):
    for call in (hook.get_card, hook.delete_card):
        with pytest.raises(ValueError, match="CardID"):
            call(None, card_id)
    with pytest.raises(ValueError, match="CardID"):
        hook.import_csv(None, csv_path, card_id=card_id)
    assert emulator.stats()["requests"] == []


# -- retries --------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_reads_are_retried_on_transient_statuses(hook, emulator, status):
    emulator.set_faults([{"methods": ["GET"], "path": r"/cards$", "status": status, "times": 2}])
    assert hook.list_cards()
    assert [r["status"] for r in requests_to(emulator, "GET")] == [status, status, 200]


def test_retries_stop_at_max_retries(make_hook, emulator):
    hook = make_hook(emulator.base_url, emulator.api_key, project_id=emulator.project_id, max_retries=2)
    emulator.set_faults([{"methods": ["GET"], "path": r"/cards$", "status": 500}])
    with pytest.raises(ex.DataTablesServerError) as info:
        hook.list_cards()
    assert info.value.status_code == 500
    assert len(requests_to(emulator, "GET")) == 3


def test_the_hooks_own_max_retries_and_timeout_bound_the_connections(make_hook, emulator):
    """A caller that must answer quickly (the page) asks for one attempt within its own time."""
    from airflow_tables.hooks.tables import DataTablesHook

    make_hook(emulator.base_url, emulator.api_key, project_id=emulator.project_id, max_retries=5, timeout=30)
    hook = DataTablesHook(max_retries=0, timeout=0.5, backoff_base=0.001)
    assert (hook.settings.timeout, hook.settings.max_retries) == (0.5, 0)
    emulator.set_faults([{"methods": ["GET"], "path": r"/cards$", "status": 503}])
    with pytest.raises(ex.DataTablesServerError):
        hook.list_cards()
    assert len(requests_to(emulator, "GET")) == 1, "max_retries=0 makes one attempt, whatever the connection says"
    assert DataTablesHook(timeout=60).settings.timeout == 30, "the lower of the two timeouts applies"


def test_retry_after_is_honoured(hook, emulator):
    emulator.set_faults([{"methods": ["GET"], "path": r"/cards$", "status": 429, "retry_after": 1, "times": 1}])
    started = time.monotonic()
    hook.list_cards()
    assert time.monotonic() - started >= 0.95  # the backoff alone would wait at most 0.01 s
    assert len(requests_to(emulator, "GET")) == 2


def test_dropped_connections_and_timeouts_are_retried_for_reads(make_hook, emulator):
    hook = make_hook(emulator.base_url, emulator.api_key, project_id=emulator.project_id, timeout=0.5)
    emulator.set_faults(
        [
            {"methods": ["GET"], "path": r"/cards$", "drop": "before", "times": 1},
            {"methods": ["GET"], "path": r"/cards$", "latency": 3, "times": 1},
        ]
    )
    assert hook.list_cards()
    assert len(requests_to(emulator, "GET")) == 3


def test_a_delete_whose_answer_was_lost_is_done_not_failed(hook, emulator, csv_path):
    card_id = hook.import_csv(None, csv_path)
    emulator.wait_until_processed(emulator.project_id, card_id, 30)
    emulator.reset_stats()
    emulator.set_faults([{"methods": ["DELETE"], "path": re.escape(card_id), "drop": "after", "times": 1}])
    hook.delete_card(None, card_id)
    assert [r["method"] for r in emulator.stats()["requests"]] == ["DELETE", "DELETE"]
    assert find_summary(hook.list_cards(), card_id) is None


def test_the_async_call_path_reads_a_delete_whose_answer_was_lost_as_done(hook, emulator, csv_path):
    """Issue 39 point 5: the landed rule is the call path's, not the sync side's: httpx reads it the same."""
    from airflow_tables.hooks._http import delete_table

    card_id = hook.import_csv(None, csv_path)
    emulator.wait_until_processed(emulator.project_id, card_id, 30)
    emulator.reset_stats()
    emulator.set_faults([{"methods": ["DELETE"], "path": re.escape(card_id), "drop": "after", "times": 1}])
    assert asyncio.run(hook._acall(delete_table, None, card_id)) == {}
    assert [r["method"] for r in emulator.stats()["requests"]] == ["DELETE", "DELETE"]
    assert find_summary(hook.list_cards(), card_id) is None


def test_a_404_without_an_earlier_attempt_that_may_have_landed_is_not_found(hook, emulator):
    """Only an attempt that may have landed makes a 404 mean done: a first 404 is the table's absence."""
    from airflow_tables.hooks._http import delete_table

    for call in (
        lambda: hook.delete_card(None, UNKNOWN_CARD),
        lambda: asyncio.run(hook._acall(delete_table, None, UNKNOWN_CARD)),
    ):
        with pytest.raises(ex.DataTablesNotFoundError):
            call()


def test_a_delete_is_retried_on_502(hook, emulator, csv_path):
    card_id = hook.import_csv(None, csv_path)
    emulator.wait_until_processed(emulator.project_id, card_id, 30)
    emulator.reset_stats()
    emulator.set_faults([{"methods": ["DELETE"], "path": r"/cards/", "status": 502, "times": 1}])
    hook.delete_card(None, card_id)
    assert [r["status"] for r in requests_to(emulator, "DELETE")] == [502, 200]


# -- the paid import: sent at most once ---------------------------------------------------------


@pytest.mark.parametrize("fault", [{"status": 503}, {"status": 500}, {"drop": "after"}])
def test_an_import_that_may_have_landed_is_never_resent(hook, emulator, csv_path, fault):
    emulator.set_faults([{"methods": ["POST"], "path": r"/data/import$", "times": 1, **fault}])
    before_credits, before_imports = credits(emulator), emulator.stats()["imports_accepted"]
    tables_before = {c["CardID"] for c in hook.list_cards()}
    with pytest.raises(ex.DataTablesImportUncertainError) as info:
        hook.import_csv(None, csv_path)
    text = str(info.value)
    assert "may have happened" in text
    assert "list_cards" in text
    assert "sales.csv" in text
    assert len(requests_to(emulator, "POST")) == 1
    landed = emulator.stats()["imports_accepted"] - before_imports
    assert credits(emulator) == before_credits - landed
    new_tables = [c for c in hook.list_cards() if c["CardID"] not in tables_before]
    assert len(new_tables) == landed
    if fault.get("drop") == "after":  # processed, then the socket closed: exactly one table, one credit
        assert landed == 1
        assert new_tables[0]["CardName"].startswith("sales")
    for card in new_tables:
        emulator.wait_until_processed(emulator.project_id, card["CardID"], 30)
        hook.delete_card(None, card["CardID"])


def test_an_import_refused_before_sending_is_retried_then_reported(make_hook, csv_path, capfd):
    hook = make_hook(f"http://127.0.0.1:{closed_port()}", "k" * 24, project_id="P", max_retries=3)
    with pytest.raises(ex.DataTablesConnectionError) as info:
        hook.import_csv(None, csv_path)
    assert not isinstance(info.value, ex.DataTablesImportUncertainError)
    assert info.value.request_sent is False
    assert "could not connect" in str(info.value)
    logged = capfd.readouterr().out  # the hook logs through Airflow's structlog, to stdout here
    assert len(re.findall(r"could not connect.*; retry \d of 3", logged)) == 3


def test_an_import_refused_until_the_service_is_back_lands_once(fresh_emulator, make_hook, csv_path, capfd):
    hook = make_hook(
        fresh_emulator.base_url, fresh_emulator.api_key, project_id=fresh_emulator.project_id, max_retries=60
    )
    hook.backoff_base, hook.backoff_max = 0.05, 0.25
    before = fresh_emulator.credits()
    fresh_emulator.kill()
    restarter = threading.Timer(0.5, fresh_emulator.restart)
    restarter.start()
    try:
        card_id = hook.import_csv(None, csv_path)
    finally:
        restarter.join()
    assert CARD_SHAPE.match(card_id)
    assert "could not connect" in capfd.readouterr().out  # it was refused first, then retried
    assert fresh_emulator.credits() == before - 1
    assert len([c for c in hook.list_cards() if c["CardName"].startswith("sales")]) == 1


# -- the key ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["short", "long"])
def test_the_key_never_appears_in_logs_errors_or_reprs(make_hook, emulator, csv_path, caplog, capfd, kind):
    key = "xq7" if kind == "short" else emulator.api_key
    hook = make_hook(emulator.base_url, key, project_id=emulator.project_id, max_retries=1)
    texts = [repr(hook), repr(hook.settings)]
    emulator.set_faults([{"methods": ["GET"], "path": r"/cards$", "status": 503, "times": 1}])
    with caplog.at_level(logging.DEBUG):
        for call in (
            hook.list_cards,
            lambda: hook.get_card(None, UNKNOWN_CARD),
            lambda: hook.delete_card(None, emulator.connector_card_id),
            lambda: hook.import_csv(None, csv_path),
            lambda: hook.list_cards(emulator.other_project_id + "-none"),
        ):
            try:
                texts.append(repr(call()))
            except ex.DataTablesError as exc:
                texts += [str(exc), repr(exc), str(exc.__cause__), repr(exc.__cause__)]
        texts.append(repr(hook.test_connection()))
        emulator.set_faults([{"methods": ["POST"], "path": r"/data/import$", "drop": "after", "times": 1}])
        try:
            hook.import_csv(None, csv_path)
        except ex.DataTablesError as exc:
            texts += [str(exc), repr(exc), str(exc.__cause__), repr(exc.__cause__)]
    out, err = capfd.readouterr()
    texts += [caplog.text, out, err]
    assert any("failed" in t for t in texts)  # the calls did fail, and said so
    assert all(key not in t for t in texts)
    for card in hook.list_cards() if kind == "long" else []:
        if card["CardName"].startswith("sales"):
            emulator.wait_until_processed(emulator.project_id, card["CardID"], 30)
            hook.delete_card(None, card["CardID"])


# -- the Test button ----------------------------------------------------------------------------


def test_test_connection_tells_a_good_key_from_a_bad_one(make_hook, emulator):
    good = make_hook(emulator.base_url, emulator.api_key, project_id=emulator.project_id)
    ok, message = good.test_connection()
    assert ok, message
    assert emulator.project_id in message
    ok, message = make_hook(emulator.base_url, emulator.read_only_key).test_connection()  # no project_id
    assert ok, message
    ok, message = make_hook(emulator.base_url, "wrong-key-123").test_connection()
    assert not ok
    assert "401" in message
    assert "wrong-key-123" not in message
    ok, message = make_hook(emulator.base_url, emulator.api_key, project_id="no-such-dept").test_connection()
    assert not ok
    assert "403" in message
    ok, message = make_hook(f"http://127.0.0.1:{closed_port()}", emulator.api_key).test_connection()
    assert not ok
    assert "could not connect" in message


def test_airflow_connections_test_uses_the_hook(emulator, airflow_cli):
    import json

    conn = {"conn_type": "datatables", "host": emulator.base_url, "password": emulator.api_key}
    env = {"AIRFLOW__CORE__TEST_CONNECTION": "Enabled", "AIRFLOW_CONN_DT_CLI": json.dumps(conn)}
    result = airflow_cli("connections", "test", "dt_cli", **env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Connection success!" in result.stdout
    env["AIRFLOW_CONN_DT_CLI"] = json.dumps({**conn, "password": "bad"})
    result = airflow_cli("connections", "test", "dt_cli", **env)
    from airflow_tables.version_compat import AIRFLOW_V_3_3_PLUS

    assert result.returncode == (1 if AIRFLOW_V_3_3_PLUS else 0)  # before 3.3 the CLI exits 0 on a failed test
    assert "Connection failed!" in result.stdout
    assert "401" in result.stdout
    assert "bad" not in result.stdout.replace("bad_", "")


# -- async twins ----------------------------------------------------------------------------------


def test_async_twins_share_answers_errors_and_retries(hook, emulator, monkeypatch):
    def no_sync_lookup(*args, **kwargs):
        raise AssertionError("the async path must not resolve the connection synchronously")

    monkeypatch.setattr(type(hook), "get_connection", classmethod(no_sync_lookup))
    emulator.set_faults([{"methods": ["GET"], "path": r"/cards$", "status": 503, "times": 1}])

    async def run():
        cards = await hook.a_list_cards()
        card = await hook.a_get_card(None, emulator.connector_card_id)
        with pytest.raises(ex.DataTablesNotFoundError):
            await hook.a_get_card(None, UNKNOWN_CARD)
        return cards, card

    cards, card = asyncio.run(run())
    assert find_summary(cards, emulator.connector_card_id) is not None
    assert card["CardID"] == emulator.connector_card_id
    assert "Msg" not in card
    assert [r["status"] for r in requests_to(emulator, "GET")] == [503, 200, 200, 404]


def test_the_typed_methods_read_the_services_tables(hook, emulator, csv_path):
    """tables/table/find_tables/find_table (and the async twins): typed, one request each, as the list shows them."""
    from airflow_tables.model import TableDetail, TableStatus, TableSummary

    card_id = hook.import_csv(None, csv_path)
    hook.wait_for_table(None, card_id, poll_interval=0.05, timeout=30)
    emulator.reset_stats()
    tables = hook.tables()
    assert all(type(t) is TableSummary for t in tables)
    mine = next(t for t in tables if t.card_id == card_id)
    assert (mine.name, mine.rows, mine.status) == ("sales", 3, TableStatus.READY)
    connector = next(t for t in tables if t.card_id == emulator.connector_card_id)
    assert connector.locked_from_delete is True and connector.fed_by_live_connection
    detail = hook.table(None, card_id)
    assert type(detail) is TableDetail and [c.name for c in detail.columns] == ["id", "region", "amount"]
    assert detail.summary == mine
    assert hook.find_tables(None, [card_id, UNKNOWN_CARD]).keys() == {t.card_id for t in tables}
    assert hook.find_table(None, card_id) == mine
    assert hook.find_table(None, UNKNOWN_CARD) is None  # listed, then fetched once: gone
    lists, fetches = requests_to(emulator, "GET", r"/cards$"), requests_to(emulator, "GET", r"/cards/CRD-")
    assert (len(lists), len(fetches)) == (4, 3)  # a list per call but table(); the gone table fetched twice

    async def run():
        async with hook.async_client():
            return await hook.a_tables(), await hook.a_table(None, card_id)

    atables, adetail = asyncio.run(run())
    assert atables == tables and adetail == detail and adetail.description == detail.description


def test_the_dict_edges_return_exactly_what_the_service_said(hook, emulator, csv_path):
    """list_cards, get_card, find_card(s), wait_for_processed and a look's summary: the service's own objects."""
    card_id = hook.import_csv(None, csv_path)
    summary = hook.wait_for_processed(None, card_id, poll_interval=0.05, timeout=30)
    from airflow_tables.hooks._http import fetch_table, list_tables

    listed = hook._call(list_tables, None)["Cards"]  # what list_cards returned before the typed model
    fetched = hook._call(fetch_table, None, card_id)
    assert hook.list_cards() == listed
    assert asyncio.run(hook.a_list_cards()) == listed
    assert hook.get_card(None, card_id) == fetched == asyncio.run(hook.a_get_card(None, card_id))
    assert {"Description", "Columns"} <= fetched.keys()
    assert summary == find_summary(listed, card_id) == hook.find_card(None, card_id)
    assert hook.look(None, card_id).summary == summary
    assert hook.find_cards(None, [card_id]) == {card["CardID"]: card for card in listed}
    assert hook.find_card(None, UNKNOWN_CARD) is None


def test_a_fetched_table_that_names_no_table_is_a_malformed_answer(offline_hook, monkeypatch):
    monkeypatch.setattr(offline_hook, "_call", lambda method, project_id, card_id=None: {"CardName": "x"})
    with pytest.raises(ex.DataTablesError, match="HTTP 200.*malformed table"):
        offline_hook.get_card(None, CARD)
    assert "could not read the file" in offline_hook.failed_read_reason("P", CARD)  # it gave no explanation


def test_a_find_cards_is_deprecated_and_names_its_replacement(hook, emulator):
    from airflow.exceptions import AirflowProviderDeprecationWarning

    with pytest.warns(AirflowProviderDeprecationWarning, match=r"a_find_cards is deprecated.*a_tables\(\)"):
        cards = asyncio.run(hook.a_find_cards(None, [emulator.connector_card_id, UNKNOWN_CARD]))
    assert cards == hook.find_cards(None, [emulator.connector_card_id, UNKNOWN_CARD])


@pytest.mark.parametrize("value", [{"a": 1}, ["P"], 1.5, True])
def test_a_project_id_that_is_not_a_string_is_refused(make_hook, emulator, value):
    with pytest.raises(ValueError, match="project_id") as info:
        make_hook(emulator.base_url, emulator.api_key, project_id=value).list_cards()
    assert "'datatables_default'" in str(info.value)  # the connection's extra: it names the connection
    hook = make_hook(emulator.base_url, emulator.api_key)
    for call in (hook.list_cards, lambda p: asyncio.run(hook.a_list_cards(p))):
        with pytest.raises(ValueError, match="project_id must be a string"):
            call(value)
    assert emulator.stats()["requests"] == []


# -- waits without the service: what the hook decides from a look ---------------------------------

CARD = "CRD-0b6f3c1e-5d2a-4c1b-9a8e-1f2d3c4b5a69"
READ = {
    "CardID": CARD,
    "CardName": "sales",
    "Rows": 3,
    "Processed": True,
    "UploadCompletionTime": "2026-01-01T00:00:00",
}


@pytest.fixture
def offline_hook(make_hook):
    """A hook whose connection points nowhere: each test says what its looks see."""
    return make_hook("http://127.0.0.1:1", "k-0123456789", project_id="P", max_retries=0)


def _seen(hook, monkeypatch, summary: dict | None, served_at: str | None = None) -> None:
    """Each look of ``hook`` fetches ``summary`` (None: not found), answered at ``served_at`` by the service's clock."""
    from airflow_tables.exceptions import DataTablesNotFoundError
    from airflow_tables.model import TableDetail

    def table(project_id, card_id):
        hook.served_at = served_at
        if summary is None:
            raise DataTablesNotFoundError(404, "no such table")
        return TableDetail.from_json(summary)

    monkeypatch.setattr(hook, "table", table)


@pytest.mark.parametrize("succeeded", [True, False], ids=["ready", "failed"])
@pytest.mark.parametrize("served_at", [None, READ["UploadCompletionTime"]], ids=["undated", "same-second"])
def test_a_send_right_after_a_read_ended_waits_out_the_replacement_spacing(
    offline_hook, monkeypatch, succeeded, served_at
):
    """While the service's clock may be in the second the last read ended in (or says nothing), a send waits."""
    from airflow_tables.model import REPLACEMENT_SPACING

    _seen(offline_hook, monkeypatch, {**READ, "SuccessfulUpload": succeeded}, served_at)
    after_look = offline_hook.send_when_idle(None, CARD, lambda look: time.monotonic() - look.seen_at)
    assert REPLACEMENT_SPACING <= after_look < REPLACEMENT_SPACING + 0.5


def test_a_send_after_the_service_dated_a_later_second_does_not_wait(offline_hook, monkeypatch):
    """A read ending after this look ends in a later second than the last one: no spacing is needed."""
    _seen(offline_hook, monkeypatch, {**READ, "SuccessfulUpload": True}, served_at="2026-01-01T00:00:01")
    after_look = offline_hook.send_when_idle(None, CARD, lambda look: time.monotonic() - look.seen_at)
    assert after_look < 0.5


@pytest.mark.parametrize("spacing", [None, 0.0], ids=["gone", "spacing-0"])
def test_a_gone_table_or_a_send_that_starts_no_read_does_not_wait(offline_hook, monkeypatch, spacing):
    _seen(offline_hook, monkeypatch, None if spacing is None else {**READ, "SuccessfulUpload": True})
    kwargs = {} if spacing is None else {"spacing": spacing}
    started = time.monotonic()
    offline_hook.send_when_idle(None, CARD, lambda look: None, **kwargs)
    assert time.monotonic() - started < 0.5


def test_a_look_is_one_fetch_dated_by_the_services_clock(hook, emulator, csv_path):
    """Not a list of the department (its cost grows with the department): one fetch, and the answer's Date."""
    from airflow_tables.model import TableStatus, service_time

    card_id = hook.import_csv(None, csv_path)
    hook.wait_for_table(None, card_id, poll_interval=0.05, timeout=30)
    emulator.reset_stats()
    before = service_time(datetime.now(UTC) - timedelta(seconds=2))  # a server's Date may lag (uvicorn: a second)
    look = hook.look(None, card_id)
    after = service_time(datetime.now(UTC))
    assert look.status is TableStatus.READY and look.table is not None and look.table.card_id == card_id
    assert [(r["method"], r["path"].rsplit("/", 1)[-1]) for r in emulator.stats()["requests"]] == [("GET", card_id)]
    assert look.served_at is not None and before <= look.served_at <= after  # never ahead: a late one only waits
    gone = hook.look(None, UNKNOWN_CARD)
    assert gone.status is TableStatus.GONE and gone.table is None


def test_find_cards_gives_a_fetched_table_as_its_summary(offline_hook, monkeypatch):
    """A table the list lacks is fetched; find_card(s) still return the summary, as the list shows it."""
    from airflow_tables.model import TableDetail, TableSummary

    detail = {**READ, "SuccessfulUpload": True, "Description": "Sales.", "Columns": [{"ColumnName": "id"}]}
    monkeypatch.setattr(offline_hook, "tables", lambda project_id: [])
    monkeypatch.setattr(offline_hook, "table", lambda project_id, card_id: TableDetail.from_json(detail))
    assert offline_hook.find_cards(None, [CARD]) == {CARD: {**READ, "SuccessfulUpload": True}}
    assert offline_hook.find_card(None, CARD) == {**READ, "SuccessfulUpload": True}
    assert offline_hook.find_table(None, CARD) == TableSummary.from_json(READ | {"SuccessfulUpload": True})
    assert type(offline_hook.find_table(None, CARD)) is TableSummary


# -- what the operators rely on (from tests/operators/test_hook_contract.py) -------------------------


def test_a_refused_delete_of_a_table_being_read_is_busy_not_locked(hook, emulator, csv_path):
    emulator.set_processing_delay(5.0)
    emulator.set_settings(lock_while_reading=True)
    card_id = hook.import_csv(None, csv_path)
    with pytest.raises(ex.DataTablesBusyError) as refused:
        hook.delete_card(None, card_id)
    assert not isinstance(refused.value, ex.DataTablesLockedError)
    assert "being read" in refused.value.msg


def test_timeout_none_means_no_deadline(hook, emulator, csv_path):
    emulator.set_processing_delay(0.5)
    card_id = hook.import_csv(None, csv_path)
    assert hook.wait_for_table(None, card_id, poll_interval=0.1, timeout=None).status.value == "ready"


def test_a_timeout_message_says_how_long_it_waited(hook, emulator, csv_path):
    emulator.set_processing_delay(5.0)
    card_id = hook.import_csv(None, csv_path)
    with pytest.raises(ex.DataTablesTimeoutError, match=r"after 0\.3 s"):
        hook.wait_for_processed(None, card_id, poll_interval=0.1, timeout=0.3)


@pytest.mark.parametrize("project_id", ["", "  ", "None", " None\n"])
def test_a_project_id_that_rendered_nothing_is_refused_before_any_request(hook, emulator, csv_path, project_id):
    """Issue 39 point 4: one check and one sentence for every endpoint ("None" once asked for such a department)."""
    calls = (
        lambda: hook.list_cards(project_id),
        lambda: hook.get_card(project_id, CARD),
        lambda: hook.delete_card(project_id, CARD),
        lambda: hook.import_csv(project_id, csv_path),
        lambda: asyncio.run(hook.a_list_cards(project_id)),
    )
    for call in calls:
        with pytest.raises(ValueError, match=r"project_id is .*, which names no department") as refused:
            call()
        assert repr(project_id) in str(refused.value)
    assert emulator.stats()["requests"] == []


def test_white_space_around_a_project_id_is_removed_as_a_task_removes_it(hook, emulator):
    assert hook.list_cards(f" {emulator.project_id}\n") == hook.list_cards(emulator.project_id)
    assert {r["path"] for r in emulator.stats()["requests"]} == {f"/v1.0/projects/{emulator.project_id}/cards"}


def test_a_host_ending_in_the_api_version_is_told_to_drop_it(make_hook, emulator):
    hook = make_hook(emulator.base_url + "/v1.0", emulator.api_key)
    with pytest.raises(ValueError, match=r"drop '/v1.0'"):
        hook.list_cards(emulator.project_id)


def test_an_https_host_against_plain_http_says_tls_failed_and_is_not_retried(make_hook, emulator):
    bare = emulator.base_url.split("://", 1)[1]  # no scheme: read as https
    hook = make_hook(bare, emulator.api_key, max_retries=5)
    with pytest.raises(ex.DataTablesConnectionError) as error:
        hook.list_cards(emulator.project_id)
    text = str(error.value)
    assert "TLS handshake" in text and "nothing was sent" in text
    assert f"http://{bare}" in text
    assert error.value.retryable is False and error.value.request_sent is False
    assert emulator.stats()["requests"] == []


# -- table names and the names the service stores (issue 26 points 1 and 3) -----------------------------


@pytest.mark.parametrize(
    ("upload", "stored"),
    [("orders.csv", "orders"), ("données.csv", "données"), ('say "hi".csv', "say %22hi%22"), ("a.CSV", "a")],
)
def test_the_name_the_service_stores_is_the_name_it_receives(hook, emulator, tmp_path, upload, stored):
    from airflow_tables.evidence import stored_name, stored_names

    path = tmp_path / upload
    path.write_text("id,amount\n1,10\n", encoding="utf-8")
    card_id = hook.import_csv(emulator.project_id, path)
    assert stored_name(upload) == stored and stored in stored_names(upload)
    assert next(c for c in emulator.list_cards() if c["CardID"] == card_id)["CardName"] == stored


def test_table_name_is_sent_as_the_file_name(hook, emulator, csv_path):
    card_id = hook.import_csv(emulator.project_id, csv_path, table_name="Orders (daily)")
    assert next(c for c in emulator.list_cards() if c["CardID"] == card_id)["CardName"] == "Orders (daily)"


@pytest.mark.parametrize("bad", ["", " padded ", "d1/orders", "a\\b", "two\nlines"])
def test_a_table_name_that_cannot_be_a_file_name_fails_before_any_request(hook, emulator, csv_path, bad):
    with pytest.raises(ValueError, match="table_name"):
        hook.import_csv(emulator.project_id, csv_path, table_name=bad)
    assert requests_to(emulator, "POST") == []
