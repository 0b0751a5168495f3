"""The reference pages name everything they are the reference for, so an addition cannot go undocumented."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import airflow_tables.exceptions as exceptions

ROOT = Path(__file__).resolve().parents[2]
HOOK_DOC = (ROOT / "docs" / "hook.md").read_text(encoding="utf-8")
EXAMPLES_DOC = (ROOT / "docs" / "examples.md").read_text(encoding="utf-8")


def test_hook_md_documents_every_public_member_of_the_hook():
    from airflow_tables.hooks.tables import DataTablesHook

    # The hook's own members and those of its mixins (hooks/waits.py, _form.py, _deprecated.py).
    ours = [cls for cls in DataTablesHook.__mro__ if cls.__module__.startswith("airflow_tables.")]
    public = sorted({name for cls in ours for name in vars(cls) if not name.startswith("_")})
    assert [name for name in public if f"`{name}" not in HOOK_DOC] == []


def test_hook_md_documents_every_exception_class():
    classes = [
        name
        for name, value in vars(exceptions).items()
        if inspect.isclass(value) and issubclass(value, Exception) and value.__module__ == exceptions.__name__
    ]
    assert len(classes) >= 16
    assert [name for name in classes if f"| `{name}` |" not in HOOK_DOC] == []


def test_examples_md_documents_every_example_dag_and_the_environment_it_reads():
    dags = sorted((ROOT / "dags").glob("example_*.py"))
    assert [p.stem for p in dags if f"`{p.stem}`" not in EXAMPLES_DOC] == []
    read = set()
    for path in dags:
        read |= set(re.findall(r"""os\.(?:environ\.get|getenv)\(\s*["']([A-Z0-9_]+)["']""", path.read_text()))
        read |= set(re.findall(r"""os\.environ\[\s*["']([A-Z0-9_]+)["']""", path.read_text()))
    assert {"DATATABLES_PROJECT_ID", "DATATABLES_DAILY_CARD_ID", "DATATABLES_SERVICE"} <= read
    assert sorted(name for name in read if f"| `{name}` |" not in EXAMPLES_DOC) == []
