#!/usr/bin/env bash
# Set up the project's environment from nothing but Python 3.11+: install uv if it is
# missing (from PyPI), then the locked dependencies into .venv, bytecode compiled
# (PYTHONDONTWRITEBYTECODE may be set on the machine; without compiled bytecode
# Airflow's start-up takes twice as long).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v uv >/dev/null 2>&1; then
  if [ ! -x "$HOME/.local/bin/uv" ]; then
    echo "setup: installing uv from PyPI" >&2
    python3 -m pip install --quiet --user uv 2>/dev/null || python3 -m pip install --quiet uv
  fi
  export PATH="$HOME/.local/bin:$PATH"
fi
command -v uv >/dev/null 2>&1 || { echo "setup: uv could not be installed" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
  # A first run on a cold cache downloads and compiles a few hundred MB: say so, instead of a silent minute.
  echo "setup: first run: installing Apache Airflow 3.3 and the locked dependencies into .venv" \
       "(1-2 minutes on a cold cache, seconds after)" >&2
fi
uv sync --frozen --all-extras --compile-bytecode --quiet   # and the dev group (uv's default)
# The project itself is installed editable (src/ is on sys.path, so uv compiles none of it): compiled
# here as an installed wheel's modules are, so that no task, test or benchmark compiles them at each
# first import (validate_csv's first call in a new process: 12 ms less).
if [ -x .venv/bin/python ] && [ -d src/airflow_tables ]; then  # an optimisation: never a reason to fail
  .venv/bin/python -m compileall -q src/airflow_tables
fi
