"""The test controls: injected statuses, Retry-After, latency, dropped connections, the request log.

"drop after" is the case the hook's no-double-import rule exists for: the import
happened and the credit was spent, yet the client sees no response at all. It is
checked with a raw ``http.client`` request, as the issue asks, and with httpx.
"""

from __future__ import annotations

import http.client
import time

import httpx
import pytest

from airflow_tables.emulator.testing import EmulatorError

IMPORT = "^/v1\\.0/data/import$"


def _raw_import(emu, boundary: str = "rawBoundary") -> http.client.HTTPResponse:
    """An import sent with http.client; returns the response or raises what the connection did."""
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="ProjectID"\r\n\r\n{emu.project_id}\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="File"; filename="raw.csv"\r\n'
        f"Content-Type: text/csv\r\n\r\nid,name\n1,a\n\r\n--{boundary}--\r\n"
    ).encode()
    conn = http.client.HTTPConnection("127.0.0.1", emu.port, timeout=30)
    try:
        conn.request(
            "POST",
            "/v1.0/data/import",
            body=body,
            headers={"X-API-Key": emu.api_key, "Content-Type": f"multipart/form-data; boundary={boundary}"},
        )
        response = conn.getresponse()
        response.read()
        return response
    finally:
        conn.close()


def _last_request(emu) -> dict:
    return emu.stats()["requests"][-1]


def test_a_raw_http_client_import_works_without_faults(emulator):
    response = _raw_import(emulator)
    assert response.status == 200


@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_status_fault_answers_without_handling_the_request(client, emulator, status):
    emulator.set_faults([{"methods": ["POST"], "path": IMPORT, "status": status, "times": 1}])
    with client.costs_nothing():
        client.assert_error(client.upload(), status, "injected fault")
    assert _last_request(emulator) == {
        "method": "POST",
        "path": "/v1.0/data/import",
        "status": status,
        "fault": f"status:{status}",
    }
    assert client.upload().status_code == 200  # "times": 1 is used up
    assert _last_request(emulator)["fault"] is None


@pytest.mark.parametrize(("rule", "header"), [({"retry_after": 2}, "2"), ({}, "1"), ({"retry_after": 0.2}, "1")])
def test_429_carries_retry_after_in_whole_seconds(client, emulator, rule, header):
    emulator.set_faults([{"status": 429, **rule}])
    response = client.list()
    client.assert_error(response, 429, "Too Many Requests")
    assert response.headers["Retry-After"] == header


def test_latency_delays_the_answer_and_the_request_is_still_handled(client, emulator):
    emulator.set_faults([{"methods": ["GET"], "latency": 0.4}])
    started = time.monotonic()
    response = client.list()
    assert time.monotonic() - started >= 0.4
    assert response.status_code == 200
    assert _last_request(emulator)["fault"] == "latency:0.4"


def test_drop_before_closes_the_connection_and_nothing_is_imported(client, emulator):
    emulator.set_faults([{"methods": ["POST"], "path": IMPORT, "drop": "before", "times": 1}])
    with client.costs_nothing(), pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
        _raw_import(emulator)
    assert _last_request(emulator) == {
        "method": "POST",
        "path": "/v1.0/data/import",
        "status": None,
        "fault": "drop:before",
    }


def test_drop_after_imports_and_spends_the_credit_but_sends_no_response(client, emulator):
    emulator.set_faults([{"methods": ["POST"], "path": IMPORT, "drop": "after", "times": 1}])
    stats = emulator.stats()
    names_before = {c["CardID"] for c in client.list().json()["Cards"]}
    with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
        _raw_import(emulator)
    after = emulator.stats()
    assert after["imports_accepted"] == stats["imports_accepted"] + 1
    assert after["credits"][emulator.organisation] == stats["credits"][emulator.organisation] - 1
    new = [c for c in client.list().json()["Cards"] if c["CardID"] not in names_before]
    assert [c["CardName"] for c in new] == ["raw"]
    assert after["requests"][-1] == {
        "method": "POST",
        "path": "/v1.0/data/import",
        "status": None,
        "fault": "drop:after",
    }


def test_drop_after_is_a_disconnect_for_httpx_too(client, emulator):
    emulator.set_faults([{"methods": ["GET"], "drop": "after", "times": 1}])
    with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
        client.list()
    assert client.list().status_code == 200  # the server is fine, the next connection works


def test_probability_with_a_seed_is_reproducible(client, emulator):
    def pattern() -> list[int]:
        emulator.set_faults([{"methods": ["GET"], "status": 503, "probability": 0.5}], seed=7)
        return [client.list().status_code for _ in range(16)]

    first = pattern()
    assert first == pattern()
    assert set(first) == {200, 503}


def test_rules_match_by_method_and_path_and_never_touch_the_controls(client, emulator):
    emulator.set_faults([{"methods": ["DELETE"], "path": "/cards/", "status": 500}, {"path": ".*", "status": 502}])
    client.assert_error(client.delete(emulator.connector_card_id), 500)
    client.assert_error(client.list(), 502)
    assert emulator.stats()["requests"]  # /_emulator/ itself is never faulted
    emulator.clear_faults()
    assert client.list().status_code == 200


def test_the_request_log_can_be_reset(client, emulator):
    client.list()
    assert emulator.stats()["requests"]
    emulator.reset_stats()
    stats = emulator.stats()
    assert (stats["requests"], stats["imports_accepted"]) == ([], 0)
    assert stats["credits"][emulator.organisation] == emulator.credits()


@pytest.mark.parametrize(
    ("rule", "words"),
    [
        ({"status": 200}, ["400-599"]),
        ({"drop": "sometimes"}, ["'before' or 'after'"]),
        ({"status": 503, "drop": "after"}, ["not both"]),
        ({"methods": ["FETCH"], "status": 500}, ["methods"]),
        ({"path": "(", "status": 500}, ["regular expression"]),
        ({"status": 500, "probability": 2}, ["probability"]),
        ({"latency": -1}, ["latency"]),
        ({"methods": ["GET"]}, ["does nothing"]),
        ({"status": 500, "colour": "red"}, ["unknown field", "colour"]),
    ],
)
def test_an_unclear_rule_is_refused_naming_the_field(client, emulator, rule, words):
    response = client.http.put("/_emulator/faults", json={"rules": [rule]})
    client.assert_error(response, 400, "rules[0]", *words)


def test_settings_are_checked(client):
    client.assert_error(client.http.put("/_emulator/settings", json={"processing_delay": -1}), 400, "processing_delay")
    client.assert_error(client.http.put("/_emulator/settings", json={"speed": 1}), 400, "unknown setting")


def test_without_test_controls_there_are_no_controls_and_no_faults(make_emulator):
    emu, client = make_emulator(test_controls=False)
    client.assert_error(client.http.get("/_emulator/stats"), 404)
    client.assert_error(client.http.put("/_emulator/faults", json={"rules": []}), 404)
    with pytest.raises(EmulatorError, match="404"):
        emu.stats()
    assert client.list().status_code == 200
