#!/usr/bin/env bash
# The metrics files keep their schema: real jobs (Bibtex with a metrics_dir
# and a mid-training evaluation, a9a, pendigits; one or two epochs) write
# their metrics JSON and JSON-lines rows, and the key/type tree of each must
# equal the fixture recorded before the stats became typed messages
# (tests/data/metrics_schema/, tests/integration/metrics_schema.py).
# Usage: metrics_schema_test.sh BIN_DIR   (run from the repository root)
# Every process is started under `timeout`; everything is written under a
# temporary directory that is removed on exit.
set -euo pipefail
bin=$(cd "$1" && pwd)
fixtures=tests/data/metrics_schema
schema=tests/integration/metrics_schema.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail=0
timeout -k 5 200 "$bin/tether-launch" --config examples/bibtex.pbtxt --epochs=2 --eval_every_epochs=1 \
  --metrics_dir="$tmp/mdir" --timeout_s=180 --metrics_out "$tmp/bibtex.json" >"$tmp/bibtex.log" 2>&1 ||
  { tail -20 "$tmp/bibtex.log"; exit 1; }
python3 "$schema" check "$fixtures/bibtex.json" "$tmp/bibtex.json" || fail=1
python3 "$schema" check "$fixtures/metrics_dir.json" "$tmp/mdir" || fail=1
for job in a9a pendigits; do
  timeout -k 5 200 "$bin/tether-launch" --config "examples/$job.pbtxt" --epochs=1 --timeout_s=180 \
    --metrics_out "$tmp/$job.json" >"$tmp/$job.log" 2>&1 || { tail -20 "$tmp/$job.log"; exit 1; }
  python3 "$schema" check "$fixtures/$job.json" "$tmp/$job.json" || fail=1
done
exit $fail
