"""docs/architecture.md's house rules, read from the code: no cycles, arrows as drawn, one reader of wire names.

Imports are read with ``ast`` (function-level imports count; ``if TYPE_CHECKING:`` blocks do
not, since they draw no arrow at run time). The layers are not written here: they are read
from the mermaid ``flowchart`` in docs/architecture.md, so the picture and the code cannot
drift apart. Its boxes are packages or top-level modules of ``src/airflow_tables`` (a box
holds the one its name names and every ``name.py`` or ``name/`` its label lists); an arrow
``A --> B`` says that A may import B, and so may it anything a path of arrows leads to; a
module may import any module of its own box; ``A -. never .-> B`` forbids what a path would
allow. A failure names the module, the line and the rule, so the fix is to move the code (or
to draw the arrow, where the design changed), not to weaken the test.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "airflow_tables"
PACKAGE = "airflow_tables"
PICTURE = ROOT / "docs" / "architecture.md"

#: Modules that must start without Airflow: the validator's CLI and the emulator.
NO_AIRFLOW = ("validation", "emulator", "cli", "model", "exceptions")

#: The service's field names (the seed's sections 2.1 to 2.3 and the list's envelope).
WIRE_FIELDS = {
    "CardName",
    "Rows",
    "Domain",
    "Processed",
    "SuccessfulUpload",
    "ConnectorSource",
    "ConnectorStatus",
    "UploadCompletionTime",
    "LockedFromDelete",
    "Description",
    "Columns",
    "ColumnName",
    "ColumnDescription",
    "DataType",
    "Cards",
}
#: Where wire names may be read: the model, and the emulator (the other side of the wire).
WIRE_READERS = ("model", "emulator")


# -- the modules and what they import ------------------------------------------------------------


def _dotted(path: Path) -> str:
    """``airflow_tables.sources.storage`` for ``src/airflow_tables/sources/storage.py`` (or its ``.so``)."""
    parts = path.relative_to(SRC.parent).parts
    return ".".join([*parts[:-1], path.name.split(".")[0]]).removesuffix(".__init__")


#: Every Python module of src, by dotted name.
MODULES: dict[str, Path] = {_dotted(path): path for path in sorted(SRC.rglob("*.py"))}
#: C extension modules (their source or a build of it): imported like modules, importing nothing of ours.
EXTENSIONS = {_dotted(path) for path in SRC.rglob("*") if path.suffix in (".c", ".so", ".pyd")} - set(MODULES)


def _short(name: str) -> str:
    """What a test id and a message call a module: ``sources.storage``, ``__init__`` for the package."""
    return name.removeprefix(PACKAGE + ".") if name != PACKAGE else "__init__"


def _top(name: str) -> str:
    """The top-level package or module of ours that ``name`` is in (``sources`` for ``sources.storage``)."""
    return _short(name).split(".")[0]


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


@dataclass(frozen=True)
class Import:
    line: int
    module: str  # dotted and absolute: a module of ours, or anything else imported
    at_top: bool  # run when the module is imported (not inside a function)


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _function_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def _imports(name: str) -> list[Import]:
    """Every import of module ``name`` that runs, relative imports resolved.

    ``from pkg import x`` imports ``pkg.x`` when that is a module of ours (a submodule or a C
    extension), else ``pkg``: the cycle it could close runs through the module that is named.
    """
    path = MODULES[name]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only, in_functions = _type_checking_lines(tree), _function_lines(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in typing_only:
            continue
        at_top = node.lineno not in in_functions
        if isinstance(node, ast.Import):
            found += [Import(node.lineno, alias.name, at_top) for alias in node.names]
            continue
        base = node.module or ""
        if node.level:
            anchor = package.rsplit(".", node.level - 1)[0]
            base = f"{anchor}.{base}" if base else anchor
        for alias in node.names:
            named = f"{base}.{alias.name}"
            found.append(Import(node.lineno, named if named in MODULES or named in EXTENSIONS else base, at_top))
    return found


IMPORTS: dict[str, list[Import]] = {name: _imports(name) for name in MODULES}


def _where(name: str, line: int) -> str:
    return f"{MODULES[name].relative_to(SRC)}:{line}"


# -- the picture ---------------------------------------------------------------------------------

_BOX = re.compile(r'(\w+)\["([^"]*)"\]')
_ARROW = re.compile(r"\s*(-->|-\.\s*never\s*\.->)\s*")
_LISTED = re.compile(r"(?<![\w.])(\w+)(?:\.py\b|/)")


@dataclass
class Picture:
    """The flowchart of docs/architecture.md: boxes, the modules each holds, and its arrows."""

    labels: dict[str, str] = field(default_factory=dict)
    arrows: dict[str, set[str]] = field(default_factory=dict)
    never: set[tuple[str, str]] = field(default_factory=set)
    unreadable: list[str] = field(default_factory=list)

    @property
    def boxes(self) -> set[str]:
        return set(self.labels) | set(self.arrows) | {b for targets in self.arrows.values() for b in targets}

    def holds(self, box: str) -> set[str]:
        """The top-level names of src in ``box``: its own name, and those its label lists."""
        names = {box, *_LISTED.findall(self.labels.get(box, ""))}
        return names & TOP_NAMES

    def box_of(self, top: str) -> str | None:
        return next((box for box in sorted(self.boxes) if top in self.holds(box)), None)

    def reach(self, box: str) -> set[str]:
        """The boxes a path of arrows leads to from ``box``."""
        seen: set[str] = set()
        todo = list(self.arrows.get(box, ()))
        while todo:
            nxt = todo.pop()
            if nxt not in seen:
                seen.add(nxt)
                todo += self.arrows.get(nxt, ())
        return seen


TOP_NAMES = {_top(name) for name in MODULES}


def _read_picture(text: str) -> Picture:
    block = re.search(r"```mermaid\n\s*flowchart \w+\n(.*?)```", text, re.DOTALL)
    assert block, f"{PICTURE.name} has no ```mermaid flowchart```: the layers are read from it"
    picture = Picture()
    for raw in block.group(1).splitlines():
        line = raw.strip()
        if not line or line.startswith("%%"):
            continue
        for box, label in _BOX.findall(line):
            picture.labels[box] = label
        parts = _ARROW.split(_BOX.sub(r"\1", line))
        groups = [[box.strip() for box in part.split("&")] for part in parts[::2]]
        if not all(re.fullmatch(r"\w+", box) for group in groups for box in group):
            picture.unreadable.append(line)
            continue
        for left, arrow, right in zip(groups[:-1], parts[1::2], groups[1:], strict=True):
            for a in left:
                for b in right:
                    if arrow == "-->":
                        picture.arrows.setdefault(a, set()).add(b)
                    else:
                        picture.never.add((a, b))
    return picture


DRAWN = _read_picture(PICTURE.read_text(encoding="utf-8"))


def test_the_picture_can_be_read_and_is_layered():
    """A line the test cannot read, a box in two places, or a circle of arrows would make the rules say nothing."""
    assert not DRAWN.unreadable, f"lines of the flowchart this test cannot read: {DRAWN.unreadable}"
    twice = {top: boxes for top in TOP_NAMES if len(boxes := [b for b in DRAWN.boxes if top in DRAWN.holds(b)]) > 1}
    assert not twice, f"drawn in more than one box: {twice}"
    circles = sorted(box for box in DRAWN.boxes if box in DRAWN.reach(box))
    assert not circles, f"a path of arrows leads from these boxes back to themselves: {circles}"
    allowed_anyway = sorted(f"{a} -. never .-> {b}" for a, b in DRAWN.never if b not in DRAWN.reach(a))
    assert not allowed_anyway, f"forbids what no path of arrows allows (remove it): {allowed_anyway}"


# -- the rules -----------------------------------------------------------------------------------


def _arrow_rule(importer: str, imported: str) -> str | None:
    """Why module ``importer`` may not import ``imported`` (both of ours), or None when it may."""
    source, target = DRAWN.box_of(_top(importer)), DRAWN.box_of(_top(imported))
    if source is None or target is None or source == target:
        return None  # a module in no box fails on its own (test_every_module_is_drawn)
    if (source, target) in DRAWN.never:
        return f"the picture forbids it ({source} -. never .-> {target})"
    if target not in DRAWN.reach(source):
        return f"no path of arrows from {source} to {target} in {PICTURE.name}: arrows only point down"
    return None


def _starts_airflow(name: str) -> tuple[str, ...] | None:
    """The chain of module-level imports by which importing ``name`` imports Airflow, or None."""
    seen: set[str] = set()
    todo: list[tuple[str, tuple[str, ...]]] = [(name, ())]
    while todo:
        current, chain = todo.pop()
        if current in seen or current not in MODULES:
            continue
        seen.add(current)
        parents = current.split(".")
        for n in range(1, len(parents)):  # Python runs a module's packages first
            package = ".".join(parents[:n])
            todo.append((package, (*chain, f"{_short(current)} runs its package {_short(package)}")))
        for imp in IMPORTS[current]:
            if not imp.at_top:
                continue
            step = (*chain, f"{_where(current, imp.line)} imports {imp.module}")
            if _within(imp.module, "airflow"):
                return step
            todo.append((imp.module, step))
    return None


@pytest.mark.parametrize("name", MODULES, ids=[_short(name) for name in MODULES])
def test_every_module_is_drawn(name):
    if DRAWN.box_of(_top(name)) is None:
        pytest.fail(
            f"{MODULES[name].relative_to(SRC)} is in no box of {PICTURE.name}'s flowchart: add `{_top(name)}.py` "
            f"(or `{_top(name)}/`) to the label of the box it belongs to, or draw a box `{_top(name)}` and its arrows"
        )


@pytest.mark.parametrize("name", MODULES, ids=[_short(name) for name in MODULES])
def test_arrows_point_down(name):
    wrong = []
    for imp in IMPORTS[name]:
        if _within(imp.module, PACKAGE) and (why := _arrow_rule(name, imp.module)):
            wrong.append(f"{_where(name, imp.line)} imports {imp.module}: {why}")
        if any(_within(_short(name), m) for m in NO_AIRFLOW) and _within(imp.module, "airflow"):
            wrong.append(f"{_where(name, imp.line)} imports {imp.module}: {_short(name)} must start without Airflow")
    if any(_within(_short(name), m) for m in NO_AIRFLOW) and (chain := _starts_airflow(name)):
        wrong.append(" -> ".join(chain) + f": {_short(name)} must start without Airflow")
    assert not wrong, "\n".join(wrong)


def _strongly_connected(graph: dict[str, dict[str, int]]) -> Iterator[list[str]]:
    """Tarjan's components of more than one module (a module importing itself is no cycle)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = [stack.pop()]
                while component[-1] != node:
                    component.append(stack.pop())
                if len(component) > 1:
                    yield sorted(component)


def _a_cycle(graph: dict[str, dict[str, int]], component: list[str]) -> list[tuple[str, int, str]]:
    """One circle of imports through the component's first module: ``(importer, line, imported)`` steps."""
    start = component[0]
    paths = {start: []}
    todo = [start]
    while todo:
        node = todo.pop(0)
        for target, line in sorted(graph[node].items()):
            if target == start:
                return [*paths[node], (node, line, target)]
            if target in component and target not in paths:
                paths[target] = [*paths[node], (node, line, target)]
                todo.append(target)
    raise AssertionError(f"no circle through {start}")  # a component always has one


def import_graph() -> dict[str, dict[str, int]]:
    """Module -> {module of ours it imports: first line}, C extensions included (they import nothing)."""
    graph: dict[str, dict[str, int]] = {name: {} for name in (*MODULES, *EXTENSIONS)}
    for name, imports in IMPORTS.items():
        for imp in imports:
            if imp.module in graph and imp.module != name:
                graph[name].setdefault(imp.module, imp.line)
    return graph


def test_no_import_cycles():
    """A circle of imports (inside functions too) works only in some import orders, and ties its modules into one."""
    graph = import_graph()
    circles = [
        " -> ".join(f"{_where(a, line)} imports {b}" for a, line, b in _a_cycle(graph, component))
        for component in _strongly_connected(graph)
    ]
    assert not circles, "import cycles (move what both need to a module below them):\n" + "\n".join(circles)


@pytest.mark.parametrize("name", MODULES, ids=[_short(name) for name in MODULES])
def test_only_the_model_reads_the_service_s_field_names(name):
    if any(_within(_short(name), reader) for reader in WIRE_READERS):
        pytest.skip(f"{_short(name)} is where wire names are read")
    path = MODULES[name]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = [
        f"{path.name}:{node.lineno} {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in WIRE_FIELDS and id(node) not in docstrings
    ]
    assert not found, f"read these through airflow_tables.model instead: {', '.join(found)}"


#: Issue 39's sizes: no module over this many lines, and the two classes that grew before it.
MODULE_LINES = 600
CLASS_LINES = {("hooks/tables.py", "DataTablesHook"): 500, ("operators/tables.py", "DataTablesImportOperator"): 250}


def test_no_module_is_over_600_lines():
    long = {
        str(p.relative_to(SRC)): n for p in SRC.rglob("*.py") if (n := len(p.read_text().splitlines())) > MODULE_LINES
    }
    assert long == {}, f"split these modules (at most {MODULE_LINES} lines each): {long}"


@pytest.mark.parametrize(("module", "name"), sorted(CLASS_LINES))
def test_the_hook_and_the_import_operator_stay_small(module, name):
    tree = ast.parse((SRC / module).read_text())
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    lines = (cls.end_lineno or cls.lineno) - cls.lineno + 1
    assert lines <= CLASS_LINES[module, name], f"{name} has {lines} lines; move a step out to a module of its own"
