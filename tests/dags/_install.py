"""Put a DAG file (and the data beside it) in Airflow's dags folder and import it, for dag.test()."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

from airflow.sdk import DAG


def install_dag_file(source: Path, *data_dirs: Path) -> list[DAG]:
    """Copy ``source`` and ``data_dirs`` into ``$AIRFLOW_HOME/dags``; return the DAGs the copy defines.

    dag.test() reads the DAG from the dags folder, so the file runs from there, with the
    paths it computes from ``__file__`` pointing at the copied data.
    """
    dags = Path(os.environ["AIRFLOW_HOME"]) / "dags"
    dags.mkdir(parents=True, exist_ok=True)
    target = dags / source.name
    shutil.copy(source, target)
    for directory in data_dirs:
        shutil.copytree(directory, dags / directory.name, dirs_exist_ok=True)
    spec = importlib.util.spec_from_file_location(source.stem, target)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [value for value in vars(module).values() if isinstance(value, DAG)]
