#!/usr/bin/env bash
# Quick start, step 2: build and run every test (unit and integration).
# GPU tests report as skipped where no device exists.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh "$@"
cd build
ctest --output-on-failure --timeout 900
