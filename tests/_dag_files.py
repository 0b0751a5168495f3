"""DAG files for ``dag.test()``: put in Airflow's dags folder and imported from there.

``dag.test()`` runs a DAG from the dags folder, so a test's DAG file is copied there (with the
data beside it) and imported from the copy, whose paths computed from ``__file__`` then point at
the copied data. Every test directory does it this way.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any


def dags_folder() -> Path:
    """``$AIRFLOW_HOME/dags``, made if it is missing."""
    folder = Path(os.environ["AIRFLOW_HOME"]) / "dags"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def copy_to_dags_folder(source: Path, *data_dirs: Path) -> Path:
    """Copy ``source`` and the directories ``data_dirs`` into the dags folder; return the copy's path."""
    folder = dags_folder()
    target = folder / source.name
    shutil.copy(source, target)
    for directory in data_dirs:
        shutil.copytree(directory, folder / directory.name, dirs_exist_ok=True)
    return target


def imported(file_name: str) -> ModuleType:
    """The dags folder's ``file_name``, imported as a new module named after it (each call runs it again)."""
    path = dags_folder() / file_name
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def install(source: Path, *data_dirs: Path) -> ModuleType:
    """Copy ``source`` (and ``data_dirs``) into the dags folder and import the copy."""
    return imported(copy_to_dags_folder(source, *data_dirs).name)


def dags_in(module: ModuleType) -> list[Any]:
    """The DAGs a DAG file's module defines, in the order it defines them."""
    from airflow.sdk import DAG  # not at import: the emulator's tests run without Airflow

    return [value for value in vars(module).values() if isinstance(value, DAG)]
