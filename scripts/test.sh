#!/usr/bin/env bash
# The test suite: lint, then pytest. Later issues add the system packages the
# end-to-end tests need (PostgreSQL, Chromium) here.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check src tests dags benchmarks
.venv/bin/python -m pytest "$@"
