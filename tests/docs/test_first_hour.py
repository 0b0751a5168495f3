"""What a new user meets in the first hour besides the snippets: the set-up's words, a clean tree, docs that render.

(The snippets themselves run in test_docs.py; the install commands in test_install.py.)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(```|~~~)")


def test_the_first_set_up_says_what_it_installs(tmp_path):
    """A cold ``make demo`` was a silent minute and a half; the set-up now says what it is doing first."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts" / "setup.sh")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "uv").write_text('#!/bin/sh\necho "uv $*" >> "$(dirname "$0")/calls"\n')
    (fake / "uv").chmod(0o755)
    env = {**os.environ, "PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"}
    first = subprocess.run(["bash", "scripts/setup.sh"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert "first run: installing Apache Airflow 3.3" in first.stderr
    assert "uv sync --frozen" in (fake / "calls").read_text()
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").symlink_to(sys.executable)
    again = subprocess.run(["bash", "scripts/setup.sh"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert again.returncode == 0 and "first run" not in again.stderr  # a warm set-up stays quiet


def test_what_the_readme_s_commands_leave_behind_is_ignored():
    leftovers = ["emulator-data/tables.json", ".airflow/airflow.db", "dist/airflow_tables-0.2.0.tar.gz", ".venv/x"]
    ignored = subprocess.run(
        ["git", "check-ignore", "--no-index", *leftovers], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    assert sorted(ignored) == sorted(leftovers)


def test_the_readme_links_each_page_once_in_its_list():
    links = re.findall(r"^- \[([^\]]+)\]\(", (ROOT / "README.md").read_text(encoding="utf-8"), re.MULTILINE)
    assert [page for page in set(links) if links.count(page) > 1] == []


def _tables(doc: Path) -> list[tuple[int, list[str], str]]:
    """Each Markdown table outside code blocks: the line it starts on, its rows and the line after it."""
    found, rows, start, fenced = [], [], 0, False
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines() + [""], 1):
        if FENCE.match(line):
            fenced = not fenced
        if not fenced and line.startswith("|"):
            start = start or number
            rows.append(line)
        elif rows:
            found.append((start, rows, line))
            rows, start = [], 0
    return found


def _cells(row: str) -> int:
    return len(re.split(r"(?<!\\)\|", row.strip().strip("|")))


def test_every_table_in_the_docs_has_a_header_and_rows_of_its_width():
    broken = []
    for doc in DOCS:
        for start, rows, after in _tables(doc):
            where = f"{doc.relative_to(ROOT)}:{start}"
            separator = rows[1] if len(rows) > 1 else ""
            if not re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", separator.strip()):
                broken.append(f"{where}: no separator row under the header")
            elif len(rows) < 3:
                broken.append(f"{where}: a header with no rows")
            elif any(_cells(row) != _cells(rows[0]) for row in rows):
                broken.append(f"{where}: rows of another width than the header")
            if after.strip() and not after.startswith("<!--"):  # a paragraph right under a table is one more row
                broken.append(f"{where}: no blank line after the table")
    assert broken == []


def test_the_cli_synopsis_names_every_option():
    from airflow_tables.cli import build_parser

    options = {o for action in build_parser()._actions for o in action.option_strings if o.startswith("--")}
    synopsis = next(
        line
        for line in (ROOT / "docs" / "validation.md").read_text().splitlines()
        if line.startswith("airflow-tables validate FILE")
    )
    assert sorted(o for o in options - {"--help"} if o not in synopsis) == []


def test_the_readme_s_first_command_runs_the_demo_to_its_end():
    """``make demo``, as the README opens with it: set-up, emulator, a real ``airflow dags test``, the table."""
    if Path(sys.prefix).resolve() != (ROOT / ".venv").resolve():
        pytest.skip("the demo runs on the locked Airflow of .venv, as make demo does (not on the matrix's)")
    done = subprocess.run(["make", "demo"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"^table CRD-\S+ \(orders\): 500 rows, read well$", done.stdout, re.MULTILINE), done.stdout
    assert re.search(r"^  order_id +long ", done.stdout, re.MULTILINE), done.stdout  # the columns, with their types
