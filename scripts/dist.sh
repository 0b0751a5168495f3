#!/usr/bin/env bash
# `make dist`: the sdist and the wheel of this checkout in dist/ (and nothing else there), the
# files docs/install.md installs with pip until the provider is on the package index.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.local/bin:$PATH"   # where scripts/setup.sh installs uv
rm -rf dist
uv build --quiet --out-dir dist .
rm -rf build
ls -1 dist/
