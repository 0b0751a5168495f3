"""The content fingerprint behind ``skip_if_unchanged``: exactly the file's bytes, whatever their size."""

from __future__ import annotations

import os

import xxhash

from airflow_tables.sources.fingerprint import ALGORITHM, fingerprint_file
from airflow_tables.sources.mapped import WINDOW


def expected(data: bytes, encoding: str | None = None) -> str:
    prefix = f"encoding={encoding}\0".encode() if encoding else b""
    return f"{ALGORITHM}:{xxhash.xxh3_128(prefix + data).hexdigest()}:{len(data)}"


def test_a_file_larger_than_a_window_hashes_as_one_stream(tmp_path):
    data = os.urandom(WINDOW * 2 + 12345)
    path = tmp_path / "orders.csv"
    path.write_bytes(data)
    assert fingerprint_file(path) == expected(data)


def test_an_empty_file_has_a_fingerprint(tmp_path):
    path = tmp_path / "empty.csv"
    path.write_bytes(b"")
    assert fingerprint_file(path) == expected(b"")


def test_one_changed_byte_or_a_declared_encoding_changes_it(tmp_path):
    path = tmp_path / "orders.csv"
    path.write_bytes(b"id,amount\n1,2.5\n")
    before = fingerprint_file(path)
    assert fingerprint_file(path, encoding="CP1252") == expected(b"id,amount\n1,2.5\n", "cp1252")
    path.write_bytes(b"id,amount\n1,2.6\n")
    assert fingerprint_file(path) not in (before, fingerprint_file(path, encoding="cp1252"))
