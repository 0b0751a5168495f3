#!/usr/bin/env bash
# The test suite: the OS packages the end-to-end tests need (PostgreSQL, Chromium;
# skipped in a blink when present), lint, then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ] || [ -n "${CI:-}" ]; then
  scripts/system-deps.sh
fi
.venv/bin/ruff check src tests dags benchmarks
.venv/bin/mypy   # the provider and the example DAGs, configured in pyproject.toml: zero errors
.venv/bin/python -m pytest "$@"
