"""Every command of docs/install.md that is not a ``pip install``, run as written where this machine can.

``tests/docs/test_install.py`` runs the page's ``pip install`` commands. The others are run
here, each in the way its effects allow: read-only ones in this checkout, ones that write
(the constraints, the size measurement's venvs) in a fresh copy of it or a temporary
directory. A command this machine cannot run is listed in :data:`NOT_HERE` with the reason,
and a command the page gains later fails :func:`test_every_command_is_run_or_says_why_not`
until it is given a way to run or a reason.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from tests.docs.test_install import FENCE, PAGE, ROOT, checkout_copy

pytestmark = [pytest.mark.packaging, pytest.mark.timeout(900)]

#: Commands that cannot run here, with the reason.
NOT_HERE = {
    "pipx run cibuildwheel --platform linux": "needs a Docker engine, which this machine has not",
}
#: The matrix's commands: ``make test`` runs ``scripts/matrix.py`` itself, as written (scripts/test.sh);
#: the others are the same script with other arguments, each a test run of its own.
RUN_BY_MAKE_TEST = re.compile(r"^scripts/matrix\.py(\s|$)")


def page_lines() -> list[str]:
    """Every command of the page's ``bash`` blocks, continuation lines joined, comments dropped."""
    commands: list[str] = []
    lang = None
    for line in PAGE.read_text().splitlines():
        fence = FENCE.match(line)
        if lang is None:
            if fence:
                lang = fence.group("lang")
            continue
        if fence:
            lang = None
            continue
        if lang != "bash":
            continue
        text = re.sub(r"\s+#.*$", "", line).strip()  # a comment after the command
        if commands and commands[-1].endswith("\\"):
            commands[-1] = commands[-1][:-1].rstrip() + " " + text
        elif text and not text.startswith("#"):
            commands.append(text)
    return commands


def others() -> list[str]:
    """The commands that are neither ``pip install`` (the other test's) nor a variable's assignment."""
    return [c for c in page_lines() if not c.startswith("pip install") and not re.match(r"^[A-Z_]+=", c)]


def shell(text: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """Run ``text`` with bash as a user's shell in ``cwd`` would, this checkout's ``.venv`` first on PATH."""
    path = f"{ROOT / '.venv' / 'bin'}:{Path.home() / '.local' / 'bin'}:{os.environ['PATH']}"
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", text],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PATH": path, **env},
    )


def test_every_command_is_run_or_says_why_not():
    handled = {*CONSTRAINTS_COMMANDS, *NOT_HERE, PROVIDERS_LIST}
    for command in others():
        if command in handled or RUN_BY_MAKE_TEST.match(command) or command in SIZE_BLOCK:
            continue
        pytest.fail(f"docs/install.md runs {command!r}, which no test runs; run it here or say in NOT_HERE why not")


def test_make_test_runs_the_matrix_script_as_written():
    script = (ROOT / "scripts" / "test.sh").read_text()
    as_written = re.search(r"^scripts/matrix\.py --setup-only(\s|$)", script, re.MULTILINE)
    assert as_written, "make test does not run scripts/matrix.py as docs/install.md writes it"
    assert re.search(r"^scripts/matrix\.py -- ", script, re.MULTILINE)
    for name in ("matrix.py", "constraints.py"):
        path = ROOT / "scripts" / name
        assert os.access(path, os.X_OK) and path.read_text().startswith("#!/usr/bin/env python3\n"), name


PROVIDERS_LIST = "airflow providers list | grep airflow-tables"


def test_airflow_lists_the_provider(tmp_path):
    done = shell(PROVIDERS_LIST, tmp_path, AIRFLOW_HOME=str(tmp_path / "home"))
    assert done.returncode == 0, done.stderr[-3000:]
    from airflow_tables import __version__

    assert "airflow-tables" in done.stdout and __version__ in done.stdout, done.stdout


CONSTRAINTS_COMMANDS = [
    "scripts/constraints.py --derive",
    "scripts/constraints.py --minor 3.2",
    "scripts/constraints.py",
]


def test_the_constraints_commands_run_as_written(tmp_path):
    """In a copy (they rewrite ``constraints/``): derived offline the files are the committed ones."""
    copy = checkout_copy(tmp_path)
    assert sorted(c for c in others() if c.startswith("scripts/constraints.py")) == sorted(CONSTRAINTS_COMMANDS)
    derived = shell(CONSTRAINTS_COMMANDS[0], copy)
    assert derived.returncode == 0, derived.stderr[-3000:]
    for committed in (ROOT / "constraints").glob("*.txt"):
        assert (copy / "constraints" / committed.name).read_text() == committed.read_text(), committed.name
    for command in CONSTRAINTS_COMMANDS[1:]:  # these ask PyPI, as the page says
        resolved = shell(command, copy)
        assert resolved.returncode == 0, f"{command}: {resolved.stderr[-3000:]}"
        assert "constraints: wrote constraints/airflow-3.2.txt" in resolved.stdout
        assert "apache-airflow==3.2." in (copy / "constraints" / "airflow-3.2.txt").read_text()


def _size_block() -> list[str]:
    """The page's size measurement: from ``uv export`` to the import timing."""
    lines = others()
    start = next(i for i, c in enumerate(lines) if c.startswith("uv export"))
    end = next(i for i, c in enumerate(lines) if c.startswith("/tmp/base/bin/python"))
    return lines[start : end + 1]


SIZE_BLOCK = _size_block()


def test_the_size_measurement_runs_as_written(tmp_path):
    """Its ``/tmp`` paths moved under the test's directory; the base install imports no pandas."""
    text = "\n".join(SIZE_BLOCK).replace("/tmp/", f"{tmp_path}/")
    done = shell(text, ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    sizes = re.findall(r"^(\S+)\s+(\S+)$", done.stdout, re.MULTILINE)
    assert [Path(where).name for _, where in sizes] == ["base", "full"], done.stdout
    seconds = float(done.stdout.strip().splitlines()[-1])
    assert 0 < seconds < 10, seconds
    check = "import airflow.sdk, airflow_tables.operators.tables, sys; print('pandas' in sys.modules)"
    pandas = subprocess.run([str(tmp_path / "base" / "bin" / "python"), "-c", check], capture_output=True, text=True)
    assert pandas.stdout.strip() == "False", pandas.stdout + pandas.stderr
