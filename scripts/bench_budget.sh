#!/usr/bin/env bash
# What a table budget costs and saves, on Bibtex with a long tail: the
# bundled Bibtex with hashed features, each training row given two feature
# ids that occur nowhere else (tests/integration/noisy_bibtex.py), one
# server and one worker under BSP in one process (tether-launch --transport
# inproc), the example's XMC_MLP (hidden 256, Adam 0.001, minibatch 64,
# w1 not cached), seed 1. Each budget on w1 is trained --repeats times;
# prints a Markdown table for docs/PERFORMANCE.md: w1's rows at the end,
# rows evicted, w1's resident bytes, samples/s (median), P@1 (median).
#
#   scripts/bench_budget.sh [--build DIR] [--epochs E] [--repeats N]
#
# Defaults: --build build, --epochs 7, --repeats 3. About 3 s a run.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
epochs=7
repeats=3
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    *) echo "unknown argument: $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
bin=$(cd "$build/bin" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 tests/integration/noisy_bibtex.py "$tmp" >&2

budgets=(
  "none|"
  "admit_after: $((epochs + 1))|admit_after: $((epochs + 1))"
  "max_rows: 4000, LRU|max_rows: 4000 evict: LRU"
  "max_rows: 4000, LFU|max_rows: 4000 evict: LFU"
  "max_rows: 2000, LRU|max_rows: 2000 evict: LRU"
  "TTL 40 clocks|evict: TTL ttl_clocks: 40"
)
echo "| w1 budget | w1 rows | rows evicted | w1 resident bytes | samples/s | P@1 |"
echo "|---|---|---|---|---|---|"
for b in "${budgets[@]}"; do
  name=${b%%|*}
  extra=${b#*|}
  for r in $(seq 1 "$repeats"); do
    cat > "$tmp/job.pbtxt" <<EOF2
name: "budget"
data { format: XMC train_file: "train.txt" test_file: "test.txt" index_base: 0 hashed_features: true }
model { type: XMC_MLP hidden: 256 loss: SOFTMAX }
optimizer { type: ADAM learning_rate: 0.001 }
consistency { model: BSP }
table { name: "w1" consistency { cache: false } $extra }
train { epochs: $epochs minibatch_size: 64 minibatches_per_clock: 1 seed: 1 threads: 1 }
EOF2
    timeout -k 5 300 "$bin/tether-launch" --config "$tmp/job.pbtxt" --servers 1 --workers 1 --transport inproc \
      --metrics_out "$tmp/run$r.json" > "$tmp/run.log" 2>&1 || { tail -20 "$tmp/run.log" >&2; exit 1; }
  done
  python3 - "$name" "$tmp" "$repeats" <<'PY'
import json, statistics, sys
name, tmp, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
runs = [json.load(open(f"{tmp}/run{r}.json")) for r in range(1, n + 1)]
s = runs[0]["servers"][0]
sps = statistics.median(m["samples_per_second"] for m in runs)
p1 = statistics.median(m["precision_at_1"] for m in runs)
print(f"| {name} | {s['table_rows'][0]:,} | {s['rows_evicted'][0]:,} | {s['resident_bytes'][0] / 1e6:.1f} MB | "
      f"{sps:,.0f} | {p1:.4f} |")
PY
done
