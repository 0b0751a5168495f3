#!/usr/bin/env python3
"""The test suite on the other Airflow minors and Pythons, each in a venv of its own built from its constraints.

``make test`` runs the whole suite on the locked Airflow (``.venv``: 3.3 on Python 3.11, the
lowest Python the package declares), then this: the lowest declared versions on Python 3.11,
Airflow 3.2 on Python 3.12, and Airflow 3.4's pre-release on Python 3.13, the highest Python
declared. A venv per entry, ``.venvs/<name>`` (git-ignored), made with uv (its cache is
shared, so a second venv costs seconds) the way a user installs:

    uv pip install -e '.[<every extra>]' <test tools> -c constraints/airflow-3.N.txt

Each entry's Python comes from the machine (``python3.N`` on ``PATH``, or pyenv's versions);
where one is missing the entry fails, naming it: a Python the package declares is never
skipped in silence.

and in it the tests whose outcome can depend on Airflow: hooks, operators, sensors,
triggers, DAG runs (``dag.test()``), example DAGs, reliability and security (3.2, between
the two, leaves the hooks', the sources' and the docs' to them: :data:`LEFT_TO_NEIGHBOURS`). Left out,
because they never import Airflow and so cannot change with it: the CSV validator's and
the emulator's tests, and everything marked ``e2e`` (the real distributed stack runs on the
newest minor only) or ``packaging`` (it builds and installs a wheel once).

A third venv, ``.venvs/lowest``, holds the lowest versions the provider declares for its
direct dependencies (``pyproject.toml``: Airflow, requests, httpx, xxhash and the extras'),
resolved by ``uv pip install --resolution lowest-direct``, with everything under them as a
user's resolver picks it today (the newest that fits); the test tools are pinned as in the 3.1
constraints (they are ours, not the provider's). It runs the same tests, so a floor that no
longer works fails ``make test``; raise the floor in ``pyproject.toml`` then.

The test runs go side by side (each mostly keeps one core busy), each into
``artifacts/matrix/<name>.log``, printed when it ends.

    scripts/matrix.py                     set up and test lowest, 3.2 and 3.4
    scripts/matrix.py lowest              only the lowest declared versions
    scripts/matrix.py 3.1 -- -x -k sensor  one minor (3.1's latest patch is not in the default run:
                                          lowest is Airflow 3.1), extra pytest arguments
    scripts/matrix.py --setup-only 3.2    only (re)build the venv
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from constraints import (  # noqa: E402
    PYTHON_FLOOR,
    ROOT,
    constraints_path,
    project_extras,
    test_requirements,
    tomllib,
    uv,
)

VENVS = ROOT / ".venvs"
#: Each minor's pytest output (they run side by side) and its Airflow home.
LOGS = ROOT / "artifacts" / "matrix"
SOURCES_DIR = ROOT / "src" / "airflow_tables"
#: In each venv: the digest of the inputs it was last installed from (see inputs_digest).
STAMP = ".airflow-tables-inputs"
#: The venv of the lowest declared versions (see the module's docstring), run with the minors.
LOWEST = "lowest"
#: What ``make test`` runs here, besides ``.venv`` (3.3 on the lowest Python): Airflow 3.1 at
#: the declared floors, 3.2, and the next minor's pre-release on the highest Python.
DEFAULT = (LOWEST, "3.2", "3.4")
#: The Python of each entry: between them and ``.venv`` every declared Python runs the tests.
PYTHONS = {LOWEST: PYTHON_FLOOR, "3.1": PYTHON_FLOOR, "3.2": "3.12", "3.4": "3.13"}
#: Where the lowest venv's test tools take their versions from.
TOOLS_FROM = "3.1"
#: Test directories whose outcome cannot depend on Airflow: the same on every minor. The
#: validator's and the emulator's never import it; the distribution's read the built wheel's
#: metadata (and each run would build it again).
AIRFLOW_FREE = ("tests/validation", "tests/emulator", "tests/distribution")
MARKERS = "not e2e and not packaging"
#: Tests too heavy to repeat on every minor; they run once, on 3.3. The 200 imports under
#: faults take minutes there and more than 25 minutes through Airflow 3.1's dag.test() on 2
#: cores; what they exercise below 3.3 (the CardID kept in a Variable, an adopted import
#: whose answer was lost) has tests of its own in tests/operators that run on every minor.
HEAVY = ("tests/reliability/test_faults.py::test_two_hundred_imports_under_faults",)
#: What the middle minor (3.2) leaves to its neighbours: tests whose code meets Airflow only
#: through APIs that 3.1 and 3.4 both exercise too (the connection a hook reads, object storage
#: paths, the CSV readers under them), so a difference would show below or above it first. 3.2 runs
#: what its scheduler and task runner can change: operators, sensors, triggers, plugins, assets,
#: events and DAG runs. Python 3.12 (this entry's) still runs every module on import, through them.
#: It keeps ``make test`` within CI's 45 minutes on 2 cores (CI's run of 4f622b4: 2677 s).
LEFT_TO_NEIGHBOURS = {
    # tests/lineage drives `airflow dags test` processes with the OpenLineage provider and StatsD: issue 43 asks for
    # the lowest and the newest Airflow, which the neighbours are.
    "3.2": ("tests/hooks", "tests/sources", "tests/expectations", "tests/docs", "tests/reliability", "tests/lineage"),
}


def venv_dir(minor: str) -> Path:
    return VENVS / (LOWEST if minor == LOWEST else f"airflow-{minor}")


def label(minor: str) -> str:
    return LOWEST if minor == LOWEST else f"airflow-{minor}"


def python_of(minor: str) -> Path:
    return venv_dir(minor) / "bin" / "python"


def find_python(version: str) -> str:
    """An interpreter of Python ``version`` (``3.13``) on this machine, or exit naming the one missing.

    ``python3.N`` on ``PATH`` when it runs (a pyenv shim of a version not selected does not),
    else pyenv's own copy (``$PYENV_ROOT/versions/3.N.*``).
    """
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates = [shutil.which(f"python{version}")]
    candidates += sorted(pyenv_root.glob(f"versions/{version}.*/bin/python{version}"), reverse=True)
    probe = "import sys; print('%d.%d' % sys.version_info[:2])"
    for candidate in filter(None, candidates):
        found = subprocess.run([str(candidate), "-c", probe], capture_output=True, text=True)
        if found.returncode == 0 and found.stdout.strip() == version:
            return str(candidate)
    sys.exit(f"matrix: Python {version} is not on this machine (no working python{version} on PATH or in {pyenv_root})")


def inputs_digest(minor: str) -> str:
    """What the venv's contents follow from: the constraints, the project's metadata and its C source."""
    digest = hashlib.sha256()
    constraints = constraints_path(TOOLS_FROM if minor == LOWEST else minor)
    digest.update(minor.encode() + b"\0" + PYTHONS[minor].encode() + b"\0")
    for path in (constraints, ROOT / "pyproject.toml", ROOT / "setup.py", *SOURCES_DIR.glob("*.c")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def requirement_name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.-]+", requirement).group(0)).lower()  # type: ignore[union-attr]


def lowest_requirements(venv: Path) -> list[str]:
    """``uv pip install`` arguments for the lowest declared versions, the test tools pinned as in 3.1's constraints.

    The tools the provider also declares (the Amazon provider is the ``s3`` extra's) stay at
    the provider's floor; the rest are pinned through a constraints file written into the venv.
    """
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {requirement_name(req) for req in project["dependencies"]}
    for extra, requirements in project["optional-dependencies"].items():
        if extra != "dev":
            declared |= {requirement_name(req) for req in requirements}
    tools = [req for req in test_requirements() if requirement_name(req) not in declared]
    names = {requirement_name(req) for req in tools}
    pins = [
        line
        for line in constraints_path(TOOLS_FROM).read_text().splitlines()
        if "==" in line and not line.startswith("#") and requirement_name(line) in names
    ]
    pinned = venv / "tools-constraints.txt"
    pinned.write_text("\n".join(pins) + "\n")
    return ["--resolution", "lowest-direct", "-e", f"{ROOT}[{project_extras()}]", *tools, "-c", str(pinned)]


def venv_python(venv: Path) -> str | None:
    """The Python version (``3.12``) a venv was made with, from its ``pyvenv.cfg``; ``None`` without one."""
    config = venv / "pyvenv.cfg"
    if not config.exists():
        return None
    found = re.search(r"^version(?:_info)?\s*=\s*(\d+\.\d+)", config.read_text(), re.MULTILINE)
    return found.group(1) if found else None


def setup(minor: str) -> None:
    """Create the minor's venv if missing and install the constrained set; nothing to do if its inputs are unchanged."""
    venv = venv_dir(minor)
    stamp = venv / STAMP
    if python_of(minor).exists() and stamp.exists() and stamp.read_text() == inputs_digest(minor):
        return
    if minor == LOWEST or venv_python(venv) not in (None, PYTHONS[minor]):
        # From nothing: uv keeps what is installed when it satisfies, and a floor raised in
        # pyproject.toml must not be tested with the versions the old floors left behind; a
        # venv of another Python cannot be changed into one of this Python.
        shutil.rmtree(venv, ignore_errors=True)
    if not python_of(minor).exists():
        python = find_python(PYTHONS[minor])
        subprocess.run([uv(), "venv", "--quiet", "--python", python, str(venv)], check=True)
    if minor == LOWEST:
        command = [uv(), "pip", "install", "--quiet", "--compile-bytecode", "--python", str(python_of(minor))]
        subprocess.run([*command, *lowest_requirements(venv)], check=True, cwd=ROOT)
        stamp.write_text(inputs_digest(minor))
        return
    command = [
        uv(),
        "pip",
        "install",
        "--quiet",
        "--compile-bytecode",
        "--python",
        str(python_of(minor)),
        "-e",
        f"{ROOT}[{project_extras()}]",
        *test_requirements(),
        "-c",
        str(constraints_path(minor)),
    ]
    subprocess.run(command, check=True, cwd=ROOT)
    stamp.write_text(inputs_digest(minor))


def airflow_version(minor: str) -> str:
    probe = "import importlib.metadata as m; print(m.version('apache-airflow'))"
    result = subprocess.run([str(python_of(minor)), "-c", probe], capture_output=True, text=True, check=True)
    return result.stdout.strip()


def test_command(minor: str, pytest_args: list[str]) -> list[str]:
    deselected = HEAVY
    ignored = (*AIRFLOW_FREE, *LEFT_TO_NEIGHBOURS.get(minor, ()))
    ignores = [f"--ignore={path}" for path in ignored] + [f"--deselect={test}" for test in deselected]
    return [str(python_of(minor)), "-m", "pytest", "-m", MARKERS, "-p", "no:cacheprovider", *ignores, *pytest_args]


def test_env(minor: str) -> dict[str, str]:
    """The environment of a minor's pytest: an Airflow home of its own, so minors run side by side."""
    home = LOGS / f"{label(minor)}-home"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    return {**os.environ, "AIRFLOW_HOME": str(home)}


def run_side_by_side(minors: list[str], pytest_args: list[str]) -> dict[str, tuple[int, float]]:
    """Run every minor's tests at once, each into its log; print the logs in order; return (exit, seconds).

    A test run here is mostly one busy core (dag.test() runs the task in its process), so on
    a 2-core machine two minors side by side take little longer than one.
    """
    LOGS.mkdir(parents=True, exist_ok=True)
    running = {}
    for minor in minors:
        log = open(LOGS / f"{label(minor)}.log", "wb")  # noqa: SIM115 - closed once the run ends
        process = subprocess.Popen(
            test_command(minor, pytest_args), cwd=ROOT, env=test_env(minor), stdout=log, stderr=subprocess.STDOUT
        )
        running[minor] = (process, log, time.monotonic())
    outcome = {}
    for minor, (process, log, started) in running.items():
        code = process.wait()
        log.close()
        outcome[minor] = (code, time.monotonic() - started)
        print(f"\n===== matrix: {label(minor)}, its pytest ({LOGS.relative_to(ROOT)}/{label(minor)}.log) =====")
        print((LOGS / f"{label(minor)}.log").read_text(errors="replace"), flush=True)
    return outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("minors", nargs="*", default=list(DEFAULT), help=f"Airflow minors, e.g. 3.1, or {LOWEST!r}")
    parser.add_argument("--setup-only", action="store_true")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    pytest_args = argv[split + 1 :]  # after "--": passed to pytest

    results: dict[str, str] = {}
    ready = []
    for minor in args.minors:
        print(f"\n===== matrix: {label(minor)} in {venv_dir(minor).relative_to(ROOT)} =====", flush=True)
        started = time.monotonic()
        try:
            setup(minor)
        except subprocess.CalledProcessError as err:
            source = "pyproject.toml's floors" if minor == LOWEST else constraints_path(minor).relative_to(ROOT)
            results[minor] = f"SET-UP FAILED ({err}); from {source}"
            continue
        print(f"Airflow {airflow_version(minor)}, set up in {time.monotonic() - started:.0f} s", flush=True)
        if args.setup_only:
            results[minor] = f"set up, Airflow {airflow_version(minor)}"
        else:
            ready.append(minor)

    for minor, (code, took) in run_side_by_side(ready, pytest_args).items():
        verdict = "passed" if code == 0 else f"FAILED (pytest exit {code})"
        results[minor] = f"Airflow {airflow_version(minor)}: {verdict} in {took:.0f} s"

    print("\n===== matrix summary =====")
    for minor, result in sorted(results.items()):
        print(f"  {minor}: {result}")
        if "FAILED" in result:
            print(f"       re-run: scripts/matrix.py {minor}")
    return 0 if all("FAILED" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
