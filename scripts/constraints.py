#!/usr/bin/env python3
"""Lock a working dependency set per Airflow minor and derive its pip constraints file.

For each supported minor ``3.N`` this resolves, with ``uv pip compile --universal`` (one
answer for every Python the project supports, with markers where they differ):

* the project itself (``-e .``: its runtime dependencies from ``pyproject.toml``),
* the tools its tests need (the ``dev`` dependency group, less its own pin of Airflow),
* ``apache-airflow==3.N.*`` (or the pre-release in :data:`PRE_RELEASES`), and the caps in
  :data:`CAPS` for that minor: dependencies whose
  newest release breaks that Airflow (found by running the test suite on it).

It writes ``constraints/airflow-3.N.lock`` (uv's output: every pin, with the ``# via``
lines that say why it is there) and derives ``constraints/airflow-3.N.txt`` from it: the
same pins without the project's own line, in pip's constraints format, so that

    pip install -e . -c constraints/airflow-3.N.txt

installs the set the matrix tests ran on (``scripts/matrix.py`` builds its venvs that way).

    scripts/constraints.py                 re-resolve every minor (needs PyPI)
    scripts/constraints.py --minor 3.2     one minor
    scripts/constraints.py --derive        only re-derive the .txt files from the locks (offline)
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = ROOT / "constraints"
MINORS = ("3.1", "3.2", "3.3", "3.4")
#: Minors not released yet, tested at a pre-release so that users who upgrade on the release day
#: are not the first to find out; each resolves to that exact version instead of ``3.N.*``.
PRE_RELEASES = {"3.4": "3.4.0b2"}
#: The oldest Python the project supports: the resolution covers it and every newer one.
PYTHON_FLOOR = "3.11"

#: Per minor, requirements added to the resolution because the newest release of a dependency
#: breaks that Airflow; each with the reason, which is also written into the lock's header.
CAPS: dict[str, dict[str, str]] = {
    "3.1": {},
    "3.2": {
        "fastapi<0.156.1": (
            "FastAPI 0.156.1 and later break Airflow 3.2's execution API: building its routes raises "
            "PydanticUserError 'TITerminalStatePayload needs a discriminator field', so dag.test() and every task "
            "fail (0.156.0 works; pydantic is not the cause: 2.12 and 2.13 fail the same way)"
        ),
        "svcs<26.2": (
            "with svcs 26.2.0 Airflow 3.2's execution API finds no service registry on its requests "
            "(AttributeError: 'State' object has no attribute 'svcs_registry'), so every task of "
            "dag.test() or 'airflow dags test' fails, even a DAG of one @task (26.1.0 works)"
        ),
    },
    "3.3": {},
    "3.4": {},
}

_AIRFLOW = re.compile(r"^apache-airflow\s*(?:[=<>!~\[;]|$)")


def lock_path(minor: str) -> Path:
    return CONSTRAINTS / f"airflow-{minor}.lock"


def constraints_path(minor: str) -> Path:
    return CONSTRAINTS / f"airflow-{minor}.txt"


def test_requirements() -> list[str]:
    """The ``dev`` dependency group without its pin of Airflow: what the tests need besides the project."""
    groups = tomllib.loads((ROOT / "pyproject.toml").read_text())["dependency-groups"]
    return [req for req in groups["dev"] if not _AIRFLOW.match(req)]


def project_extras() -> str:
    """Every extra of the project, as pip writes them after its name (``emulator,pandas,gx,s3``)."""
    return ",".join(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])


def uv() -> str:
    found = shutil.which("uv") or str(Path.home() / ".local" / "bin" / "uv")
    if not Path(found).exists():
        sys.exit("constraints: uv is not installed (scripts/setup.sh installs it)")
    return found


def resolve(minor: str) -> None:
    """``uv pip compile`` the minor's set into its lock file."""
    caps = CAPS[minor]
    with tempfile.TemporaryDirectory() as tmp:
        requirements = Path(tmp) / "requirements.in"
        airflow = f"apache-airflow=={PRE_RELEASES.get(minor, minor + '.*')}"
        lines = [f"-e .[{project_extras()}]", airflow, *test_requirements(), *caps]
        requirements.write_text("\n".join(lines) + "\n")
        header = [f"Airflow {minor}: the project with its extras, its test tools and {airflow}"]
        header += [f"cap {req}: {why}" for req, why in caps.items()]
        command = [
            uv(),
            "pip",
            "compile",
            str(requirements),
            "--universal",
            "--python-version",
            PYTHON_FLOOR,
            "--no-header",
            "--quiet",
            "--output-file",
            str(lock_path(minor)),
        ]
        CONSTRAINTS.mkdir(exist_ok=True)
        subprocess.run(command, cwd=ROOT, check=True)
    body = lock_path(minor).read_text()
    # The temporary input's path is noise in every "# via" line that names it.
    body = body.replace(f"-r {requirements}", "-r requirements.in")
    intro = "".join(f"# {line}\n" for line in [*header, "generated by scripts/constraints.py; do not edit"])
    lock_path(minor).write_text(intro + body)


def derive(minor: str) -> str:
    """The constraints text for ``minor``: the lock's pins, without comments or the project's own line."""
    pins = []
    for line in lock_path(minor).read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "-e ", "-r ", "--")):
            continue
        pins.append(line)
    header = (
        f"# Constraints for Apache Airflow {minor}: a tested working set of airflow-tables' dependencies.\n"
        f"#   pip install -e . -c constraints/airflow-{minor}.txt\n"
        f"# Derived by scripts/constraints.py from constraints/airflow-{minor}.lock; do not edit.\n"
    )
    return header + "\n".join(pins) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minor", action="append", choices=MINORS, help="only this minor (repeatable)")
    parser.add_argument("--derive", action="store_true", help="only re-derive the constraints from the locks")
    args = parser.parse_args()
    for minor in args.minor or MINORS:
        if not args.derive:
            resolve(minor)
        constraints_path(minor).write_text(derive(minor))
        print(f"constraints: wrote {constraints_path(minor).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
