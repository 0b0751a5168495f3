# The two commands the README opens with, and the rest.
# Every target sets itself up first (scripts/setup.sh): a fresh machine needs only Python 3.11+.

PY := .venv/bin/python

.PHONY: demo test bench lint setup dist

setup:
	@scripts/setup.sh

demo: setup
	@$(PY) scripts/demo.py

test: setup
	@scripts/test.sh

bench: setup
	@$(PY) benchmarks/run_all.py

lint: setup
	@.venv/bin/ruff check src tests dags benchmarks scripts
	@.venv/bin/ruff format --check src tests dags benchmarks scripts
	@.venv/bin/mypy

# The sdist and the wheel in dist/, to install with pip as docs/install.md shows.
dist: setup
	@scripts/dist.sh
