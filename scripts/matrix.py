"""The test suite on older Airflow minors, each in a venv of its own built from its constraints.

``make test`` runs the whole suite on the locked Airflow (``.venv``, 3.3), then this, for
3.1 and 3.2: a venv per minor, ``.venvs/airflow-3.N`` (git-ignored), made with uv (its
cache is shared, so a second venv costs seconds) the way a user installs:

    uv pip install -e . <test tools> -c constraints/airflow-3.N.txt

and in it the tests whose outcome can depend on Airflow: hooks, operators, sensors,
triggers, DAG runs (``dag.test()``), example DAGs, reliability and security. Left out,
because they never import Airflow and so cannot change with it: the CSV validator's and
the emulator's tests, and everything marked ``e2e`` (the real distributed stack runs on the
newest minor only) or ``packaging`` (it builds and installs a wheel once).

The minors' test runs go side by side (each mostly keeps one core busy), each into
``artifacts/matrix/airflow-3.N.log``, printed when it ends.

    scripts/matrix.py                     set up and test 3.1 and 3.2
    scripts/matrix.py 3.1 -- -x -k sensor  one minor, extra pytest arguments
    scripts/matrix.py --setup-only 3.2    only (re)build the venv
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from constraints import ROOT, constraints_path, test_requirements, uv  # noqa: E402

VENVS = ROOT / ".venvs"
#: Each minor's pytest output (they run side by side) and its Airflow home.
LOGS = ROOT / "artifacts" / "matrix"
SOURCES_DIR = ROOT / "src" / "airflow_tables"
#: In each venv: the digest of the inputs it was last installed from (see inputs_digest).
STAMP = ".airflow-tables-inputs"
#: The minors ``make test`` runs here; the newest (3.3) is ``.venv`` itself.
OLDER_MINORS = ("3.1", "3.2")
#: Test directories that never import Airflow: the same on every minor.
AIRFLOW_FREE = ("tests/validation", "tests/emulator")
MARKERS = "not e2e and not packaging"
#: Tests too heavy to repeat on every minor; they run once, on 3.3. The 200 imports under
#: faults take minutes there and more than 25 minutes through Airflow 3.1's dag.test() on 2
#: cores; what they exercise below 3.3 (the CardID kept in a Variable, an adopted import
#: whose answer was lost) has tests of its own in tests/operators that run on every minor.
HEAVY = ("tests/reliability/test_faults.py::test_two_hundred_imports_under_faults",)


def venv_dir(minor: str) -> Path:
    return VENVS / f"airflow-{minor}"


def python_of(minor: str) -> Path:
    return venv_dir(minor) / "bin" / "python"


def base_python() -> str:
    """The interpreter ``.venv`` was made from: every venv of the matrix uses the same Python."""
    return str(Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}")


def inputs_digest(minor: str) -> str:
    """What the venv's contents follow from: the constraints, the project's metadata and its C source."""
    digest = hashlib.sha256()
    for path in (constraints_path(minor), ROOT / "pyproject.toml", ROOT / "setup.py", *SOURCES_DIR.glob("*.c")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def setup(minor: str) -> None:
    """Create the minor's venv if missing and install the constrained set; nothing to do if its inputs are unchanged."""
    venv = venv_dir(minor)
    stamp = venv / STAMP
    if python_of(minor).exists() and stamp.exists() and stamp.read_text() == inputs_digest(minor):
        return
    if not python_of(minor).exists():
        subprocess.run([uv(), "venv", "--quiet", "--python", base_python(), str(venv)], check=True)
    command = [
        uv(),
        "pip",
        "install",
        "--quiet",
        "--compile-bytecode",
        "--python",
        str(python_of(minor)),
        "-e",
        str(ROOT),
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
    ignores = [f"--ignore={path}" for path in AIRFLOW_FREE] + [f"--deselect={test}" for test in HEAVY]
    return [str(python_of(minor)), "-m", "pytest", "-m", MARKERS, "-p", "no:cacheprovider", *ignores, *pytest_args]


def test_env(minor: str) -> dict[str, str]:
    """The environment of a minor's pytest: an Airflow home of its own, so minors run side by side."""
    home = LOGS / f"airflow-{minor}-home"
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
        log = open(LOGS / f"airflow-{minor}.log", "wb")  # noqa: SIM115 - closed once the run ends
        process = subprocess.Popen(
            test_command(minor, pytest_args), cwd=ROOT, env=test_env(minor), stdout=log, stderr=subprocess.STDOUT
        )
        running[minor] = (process, log, time.monotonic())
    outcome = {}
    for minor, (process, log, started) in running.items():
        code = process.wait()
        log.close()
        outcome[minor] = (code, time.monotonic() - started)
        print(f"\n===== matrix: Airflow {minor}, its pytest ({LOGS.relative_to(ROOT)}/airflow-{minor}.log) =====")
        print((LOGS / f"airflow-{minor}.log").read_text(errors="replace"), flush=True)
    return outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("minors", nargs="*", default=list(OLDER_MINORS), help="Airflow minors, e.g. 3.1")
    parser.add_argument("--setup-only", action="store_true")
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    pytest_args = argv[split + 1 :]  # after "--": passed to pytest

    results: dict[str, str] = {}
    ready = []
    for minor in args.minors:
        print(f"\n===== matrix: Airflow {minor} in {venv_dir(minor).relative_to(ROOT)} =====", flush=True)
        started = time.monotonic()
        try:
            setup(minor)
        except subprocess.CalledProcessError as err:
            results[minor] = f"SET-UP FAILED ({err}); constraints: {constraints_path(minor).relative_to(ROOT)}"
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
