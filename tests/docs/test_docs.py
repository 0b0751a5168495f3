"""Every snippet of README.md and docs/ marked as runnable runs, against the emulator, as written.

A fenced block runs when the line just before it is an HTML comment (invisible on GitHub):

* ``<!-- run -->``: ``python`` runs as a script, ``bash`` as ``bash -euo pipefail`` (both must
  exit 0); in ``console``, each ``$ command`` runs and its output must match the lines after it.
* ``<!-- run: server -->``: a ``console`` block whose command serves until stopped: its output
  must match, then it keeps serving until the document's last block has run. An
  ``export AIRFLOW_CONN_DATATABLES_DEFAULT=...`` line it prints is applied, as a reader pastes it,
  to the blocks after it.
* ``<!-- run: connection -->``: a ``bash`` block that defines the connection, run with the
  placeholders of the docs (``YOUR_API_KEY``, ``dtk_...``, ``PRJ-sales``, the example hosts)
  replaced by the emulator's values; the hook's Test button must then pass.
* ``<!-- run: dag -->``: a ``python`` DAG file, put in the dags folder beside ``dags/data`` and run
  with ``dag.test()``: every task must succeed.
* ``<!-- run: file NAME -->``: the block is written to NAME, for the blocks after it.

Expected output: ``...`` inside a line matches any text, a line that is only ``...`` any lines.
Port 8765 (the emulator's default) stands for a free port: commands and expected output are
read with it, and an emulator started without ``--port`` gets that one. The blocks of one
document run in order, in a directory of their own holding ``data.csv``, ``orders.csv`` (the
sample), and links to the repository's ``.venv`` and ``dags``. Unless a document starts its own
emulator, the connection is the shared test emulator's (``datatables_conn``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MARKER = re.compile(r"^<!--\s*run(?::\s*(?P<mode>\w+)(?:\s+(?P<arg>\S+))?)?\s*-->$")
FENCE = re.compile(r"^```(?P<lang>\w*)\s*$")
DEFAULT_PORT = "8765"
CONNECTION_LINE = re.compile(r"^\s*export AIRFLOW_CONN_DATATABLES_DEFAULT=(.+)$", re.MULTILINE)
SERVER_DEADLINE = 60.0
COMMAND_TIMEOUT = 300


@dataclass
class Block:
    doc: Path
    line: int  # of the fence, 1-based
    lang: str
    mode: str | None  # "" for a plain run, None for a block not marked to run
    arg: str | None
    text: str

    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def fenced_blocks(doc: Path) -> list[Block]:
    """Every fenced block of ``doc``; ``mode`` is ``None`` when no run marker is on the line before it."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        marker = MARKER.match(lines[i - 1].strip()) if i > 0 else None
        text = "\n".join(lines[i + 1 : end]) + "\n"
        mode, arg = (marker["mode"] or "", marker["arg"]) if marker is not None else (None, None)
        blocks.append(Block(doc, i + 1, opening["lang"], mode, arg, text))
        i = end + 1
    return blocks


def runnable_blocks(doc: Path) -> list[Block]:
    """The fenced blocks of ``doc`` with a run marker on the line before them."""
    return [block for block in fenced_blocks(doc) if block.mode is not None]


def expected_output(lines: list[str]) -> re.Pattern[str]:
    """A pattern for ``lines`` as consecutive whole lines, ``...`` matching anything."""
    parts = []
    for line in lines:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(re.escape(line.rstrip()).replace(r"\.\.\.", r"[^\n]*?") + r"[ \t]*\n")
    return re.compile("^" + "".join(parts), re.MULTILINE)


def console_steps(text: str) -> list[tuple[str, list[str]]]:
    """``(command, expected lines)`` for each ``$ command`` of a console block."""
    steps: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
    return steps


def free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


@dataclass
class Server:
    """A command a document starts and leaves serving, with the output it printed so far."""

    process: subprocess.Popen[bytes]
    output: list[str] = field(default_factory=list)

    def start_reading(self) -> None:
        def read() -> None:
            assert self.process.stdout is not None
            for raw in self.process.stdout:
                self.output.append(raw.decode(errors="replace"))

        threading.Thread(target=read, daemon=True).start()

    def text(self) -> str:
        return "".join(self.output)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(10)


class DocumentRun:
    """Runs one document's blocks in order, in ``workdir``, with the connection ``env`` holds."""

    def __init__(self, doc: Path, workdir: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
        self.doc = doc
        self.workdir = workdir
        self.request = request
        self.monkeypatch = monkeypatch
        self.port = free_port()
        self.servers: list[Server] = []
        bin_dir = str(Path(sys.executable).parent)
        self.env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
        (workdir / ".venv").symlink_to(Path(sys.executable).parents[1])
        (workdir / "dags").symlink_to(ROOT / "dags")
        shutil.copy(ROOT / "dags" / "data" / "orders.csv", workdir / "orders.csv")
        (workdir / "data.csv").write_text("id,region,amount\n1,North,10\n2,South,20\n", encoding="utf-8")

    # -- the connection ---------------------------------------------------------------------

    def use_connection(self, value: str) -> None:
        """Apply ``AIRFLOW_CONN_DATATABLES_DEFAULT`` as a reader who pasted it would have it."""
        self.env["AIRFLOW_CONN_DATATABLES_DEFAULT"] = value
        self.monkeypatch.setenv("AIRFLOW_CONN_DATATABLES_DEFAULT", value)

    def placeholders(self) -> dict[str, str]:
        """The docs' placeholders, mapped to the values of the connection now in use."""
        conn = json.loads(self.env["AIRFLOW_CONN_DATATABLES_DEFAULT"])
        key, host, project = conn["password"], conn["host"], conn["extra"]["project_id"]
        return {
            "https://tables.example.com": host,
            f"http://127.0.0.1:{DEFAULT_PORT}": host,
            "YOUR_API_KEY": key,
            "dtk_...": key,
            "PRJ-sales": project,
            "PRJ-...": project,
        }

    # -- running ----------------------------------------------------------------------------

    def shell(self, command: str, *, strict: bool) -> subprocess.CompletedProcess[str]:
        flags = ["-euo", "pipefail"] if strict else []
        return subprocess.run(
            ["bash", *flags, "-c", command],
            cwd=self.workdir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
        )

    def run(self, block: Block) -> None:
        handler = {
            ("", "python"): self.run_python,
            ("", "bash"): self.run_bash,
            ("", "console"): self.run_console,
            ("server", "console"): self.run_server,
            ("connection", "bash"): self.run_connection,
            ("dag", "python"): self.run_dag,
        }.get((block.mode, block.lang))
        if block.mode == "file":
            (self.workdir / (block.arg or "")).write_text(block.text, encoding="utf-8")
            return
        assert handler is not None, f"{block.where()}: no way to run a {block.lang!r} block marked {block.mode!r}"
        handler(block)

    def run_python(self, block: Block) -> None:
        script = self.workdir / f"snippet_{block.line}.py"
        script.write_text(block.text, encoding="utf-8")
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=self.workdir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
        )
        assert done.returncode == 0, f"{block.where()} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"

    def run_bash(self, block: Block) -> None:
        done = self.shell(block.text, strict=True)
        assert done.returncode == 0, f"{block.where()} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"

    def run_console(self, block: Block) -> None:
        for command, expected in console_steps(block.text.replace(DEFAULT_PORT, self.port)):
            done = self.shell(command, strict=False)
            output = done.stdout + done.stderr
            assert expected_output(expected).search(output + "\n"), (
                f"{block.where()}: `{command}` printed\n{output}\nwhich does not match\n" + "\n".join(expected)
            )

    def run_server(self, block: Block) -> None:
        ((command, expected),) = console_steps(block.text.replace(DEFAULT_PORT, self.port))
        for server in self.servers:  # one server at a time: the next may share its data directory
            server.stop()
        if "airflow-tables-emulator" in command and "--port" not in command:
            command += f" --port {self.port}"
        process = subprocess.Popen(
            ["bash", "-c", f"exec {command}"],
            cwd=self.workdir,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        server = Server(process)
        self.servers.append(server)
        server.start_reading()
        pattern = expected_output(expected)
        deadline = time.monotonic() + SERVER_DEADLINE
        while not pattern.search(server.text()):
            assert process.poll() is None or pattern.search(server.text()), (
                f"{block.where()}: `{command}` exited with {process.returncode}:\n{server.text()}"
            )
            assert time.monotonic() < deadline, f"{block.where()}: `{command}` printed\n{server.text()}"
            time.sleep(0.05)
        pasted = CONNECTION_LINE.search(server.text())
        if pasted is not None:
            self.use_connection(shlex.split(pasted.group(1))[0])

    def run_connection(self, block: Block) -> None:
        text = block.text
        for placeholder, value in self.placeholders().items():
            text = text.replace(placeholder, value)
        done = self.shell(text + 'printf %s "$AIRFLOW_CONN_DATATABLES_DEFAULT"\n', strict=True)
        assert done.returncode == 0, f"{block.where()} failed:\n{done.stderr[-3000:]}"
        self.use_connection(done.stdout)

        from airflow_tables.hooks.tables import DataTablesHook

        ok, message = DataTablesHook().test_connection()
        assert ok, f"{block.where()}: the connection it defines fails the Test button: {message}"

    def run_dag(self, block: Block) -> None:
        from tests._dag_files import dags_in, install

        self.request.getfixturevalue("dags_module")  # a migrated metadata database
        source = self.workdir / f"{self.doc.stem.lower()}_{block.line}.py"
        source.write_text(block.text, encoding="utf-8")
        dags = dags_in(install(source, ROOT / "dags" / "data"))
        assert dags, f"{block.where()} defines no DAG"
        for dag in dags:
            dag_run = dag.test()
            states = {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}
            assert set(states.values()) == {"success"}, f"{block.where()}: {dag.dag_id} ran {states}"

    def close(self) -> None:
        for server in self.servers:
            server.stop()


RUNNABLE = [doc for doc in DOCS if runnable_blocks(doc)]


def test_the_docs_that_should_have_runnable_snippets_have_them():
    names = {doc.relative_to(ROOT).as_posix() for doc in RUNNABLE}
    assert names >= {"README.md", "docs/connection.md", "docs/emulator.md", "docs/hook.md", "docs/validation.md"}
    modes = {(block.mode, block.lang) for doc in RUNNABLE for block in runnable_blocks(doc)}
    assert modes >= {("", "python"), ("", "bash"), ("", "console"), ("server", "console"), ("connection", "bash")}
    assert ("dag", "python") in modes and ("file", "json") in modes


@pytest.mark.parametrize("doc", RUNNABLE, ids=lambda doc: doc.relative_to(ROOT).as_posix())
def test_runnable_snippets_run_as_written(doc, datatables_conn, tmp_path, request, monkeypatch):
    run = DocumentRun(doc, tmp_path, request, monkeypatch)
    try:
        for block in runnable_blocks(doc):
            run.run(block)
    finally:
        run.close()


# -- Examples pulled from dags/ by markers, as the ASF providers' howto pages pull theirs ------

#: The first line of a fenced block that shows part of an example DAG.
INCLUDE = re.compile(
    r"^# (?P<path>dags/[\w.]+\.py), between the \[START (?P<name>\w+)\] and \[END (?P=name)\] markers$"
)
DAG_MARKER = re.compile(r"^\s*# \[(?:START|END) \w+\]\s*$")


def marked_includes(doc: Path) -> list[tuple[Block, str, str]]:
    """``(block, dags/ path, marker name)`` for each block of ``doc`` that shows an example DAG's marked part."""
    found = []
    for block in fenced_blocks(doc):
        first = INCLUDE.match(block.text.splitlines()[0]) if block.text.strip() else None
        if first is not None:
            found.append((block, first["path"], first["name"]))
    return found


def marked_part(path: Path, name: str) -> str:
    """The lines between ``# [START name]`` and ``# [END name]``, dedented, without any marker line."""
    import textwrap

    lines = path.read_text(encoding="utf-8").splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == f"# [START {name}]"]
    ends = [i for i, line in enumerate(lines) if line.strip() == f"# [END {name}]"]
    assert len(starts) == 1 and len(ends) == 1 and starts[0] < ends[0], f"{path.name}: markers {name!r} not one pair"
    part = [line for line in lines[starts[0] + 1 : ends[0]] if not DAG_MARKER.match(line)]
    return textwrap.dedent("\n".join(part) + "\n")


INCLUDES = [include for doc in DOCS for include in marked_includes(doc)]


def test_the_howto_pages_show_marked_parts_of_the_example_dags():
    pages = {block.doc.relative_to(ROOT).as_posix() for block, _, _ in INCLUDES}
    assert {f"docs/operators/{page}.md" for page in ("import", "replace", "delete", "triggers")} <= pages


@pytest.mark.parametrize("include", INCLUDES, ids=lambda include: f"{include[0].where()}:{include[2]}")
def test_a_marked_include_is_the_example_dag_s_code_as_written(include):
    block, path, name = include
    assert (ROOT / path).is_file(), f"{block.where()}: {path} does not exist"
    shown = block.text.split("\n", 1)[1]
    assert shown == marked_part(ROOT / path, name), f"{block.where()}: differs from {path} [START {name}]"


# -- A page per operator, and the overview linking them ------------------------------------------

OPERATOR_PAGES = {
    "import": ["airflow_tables.operators.tables.DataTablesImportOperator"],
    "replace": [
        "airflow_tables.operators.tables.DataTablesReplaceOperator",
        "airflow_tables.operators.tables.DataTablesImportOperator",  # its knobs, through **kwargs
    ],
    "delete": ["airflow_tables.operators.tables.DataTablesDeleteOperator"],
    "sensor": ["airflow_tables.sensors.tables.DataTablesProcessedSensor"],
    "triggers": [
        "airflow_tables.triggers.tables.DataTablesProcessedTrigger",
        "airflow_tables.triggers.tables.DataTablesTableRefreshedTrigger",
    ],
}


def _parameters(dotted: str) -> list[str]:
    import importlib
    import inspect

    module, name = dotted.rsplit(".", 1)
    signature = inspect.signature(getattr(importlib.import_module(module), name).__init__)
    return [p.name for p in signature.parameters.values() if p.kind is inspect.Parameter.KEYWORD_ONLY]


@pytest.mark.parametrize("page", sorted(OPERATOR_PAGES))
def test_each_operator_page_has_an_example_and_documents_every_parameter(page):
    doc = ROOT / "docs" / "operators" / f"{page}.md"
    text = doc.read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert {"Example", "Parameters", "Failure modes"} <= set(headings), headings
    runnable = [block for block in runnable_blocks(doc) if block.mode == "dag"]
    assert marked_includes(doc) or runnable, f"{doc.name}: no example from dags/ and no runnable DAG"
    missing = [(cls, p) for cls in OPERATOR_PAGES[page] for p in _parameters(cls) if f"| `{p}` |" not in text]
    assert missing == [], f"{doc.name} has no parameter row for {missing}"


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_between_the_docs_lands_on_a_page_and_a_heading_that_exist():
    """docs/operators.md became an overview of pages: the anchors other docs link to must still be there."""
    broken = []
    for doc in DOCS:
        for target, anchor in re.findall(r"\]\(([\w./-]*\.md|)(?:#([\w-]+))?\)", doc.read_text(encoding="utf-8")):
            page = (doc.parent / target).resolve() if target else doc
            if not page.is_file():
                broken.append(f"{doc.relative_to(ROOT)} -> {target}")
                continue
            if anchor:
                headings = re.findall(r"^#{1,6} (.+)$", page.read_text(encoding="utf-8"), re.MULTILINE)
                if anchor not in {_slug(h) for h in headings}:
                    broken.append(f"{doc.relative_to(ROOT)} -> {target}#{anchor}")
    assert broken == []


def test_the_overview_links_every_operator_page():
    overview = (ROOT / "docs" / "operators.md").read_text(encoding="utf-8")
    assert [page for page in OPERATOR_PAGES if f"(operators/{page}.md)" not in overview] == []


def test_the_asset_warnings_airflow_logs_for_a_new_table_are_explained_as_airflow_words_them():
    """Airflow warns when an event comes through an alias for an asset no DAG declares: say so, once, verbatim."""
    import importlib.util

    spec = importlib.util.find_spec("airflow.assets.manager")
    assert spec is not None and spec.origin is not None
    source = Path(spec.origin).read_text(encoding="utf-8")
    overview = (ROOT / "docs" / "operators.md").read_text(encoding="utf-8")
    section = overview.split("\n## Assets\n", 1)[1].split("\n## ", 1)[0]
    for quoted in (
        "AssetModel ... not found",  # 3.1.8 and later go on "; cannot create asset event."
        "Emitting event for inactive AssetModel ...",
    ):
        # Airflow's own wording, its placeholder (%s, or {asset} on some 3.1 releases) read as "...".
        worded = re.escape(quoted).replace(re.escape("..."), r"(?:%s|\{asset\})")
        assert re.search(worded, source), f"Airflow no longer words {quoted!r} so: update the docs' quote"
        assert quoted in section, f"docs/operators.md's Assets section does not quote {quoted!r}"
