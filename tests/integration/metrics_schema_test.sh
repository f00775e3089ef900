#!/usr/bin/env bash
# The metrics files keep their schema: real jobs (Bibtex with a metrics_dir
# and a mid-training evaluation, a9a, pendigits; one or two epochs) write
# their metrics JSON and JSON-lines rows, and the key/type tree of each must
# equal the fixture recorded before the stats became typed messages
# (tests/data/metrics_schema/, tests/integration/metrics_schema.py). On
# the Bibtex file the stats' values must also add up (samples, pushes sent
# and applied, the merged τ histogram, the per-rank bound waits, the job's
# samples/s against every worker's training time).
# Usage: metrics_schema_test.sh BIN_DIR   (run from the repository root)
# Every process is started under `timeout`; everything is written under a
# temporary directory that is removed on exit.
source "$(dirname "$0")/lib.sh"
tether_test_init schema "$1"
fixtures=tests/data/metrics_schema
schema=tests/integration/metrics_schema.py

failed=0
timeout -k 5 200 "$bin/tether-launch" --config tests/data/bibtex_fixed.pbtxt --epochs=2 --eval_every_epochs=1 \
  --metrics_dir="$tmp/mdir" --timeout_s=180 --metrics_out "$tmp/bibtex.json" >"$tmp/bibtex.log" 2>&1 ||
  { tail -20 "$tmp/bibtex.log"; exit 1; }
python3 "$schema" check "$fixtures/bibtex.json" "$tmp/bibtex.json" || failed=1
# The typed stats made it through BARRIER and STATS_REPLY with their values:
# what the workers and shards counted adds up across the file.
python3 - "$tmp/bibtex.json" <<'PY' || failed=1
import json, sys
m = json.load(open(sys.argv[1]))
def expect(what, got, want):
    print(f"{what}: {got} (want {want})")
    if got != want:
        sys.exit(f"FAIL: {what}")
expect("worker ranks", [w["rank"] for w in m["workers"]], [0, 1])
expect("samples over workers", sum(w["samples"] for w in m["workers"]), m["total_samples"])
expect("total_samples (2 epochs of 4880)", m["total_samples"], 9760)
expect("shards", [s["shard"] for s in m["servers"]], [0, 1])
for s in m["servers"]:
    expect(f"shard {s['shard']}: histogram entries vs pushes", sum(s["staleness_histogram"]), s["pushes"])
    expect(f"shard {s['shard']}: bound_wait_seconds per rank", len(s["bound_wait_seconds"]), 2)
n = max(len(s["staleness_histogram"]) for s in m["servers"])
merged = [sum(s["staleness_histogram"][i] for s in m["servers"] if i < len(s["staleness_histogram"])) for i in range(n)]
expect("merged histogram", m["staleness_histogram"], merged)
expect("staleness_max", m["staleness_max"], max(s["staleness_max"] for s in m["servers"]))
expect("pushes sent vs applied", sum(w["pushes"] for w in m["workers"]), sum(s["pushes"] for s in m["servers"]))
for r, w in enumerate(m["workers"]):
    expect(f"worker {r}: bound_wait_seconds", w["bound_wait_seconds"], max(s["bound_wait_seconds"][r] for s in m["servers"]))
expect("bound_violations", m["bound_violations"], 0)
# samples_per_second spans the job, first start to last end, which covers
# every worker's own training time (1e-3 of slack: the span is taken on the
# wall clock, train_seconds on the steady clock).
slowest = max(w["train_seconds"] for w in m["workers"])
bound = m["total_samples"] / slowest
print(f"samples_per_second: {m['samples_per_second']:.1f} (want <= total_samples / slowest worker's "
      f"train_seconds = {bound:.1f})")
if not 0 < m["samples_per_second"] <= bound * 1.001:
    sys.exit("FAIL: samples_per_second")
PY
python3 "$schema" check "$fixtures/metrics_dir.json" "$tmp/mdir" || failed=1
for job in a9a pendigits; do
  timeout -k 5 200 "$bin/tether-launch" --config "examples/$job.pbtxt" --epochs=1 --timeout_s=180 \
    --metrics_out "$tmp/$job.json" >"$tmp/$job.log" 2>&1 || { tail -20 "$tmp/$job.log"; exit 1; }
  python3 "$schema" check "$fixtures/$job.json" "$tmp/$job.json" || failed=1
done
exit $failed
