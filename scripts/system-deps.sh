#!/usr/bin/env bash
# Install the OS packages the end-to-end tests need (tests/e2e): PostgreSQL for
# Airflow's metadata database, Debian's Chromium (and a font) for the UI checks,
# Redis as the Celery broker of the distributed run.
#
# Idempotent and fast: a package already installed is not asked for again, and
# apt-get runs only when something is missing. Installs only as root; otherwise it
# prints what to install and exits 1 (callers that can run without the e2e tests
# decide what that means).
#
#   scripts/system-deps.sh           install what is missing
#   scripts/system-deps.sh --check   only report; exit 1 if something is missing
set -euo pipefail

PACKAGES=(postgresql chromium fonts-dejavu-core redis-server)

check_only=0
[ "${1:-}" = "--check" ] && check_only=1

installed() {
  [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" = "install ok installed" ]
}

missing=()
for p in "${PACKAGES[@]}"; do
  installed "$p" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$check_only" = 1 ]; then
  echo "system-deps: missing OS packages: ${missing[*]}" >&2
  exit 1
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "system-deps: no apt-get here; install these yourself: ${missing[*]}" >&2
  exit 1
fi
if [ "$(id -u)" != 0 ]; then
  echo "system-deps: not root; install these to run the e2e tests: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi

echo "system-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# Try without refreshing the index first (fast when it is fresh); on failure, update and retry.
if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >"$log" 2>&1; then
  if ! { apt-get update -q && apt-get install -y -q --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "system-deps: apt-get could not install ${missing[*]}" >&2
    exit 1
  fi
fi

# The Debian packages start a PostgreSQL cluster on port 5432 and Redis on 6379 where an
# init system runs; the tests start theirs on free ports, so those are left alone.
for p in "${missing[@]}"; do
  installed "$p" || { echo "system-deps: $p did not install" >&2; exit 1; }
done
echo "system-deps: done" >&2
