#!/usr/bin/env bash
# Quick start, step 1: install packages, build, and train the XMC MLP on the
# bundled Bibtex data with 2 servers and 2 workers (examples/bibtex.pbtxt).
# Writes the final metrics to bibtex_metrics.json.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build/bin/tether-launch --config examples/bibtex.pbtxt --metrics_out bibtex_metrics.json
