#!/usr/bin/env bash
# `make dist`: the sdist and the wheel of this checkout in dist/ (and nothing else there), the
# files docs/install.md installs with pip until the provider is on the package index.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.local/bin:$PATH"   # where scripts/setup.sh installs uv
rm -rf dist
had_egg_info=0; [ -d src/airflow_tables.egg-info ] && had_egg_info=1
uv build --quiet --out-dir dist .
# setuptools leaves its egg-info in src/ (on sys.path: Airflow would see the provider twice).
[ "$had_egg_info" = 1 ] || rm -rf src/airflow_tables.egg-info
rm -rf build
ls -1 dist/
