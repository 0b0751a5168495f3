"""Every ``pip install`` command of docs/install.md, run with pip as written, the way a user runs it.

The page is about adding the provider to an Airflow that already runs, so the commands run in
a fresh virtualenv (``python -m venv``: the pip that comes with Python) that already holds
Apache Airflow, put there from ``constraints/airflow-3.3.txt`` by uv in seconds (pip would
take minutes to fill it, and the commands under test are the ones after it). They run in a
fresh copy of the checkout (its tracked files as they are on disk) where ``make dist``'s
script has built ``dist/``, with pip's usual cache.

* Each command is resolved by pip, as ``pip install --dry-run --report FILE <the rest as
  written>``: it must succeed, take the provider from the
  file, directory or ``dist/`` the command names, with the extras it names, and leave Airflow
  as it is (the pin and the constraints hold).
* One command of each form (wheel, sdist, checkout, editable checkout, the package-index
  form, the Docker image's ``RUN`` with ``--find-links``) then installs for real, and the installed
  provider is checked (its version, its provider entry point, where it is imported from).

Network-free stand-ins where the page names what does not exist yet or is not reachable here:
the package-index form (``airflow-tables`` alone) runs with ``PIP_FIND_LINKS=dist/`` (pip finds
the provider there and everything else on PyPI), Airflow's constraints URL is replaced by
``constraints/airflow-3.3.txt``, and the Dockerfile's ``COPY`` targets under ``/opt/airflow`` are a
temporary directory. Marked ``packaging``: it runs once per ``make test``, on Airflow 3.3.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests._uv import uv_command

ROOT = Path(__file__).resolve().parents[2]


def checkout_copy(directory: Path) -> Path:
    """The checkout's tracked files, as they are on disk, copied into ``directory/airflow-tables``."""
    copy = directory / "airflow-tables"
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name)
    return copy


PAGE = ROOT / "docs" / "install.md"
CONSTRAINTS = "constraints/airflow-3.3.txt"
FENCE = re.compile(r"^```(?P<lang>\w*)\s*$")
INLINE_PIP = re.compile(r"`(pip install [^`]*airflow[-_]tables[^`]*)`")
AIRFLOW_CONSTRAINTS_URL = re.compile(r'"https://raw\.githubusercontent\.com/apache/airflow/[^"]*"')
#: What each extra adds to an environment that already runs Airflow 3.3 (the emulator's
#: Starlette and uvicorn come with Airflow's api-server, so that extra adds nothing there).
EXTRA_BRINGS = {
    "pandas": {"pandas"},
    "gx": {"great-expectations", "pandas"},
    "s3": {"apache-airflow-providers-amazon", "s3fs"},
    "emulator": {"starlette", "uvicorn"},
}
AIRFLOW = {"apache-airflow", "apache-airflow-core", "apache-airflow-task-sdk"}

pytestmark = [pytest.mark.packaging, pytest.mark.timeout(900)]


@dataclass(frozen=True)
class Command:
    line: int  # in docs/install.md, 1-based
    heading: str  # the section it is shown under
    lang: str  # bash or dockerfile
    setup: tuple[str, ...]  # the block's lines before it that are not pip commands (variables)
    text: str  # the command, continuation lines joined

    @property
    def form(self) -> str:
        if self.lang == "dockerfile":
            return "docker"
        if re.search(r"\s-e \.(\s|$)", self.text):
            return "editable"
        if ".whl" in self.text:
            return "wheel"
        if ".tar.gz" in self.text:
            return "sdist"
        if re.search(r"\s\.(\s|$)", self.text):
            return "path"
        if "--find-links" in self.text:
            return "find-links"
        return "index"

    @property
    def extras(self) -> set[str]:
        found = re.search(r"airflow-tables\[([^\]]+)\]", self.text)
        return {extra.strip() for extra in found.group(1).split(",")} if found else set()

    def __str__(self) -> str:
        return f"docs/install.md:{self.line} ({self.form})"


def page_commands() -> list[Command]:
    """The page's ``pip install`` commands, from its ``bash`` and ``dockerfile`` blocks, in order."""
    commands = []
    heading = ""
    lang = None
    block: list[tuple[int, str]] = []
    for number, line in enumerate(PAGE.read_text().splitlines(), start=1):
        fence = FENCE.match(line)
        if lang is None:
            if line.startswith("#"):
                heading = line.lstrip("# ").strip()
            elif fence:
                lang, block = fence.group("lang"), []
            continue
        if not fence:
            block.append((number, line))
            continue
        if lang in ("bash", "dockerfile"):
            commands += _block_commands(block, heading, lang)
        lang = None
    return commands


def _block_commands(block: list[tuple[int, str]], heading: str, lang: str) -> list[Command]:
    logical: list[tuple[int, str]] = []
    for number, line in block:
        if logical and logical[-1][1].endswith("\\"):
            logical[-1] = (logical[-1][0], logical[-1][1][:-1].rstrip() + " " + line.strip())
        else:
            logical.append((number, line))
    setup: list[str] = []
    found = []
    for number, line in logical:
        command = line.removeprefix("RUN ").strip() if lang == "dockerfile" else line.strip()
        if command.startswith("pip install"):
            found.append(Command(number, heading, lang, tuple(setup), command))
        elif lang == "bash" and re.match(r"^[A-Z_]+=", command):
            setup.append(command)
    return found


COMMANDS = page_commands()


def test_every_form_and_extra_is_shown_with_the_airflow_pin_and_the_constraints():
    forms = {command.form for command in COMMANDS}
    assert forms >= {"wheel", "sdist", "path", "editable", "find-links", "index", "docker"}, forms
    assert set().union(*(command.extras for command in COMMANDS)) >= set(EXTRA_BRINGS)
    for command in COMMANDS:
        assert " -c " in command.text, f"{command}: no constraints file: {command.text}"
        if command.form != "editable":  # a checkout to work on: a venv of its own, Airflow from the file
            assert '"apache-airflow==${AIRFLOW_VERSION}"' in command.text, f"{command}: Airflow not pinned"
    inline = [span for span in INLINE_PIP.findall(PAGE.read_text()) if span not in {c.text for c in COMMANDS}]
    assert not inline, f"install commands outside a code block, which nothing runs: {inline}"


def test_the_page_leads_with_what_works_today_and_marks_the_index_form():
    assert COMMANDS[0].form in {"wheel", "sdist", "path", "find-links"}, f"leads with {COMMANDS[0]}"
    for command in COMMANDS:
        if command.form in {"index", "docker"} and "--find-links" not in command.text:
            assert "published" in command.heading, f"{command}: the index form under {command.heading!r}"


def test_make_dist_builds_the_files_the_page_installs(checkout):
    dry = subprocess.run(["make", "-n", "dist"], cwd=checkout, capture_output=True, text=True, check=True)
    assert "scripts/dist.sh" in dry.stdout, dry.stdout
    built = sorted(path.name for path in (checkout / "dist").iterdir() if not path.name.startswith("."))
    assert sorted(name.rsplit(".", 1)[-1] for name in built) == ["gz", "whl"], built


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """A fresh copy of the checkout (tracked files, as on disk) with ``dist/`` built by ``make dist``'s script."""
    copy = checkout_copy(tmp_path_factory.mktemp("install"))
    build = subprocess.run(["scripts/dist.sh"], cwd=copy, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr
    return copy


@pytest.fixture(scope="module")
def airflow_venv(tmp_path_factory) -> Path:
    """A fresh virtualenv with pip (``python -m venv``) and Apache Airflow under the 3.3 constraints."""
    uv = uv_command()
    if uv is None:
        pytest.fail("uv is not installed (scripts/setup.sh installs it)")
    venv = tmp_path_factory.mktemp("pip-venv") / "venv"
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    subprocess.run([str(base), "-m", "venv", str(venv)], check=True, timeout=300)
    fill = [uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python")]
    subprocess.run([*fill, "apache-airflow", "-c", str(ROOT / CONSTRAINTS)], check=True, timeout=600)
    return venv


def environment(venv: Path, home: Path) -> dict[str, str]:
    """A shell of the venv (its ``pip``, ``airflow``, ``python`` first on PATH), nothing of this checkout."""
    env = {
        "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", str(home)),  # pip's cache: shared across runs, as a user's is
        "LANG": "C.UTF-8",
        "AIRFLOW_HOME": str(home / "airflow"),
        "VIRTUAL_ENV": str(venv),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
    }
    version = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import importlib.metadata as m; print(m.version('apache-airflow'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    env["AIRFLOW_VERSION"] = version.stdout.strip()  # as the page's first block and the Docker image set it
    return env


def script(command: Command, checkout: Path, scratch: Path) -> tuple[str, dict[str, str]]:
    """The shell text that runs ``command`` as the page shows it, and the stand-ins' environment."""
    extra: dict[str, str] = {}
    text = AIRFLOW_CONSTRAINTS_URL.sub(CONSTRAINTS, command.text)
    if command.form == "docker":
        for line in PAGE.read_text().splitlines():
            copied = re.match(r"^COPY (\S+) (/opt/airflow/\S*)$", line)
            if copied:
                source, target = checkout / copied.group(1), scratch / copied.group(2).lstrip("/")
                target.parent.mkdir(parents=True, exist_ok=True)
                if source.is_dir():
                    shutil.copytree(source, target, dirs_exist_ok=True)
                else:
                    shutil.copy(source, target)
        text = text.replace("/opt/airflow/", f"{scratch}/opt/airflow/")
    if command.form == "index":
        extra["PIP_FIND_LINKS"] = str(checkout / "dist")
    return "\n".join([*command.setup, text]), extra


def run_pip(command: Command, venv: Path, checkout: Path, tmp_path: Path, *, report: Path | None = None):
    """Run the command; with ``report``, as ``pip install --dry-run --report FILE ...`` (options, not
    ``PIP_*`` variables, which pip's own build environment for an sdist would inherit)."""
    text, extra = script(command, checkout, tmp_path)
    if report is not None:
        text = text.replace("pip install ", f"pip install --dry-run --report {report} ", 1)
    env = {**environment(venv, tmp_path), **extra}
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", text], cwd=checkout, env=env, capture_output=True, text=True, timeout=600
    )


def installed_names(venv: Path) -> set[str]:
    probe = "import importlib.metadata as m; print('\\n'.join(d.metadata['Name'] for d in m.distributions()))"
    listed = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, check=True)
    return {re.sub(r"[-_.]+", "-", name).lower() for name in listed.stdout.split()}


@pytest.fixture(scope="module")
def resolutions(checkout, airflow_venv, tmp_path_factory) -> Iterator[dict[Command, tuple[Future, Path]]]:
    """Every command's ``pip install --dry-run`` started at once, a few at a time, each in a directory of its own.

    Each is a pip process of its own that mostly waits on the index; one after another they
    were the longest part of the suite's packaging checks (about ten minutes on CI).
    """
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="pip-resolve") as pool:
        started = {}
        for command in COMMANDS:
            where = tmp_path_factory.mktemp("resolve")
            started[command] = (
                pool.submit(run_pip, command, airflow_venv, checkout, where, report=where / "report.json"),
                where,
            )
        yield started
        for future, _ in started.values():
            future.cancel()


@pytest.mark.parametrize("command", COMMANDS, ids=str)
def test_each_command_resolves_with_pip_as_written(command, checkout, airflow_venv, resolutions):
    future, tmp_path = resolutions[command]
    report_path = tmp_path / "report.json"
    result = future.result(timeout=900)
    assert result.returncode == 0, f"{command}: {command.text}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    report = json.loads(report_path.read_text())
    install = {re.sub(r"[-_.]+", "-", item["metadata"]["name"]).lower(): item for item in report["install"]}
    assert not AIRFLOW & set(install), f"{command} would change Airflow: {sorted(AIRFLOW & set(install))}"
    ours = install.get("airflow-tables")
    assert ours, f"{command} installs no airflow-tables: {sorted(install)}"
    url = ours["download_info"]["url"]
    dist = (checkout / "dist").as_uri()
    where = {
        "wheel": lambda: url.startswith(dist) and url.endswith(".whl"),
        "sdist": lambda: url.startswith(dist) and url.endswith(".tar.gz"),
        "path": lambda: url == checkout.as_uri() and not ours["download_info"]["dir_info"].get("editable"),
        "editable": lambda: url == checkout.as_uri() and ours["download_info"]["dir_info"].get("editable"),
        "find-links": lambda: url.startswith(dist),
        "index": lambda: url.startswith(dist),
        "docker": lambda: url.startswith(tmp_path.as_uri()) and "/opt/airflow/airflow-tables-dist/" in url,
    }
    assert where[command.form](), f"{command} takes the provider from {url}"
    assert set(ours.get("requested_extras") or []) == command.extras
    present = installed_names(airflow_venv) | set(install)
    for extra in command.extras:
        assert EXTRA_BRINGS[extra] <= present, f"{command}: [{extra}] lacks {EXTRA_BRINGS[extra] - present}"


#: Per form, its first command with the fewest extras, installed for real. ``--find-links`` is
#: the Docker image's form (and the index form's stand-in): its own commands all bring an extra
#: (pandas alone adds half a minute), so they are resolved above and not installed.
ONE_OF_EACH_FORM = [
    min((c for c in COMMANDS if c.form == form), key=lambda c: len(c.extras))
    for form in dict.fromkeys(c.form for c in COMMANDS)
    if form != "find-links"
]


@pytest.mark.parametrize("command", ONE_OF_EACH_FORM, ids=str)
def test_each_form_installs_a_working_provider(command, checkout, airflow_venv, tmp_path):
    python = str(airflow_venv / "bin" / "python")
    try:
        result = run_pip(command, airflow_venv, checkout, tmp_path)
        assert result.returncode == 0, f"{command}: {command.text}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        probe = (
            "import importlib.metadata as m, airflow_tables;"
            "eps = m.entry_points(group='apache_airflow_provider');"
            "print(m.version('airflow-tables'), airflow_tables.__file__, [e.value for e in eps])"
        )
        seen = subprocess.run([python, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True)
        version, where, entry_points = seen.stdout.split(" ", 2)
        from airflow_tables import __version__

        assert version == __version__
        assert "airflow_tables:get_provider_info" in entry_points
        home = checkout / "src" if command.form == "editable" else airflow_venv
        assert where.startswith(str(home)), f"{command}: imported from {where}"
        assert not AIRFLOW - installed_names(airflow_venv)
    finally:
        subprocess.run([python, "-m", "pip", "uninstall", "--yes", "--quiet", "airflow-tables"], capture_output=True)
