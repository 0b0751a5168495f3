#!/usr/bin/env bash
# The test suite: the OS packages the end-to-end tests need (PostgreSQL, Chromium, Redis;
# skipped in a blink when present), lint, then pytest on every Airflow and Python we claim.
#
#   scripts/test.sh               everything (what `make test` and CI run)
#   scripts/test.sh tests/hooks   only pytest on .venv (Airflow 3.3, Python 3.11), with these arguments
#
# One machine of 2 cores runs it all in two phases, so that the whole stays within CI's time:
#
#   1. side by side, each into its log (artifacts/): the unit and DAG-level tests on .venv
#      (Airflow 3.3, Python 3.11; in two runs), and scripts/matrix.py's runs (Airflow 3.1 at the lowest
#      declared versions on Python 3.11, 3.2 on 3.12, 3.4's pre-release on 3.13). A DAG-level
#      test mostly waits (on the emulator, on dag.test()'s polls), so four runs fill two cores
#      that one run leaves half idle.
#   2. alone: the tests that measure time or drive real processes against deadlines, on .venv:
#      the validator's and the emulator's (soak, timeouts) and the end-to-end runs (a real
#      scheduler, triggerer, workers and Chromium), with the machine to themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ] || [ -n "${CI:-}" ]; then
  scripts/system-deps.sh
fi
lint() {
  .venv/bin/ruff check src tests dags benchmarks scripts || return 1
  .venv/bin/mypy || return 1   # the provider and the example DAGs, configured in pyproject.toml: zero errors
}
if [ $# -gt 0 ]; then
  lint
  exec .venv/bin/python -m pytest "$@"
fi

started=$SECONDS
mkdir -p artifacts
# The matrix's venvs (PyPI, compiling) beside the lint: a Python the package declares that this
# machine lacks fails here, naming it, before any test runs.
scripts/matrix.py --setup-only >artifacts/matrix-setup.log 2>&1 &   # as docs/install.md writes it
setup_pid=$!
lint_status=0
lint || lint_status=$?
setup_status=0
wait "$setup_pid" || setup_status=$?
cat artifacts/matrix-setup.log
[ "$lint_status" = 0 ] && [ "$setup_status" = 0 ] || exit 1
echo "make test: lint and the matrix's set-up took $((SECONDS - started)) s"

# Phase 1. Every part runs whatever the others' outcome, so one report names every failure. The
# 3.3 run is cut in two, the DAG runs (dag.test() in tests/operators, sensors, utils, and the 200
# imports under faults) and the rest, so that neither is the one the others wait for (CI's run of
# 1f7b34d: 1365 s and 2072 s before the faults moved; the lanes' --durations say where to cut next).
ALONE=(tests/validation tests/emulator)
DAG_RUNS=(tests/operators tests/sensors tests/utils tests/reliability)
main=0
rest=0
matrix=0
# --durations: each run's slowest tests, in its log, for whoever trims the next minute.
.venv/bin/python -m pytest -m "not e2e" "${DAG_RUNS[@]}" -p no:cacheprovider --durations=30 \
  >artifacts/main-dag-runs.log 2>&1 &
main_pid=$!
.venv/bin/python -m pytest -m "not e2e" "${ALONE[@]/#/--ignore=}" "${DAG_RUNS[@]/#/--ignore=}" \
  -p no:cacheprovider --durations=30 >artifacts/main-rest.log 2>&1 &
rest_pid=$!
scripts/matrix.py -- --durations=30 &
matrix_pid=$!
wait "$matrix_pid" || matrix=$?
wait "$main_pid" || main=$?
wait "$rest_pid" || rest=$?
for part in main-dag-runs main-rest; do
  echo
  echo "===== Airflow 3.3: $part (artifacts/$part.log) ====="
  cat "artifacts/$part.log"
done
echo "make test: phase 1 (side by side) ended at $((SECONDS - started)) s"

# Phase 2.
alone=0
.venv/bin/python -m pytest "${ALONE[@]}" tests/e2e -p no:cacheprovider --durations=30 || alone=$?
echo "make test: the whole run took $((SECONDS - started)) s"

if [ "$main" != 0 ] || [ "$rest" != 0 ]; then
  echo "make test: the unit and DAG-level tests on Airflow 3.3 FAILED (pytest exits $main, $rest); see artifacts/main-*.log" >&2
fi
if [ "$matrix" != 0 ]; then
  echo "make test: the matrix FAILED on another Airflow or Python (see its summary above)" >&2
fi
if [ "$alone" != 0 ]; then
  echo "make test: the validator's, the emulator's or the end-to-end tests on Airflow 3.3 FAILED (pytest exit $alone)" >&2
fi
[ "$main" = 0 ] && [ "$rest" = 0 ] && [ "$matrix" = 0 ] && [ "$alone" = 0 ]
