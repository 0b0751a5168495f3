#!/usr/bin/env bash
# The test suite: the OS packages the end-to-end tests need (PostgreSQL, Chromium, Redis;
# skipped in a blink when present), lint, then pytest on the locked Airflow (3.3), then the
# unit and DAG-level tests on the older supported minors (scripts/matrix.py: 3.1, 3.2).
#
#   scripts/test.sh               everything (what `make test` and CI run)
#   scripts/test.sh tests/hooks   only pytest on 3.3, with these arguments
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ] || [ -n "${CI:-}" ]; then
  scripts/system-deps.sh
fi
.venv/bin/ruff check src tests dags benchmarks
.venv/bin/mypy   # the provider and the example DAGs, configured in pyproject.toml: zero errors
if [ $# -gt 0 ]; then
  exec .venv/bin/python -m pytest "$@"
fi

# Both parts run whatever the other's outcome, so one report names every minor that failed.
main=0
.venv/bin/python -m pytest || main=$?
matrix=0
.venv/bin/python scripts/matrix.py || matrix=$?
if [ "$main" != 0 ]; then
  echo "make test: the main run on Airflow 3.3 FAILED (pytest exit $main); re-run: .venv/bin/python -m pytest" >&2
fi
if [ "$matrix" != 0 ]; then
  echo "make test: the matrix FAILED on an older Airflow (see its summary above)" >&2
fi
[ "$main" = 0 ] && [ "$matrix" = 0 ]
