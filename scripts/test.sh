#!/usr/bin/env bash
# Quick start, step 2: build and run every test (unit and integration).
# GPU tests report as skipped where no device exists. Extra arguments go to
# the CMake configure step (.ci/run passes -DTETHER_WERROR=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh "$@"
# Tests write only under their own temporary directories, inside a fresh
# TMPDIR that is removed afterwards: a run leaves nothing in /tmp.
TMPDIR=$(mktemp -d "${TMPDIR:-/tmp}/tether-test.XXXXXX")
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT
cd build
ctest --output-on-failure --timeout 900
