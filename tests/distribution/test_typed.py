"""The wheel carries what users' tools read: ``py.typed`` (PEP 561) and the UI page's static files."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(distributions) -> zipfile.ZipFile:
    (path,) = distributions.glob("airflow_tables-*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_is_typed(wheel):
    assert "airflow_tables/py.typed" in wheel.namelist()


def test_the_wheel_carries_the_ui_page(wheel):
    assert any(name.startswith("airflow_tables/plugins/static/") for name in wheel.namelist())
