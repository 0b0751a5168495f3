"""The built distribution, installed the way a user installs it: a wheel, a clean venv, the 3.3 constraints.

``uv build`` makes the sdist and the wheel; the wheel (not the source tree) goes into a
fresh venv with ``constraints/airflow-3.3.txt``; there ``airflow providers list`` shows the
provider, and ``example_datatables_import`` runs with ``airflow dags test`` against the
emulator. Marked ``packaging``: it runs once per ``make test``, on the newest Airflow
(``scripts/matrix.py`` leaves it out of the older minors' runs).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from tests._uv import uv_command

from airflow_tables.emulator.testing import EmulatorProcess

ROOT = Path(__file__).resolve().parents[2]
DAG_ID = "example_datatables_import"

pytestmark = [pytest.mark.packaging, pytest.mark.timeout(900)]


def uv() -> str:
    found = uv_command()
    if found is None:
        pytest.fail("uv is not installed (scripts/setup.sh installs it)")
    return found


def run(argv: list[str], *, env: dict[str, str] | None = None, cwd: Path, timeout: float = 600) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
    assert result.returncode == 0, (
        f"{' '.join(argv)} exited {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    )
    return result.stdout


@pytest.fixture(scope="module")
def dist(distributions) -> Path:
    return distributions


@pytest.fixture(scope="module")
def installed(dist, tmp_path_factory) -> Path:
    """A venv holding the wheel and its constrained dependencies, and nothing from the source tree."""
    (wheel,) = dist.glob("*.whl")
    venv = tmp_path_factory.mktemp("wheel-venv") / "venv"
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    run([uv(), "venv", "--quiet", "--python", str(base), str(venv)], cwd=venv.parent)
    constraints = ROOT / "constraints" / "airflow-3.3.txt"
    run(
        [uv(), "pip", "install", "--quiet", "--compile-bytecode", "--python", str(venv / "bin" / "python")]
        + [str(wheel), "-c", str(constraints)],
        cwd=venv.parent,
    )
    return venv


def test_uv_build_makes_an_sdist_with_the_c_source_and_a_wheel_with_the_provider(dist):
    (sdist,) = dist.glob("airflow_tables-*.tar.gz")
    (wheel,) = dist.glob("airflow_tables-*.whl")
    import tarfile

    with tarfile.open(sdist) as tar:
        names = tar.getnames()
    assert any(n.endswith("src/airflow_tables/validation/_speedups.c") for n in names), names
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        assert "provider_info = airflow_tables:get_provider_info" in zf.read(entry_points).decode()
    assert "airflow_tables/operators/tables.py" in names
    assert not any(n.startswith(("tests/", "scripts/", "dags/")) for n in names), "test or repo files in the wheel"


def test_the_license_travels_with_the_sdist_and_the_wheel(dist):
    """Apache-2.0 section 4(a): the licence's text goes with every copy; the metadata names it."""
    import tarfile

    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    (sdist,) = dist.glob("airflow_tables-*.tar.gz")
    (wheel,) = dist.glob("airflow_tables-*.whl")
    with tarfile.open(sdist) as tar:
        licence = next(m for m in tar.getmembers() if m.name.count("/") == 1 and m.name.endswith("/LICENSE"))
        assert tar.extractfile(licence).read().decode() == text  # type: ignore[union-attr]
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        (licence_name,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert zf.read(licence_name).decode() == text
        metadata = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: Apache-2.0" in metadata and "License-File: LICENSE" in metadata
    assert "Requires-Python: >=3.11" in metadata
    for classifier in ("3.11", "3.12", "3.13"):
        assert f"Classifier: Programming Language :: Python :: {classifier}" in metadata
    assert "Provides-Extra: dev" not in metadata, "the test tools are a dependency group, not a published extra"


def test_the_installed_wheel_lists_the_provider_and_runs_a_dag(installed, tmp_path):
    bin_dir = installed / "bin"
    home = tmp_path / "airflow-home"
    dags = tmp_path / "dags"
    shutil.copytree(ROOT / "dags" / "data", dags / "data")
    shutil.copy(ROOT / "dags" / f"{DAG_ID}.py", dags)
    # Nothing of this checkout may leak in: a clean environment, the venv's tools, a directory of its own.
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    where = run(
        [str(bin_dir / "python"), "-c", "import airflow_tables; print(airflow_tables.__file__)"], env=env, cwd=tmp_path
    )
    assert where.strip().startswith(str(installed)), f"imported from {where.strip()}, not the wheel"

    providers = json.loads(run([str(bin_dir / "airflow"), "providers", "list", "-o", "json"], env=env, cwd=tmp_path))
    ours = [p for p in providers if p["package_name"] == "airflow-tables"]
    assert ours, [p["package_name"] for p in providers]
    from airflow_tables import __version__

    assert ours[0]["version"] == __version__

    # What pip shows of the provider (its metadata's Project-URL lines) and what Airflow shows: the documentation.
    probe = "import importlib.metadata as m; print('\\n'.join(m.metadata('airflow-tables').get_all('Project-URL')))"
    urls = dict(
        line.split(", ", 1)
        for line in run([str(bin_dir / "python"), "-c", probe], env=env, cwd=tmp_path).split("\n")
        if line
    )
    assert set(urls) >= {"Documentation", "Changelog", "Bug Tracker", "Source Code"}, urls
    full = json.loads(
        run(
            [str(bin_dir / "airflow"), "providers", "get", "airflow-tables", "--full", "-o", "json"],
            env=env,
            cwd=tmp_path,
        )
    )
    assert full[0]["documentation-url"] == urls["Documentation"], full[0].get("documentation-url")

    with EmulatorProcess(processing_delay=1.0) as emulator:
        connection = {"conn_type": "datatables", "host": emulator.base_url, "password": emulator.api_key}
        connection["extra"] = {"project_id": emulator.project_id}
        env["AIRFLOW_CONN_DATATABLES_DEFAULT"] = json.dumps(connection)
        run([str(bin_dir / "airflow"), "db", "migrate"], env=env, cwd=tmp_path)
        before = {card["CardID"] for card in emulator.list_cards()}
        run([str(bin_dir / "airflow"), "dags", "test", DAG_ID], env=env, cwd=tmp_path)
        new = [card for card in emulator.list_cards() if card["CardID"] not in before]
    assert len(new) == 1, new
    assert new[0]["Processed"] and new[0]["SuccessfulUpload"], new[0]
