"""The house rules of docs/architecture.md, read from the code itself: arrows point down, one reader of wire names.

Imports are read with ``ast`` (function-level imports count; ``if TYPE_CHECKING:`` blocks do
not, since they draw no arrow at run time). A failure names the module, the line and the
rule, so the fix is to move the code, not to weaken the test.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "airflow_tables"
PACKAGE = "airflow_tables"

#: Who may not import whom: (importer prefix, forbidden prefixes, why).
RULES: list[tuple[str, tuple[str, ...], str]] = [
    ("model", (PACKAGE,), "the service's nouns are I/O-free and stand on nothing of ours but exceptions"),
    (
        "evidence",
        ("hooks", "operators", "sensors", "utils", "plugins", "triggers", "sources", "validation"),
        "the evidence rule is I/O-free: the hook and the operators hand it what they read",
    ),
    ("exceptions", (PACKAGE,), "every layer raises them, so they import nothing of ours"),
    ("version_compat", ("operators", "sensors", "utils", "plugins", "triggers", "hooks"), "it sits below them all"),
    ("_durable", ("operators", "sensors", "utils", "plugins", "triggers", "hooks"), "version_compat's stand-in"),
    ("hooks", ("operators", "sensors", "utils", "plugins", "triggers", "expectations"), "the client knows no task"),
    ("triggers", ("operators", "sensors", "utils", "plugins"), "one trigger serves the operators and the sensor"),
    ("utils", ("operators", "sensors", "plugins"), "what tasks share stands below them"),
    ("sensors", ("operators",), "the sensor shares utils/ with the operators, not their modules"),
    ("plugins", ("operators", "sensors", "utils", "expectations"), "the page only reads: hooks, model, assets"),
    ("notifiers", ("operators", "sensors", "utils", "plugins", "triggers"), "a notifier only looks: hooks, model"),
    ("validation", ("hooks", "operators", "sensors", "utils", "plugins", "triggers", "expectations", "emulator"), ""),
    ("sources", ("validation", "hooks", "operators", "sensors", "utils", "plugins", "triggers"), "a source is bytes"),
    ("expectations", ("hooks", "operators", "sensors", "utils", "plugins", "triggers"), "checks before any request"),
    ("emulator", ("hooks", "operators", "sensors", "utils", "plugins", "triggers", "expectations", "sources"), ""),
]
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


def _modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(p for p in parts if p != "__init__") or "__init__"
        found.append((name, path))
    return found


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every import that runs, relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = _type_checking_lines(tree)
    package = ".".join((PACKAGE, *path.relative_to(SRC).parent.parts))
    found = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names if base == PACKAGE]
    return found


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _ours(module: str) -> str | None:
    return module.removeprefix(PACKAGE + ".") if _within(module, PACKAGE) and module != PACKAGE else None


MODULES = _modules()


@pytest.mark.parametrize(("name", "path"), MODULES, ids=[name for name, _ in MODULES])
def test_arrows_point_down(name, path):
    wrong = []
    for line, module in _imports(path):
        target = _ours(module)
        for importer, forbidden, why in RULES:
            if not _within(name, importer) or target is None or _within(target, importer):
                continue
            if PACKAGE in forbidden and target not in ("exceptions",):
                wrong.append(f"{path.name}:{line} imports {module}: {importer} {why}")
            elif any(_within(target, f) for f in forbidden):
                wrong.append(f"{path.name}:{line} imports {module}: {importer} may not import it ({why})")
        if any(_within(name, m) for m in NO_AIRFLOW) and _within(module, "airflow"):
            wrong.append(f"{path.name}:{line} imports {module}: {name} must start without Airflow")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(("name", "path"), MODULES, ids=[name for name, _ in MODULES])
def test_only_the_model_reads_the_service_s_field_names(name, path):
    if any(_within(name, reader) for reader in WIRE_READERS):
        pytest.skip(f"{name} is where wire names are read")
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


def test_the_rules_are_checked_on_real_modules():
    """A rule naming a layer that does not exist would pass for ever."""
    names = {name.split(".")[0] for name, _ in MODULES}
    for importer, _, _ in RULES:
        assert importer in names, importer
