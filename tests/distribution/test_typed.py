"""The wheel carries what users' tools read: ``py.typed`` (PEP 561) and the UI page's static files."""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def uv() -> str | None:
    return shutil.which("uv") or next((str(p) for p in [Path.home() / ".local" / "bin" / "uv"] if p.exists()), None)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    tool = uv()
    if tool is None:
        pytest.skip("uv is not installed (scripts/setup.sh installs it)")
    out = tmp_path_factory.mktemp("wheel")
    # setuptools leaves src/airflow_tables.egg-info behind; on sys.path, it makes Airflow see the
    # package twice (its plugin "already registered"), so it goes when the build is done.
    egg_info = ROOT / "src" / "airflow_tables.egg-info"
    had_egg_info = egg_info.exists()
    build = subprocess.run(
        [tool, "build", "--wheel", "--out-dir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "UV_NO_PROGRESS": "1"},
    )
    if not had_egg_info:
        shutil.rmtree(egg_info, ignore_errors=True)
    assert build.returncode == 0, build.stderr[-3000:]
    (path,) = out.glob("airflow_tables-*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_is_typed(wheel):
    assert "airflow_tables/py.typed" in wheel.namelist()


def test_the_wheel_carries_the_ui_page(wheel):
    assert any(name.startswith("airflow_tables/plugins/static/") for name in wheel.namelist())
