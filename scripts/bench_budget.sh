#!/usr/bin/env bash
# What a table budget costs and saves, on Bibtex with a long tail: the
# bundled Bibtex with hashed features, each training row given two feature
# ids that occur nowhere else (tests/integration/noisy_bibtex.py), one
# server and one worker under BSP in one process (tether-launch --transport
# inproc), the example's XMC_MLP (hidden 256, Adam 0.001, minibatch 64,
# w1 not cached), seed 1. Each budget on w1 is trained --repeats times;
# prints a Markdown table for docs/FEATURE_COSTS.md: w1's rows at the end,
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
# Runs alternate: each repeat trains every budget once, in turn, so that a
# change in the host's load falls on every budget alike.
for r in $(seq 1 "$repeats"); do
  for i in "${!budgets[@]}"; do
    extra=${budgets[$i]#*|}
    cat > "$tmp/job.pbtxt" <<EOF2
name: "budget"
data { format: XMC train_file: "train.txt" test_file: "test.txt" index_base: 0 hashed_features: true }
model { type: XMC_MLP hidden: 256 loss: SOFTMAX }
optimizer { type: ADAM learning_rate: 0.001 }
consistency { model: BSP }
table { name: "w1" consistency { cache: false } $extra }
train { epochs: $epochs minibatch_size: 64 minibatches_per_clock: 1 seed: 1 threads: 1 }
EOF2
    # CPU seconds of the run (user + system): less sensitive than wall
    # time to other work on the host.
    { TIMEFORMAT='%3U %3S'; time timeout -k 5 300 "$bin/tether-launch" --config "$tmp/job.pbtxt" --servers 1 \
        --workers 1 --transport inproc --metrics_out "$tmp/b$i-r$r.json" > "$tmp/run.log" 2>&1; } 2> "$tmp/b$i-r$r.cpu" \
      || { tail -20 "$tmp/run.log" >&2; exit 1; }
  done
done
echo "| w1 budget | w1 rows | rows evicted | w1 resident bytes | samples/s (min-max) | CPU s a run (min-max) | P@1 |"
echo "|---|---|---|---|---|---|---|"
for i in "${!budgets[@]}"; do
  python3 - "${budgets[$i]%%|*}" "$tmp" "$repeats" "$i" <<'PY'
import json, statistics, sys
name, tmp, n, i = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
runs = [json.load(open(f"{tmp}/b{i}-r{r}.json")) for r in range(1, n + 1)]
s = runs[0]["servers"][0]
all_sps = [m["samples_per_second"] for m in runs]
sps = statistics.median(all_sps)
p1 = statistics.median(m["precision_at_1"] for m in runs)
cpu = [sum(float(x) for x in open(f"{tmp}/b{i}-r{r}.cpu").read().split()) for r in range(1, n + 1)]
print(f"| {name} | {s['table_rows'][0]:,} | {s['rows_evicted'][0]:,} | {s['resident_bytes'][0] / 1e6:.1f} MB | "
      f"{sps:,.0f} ({min(all_sps):,.0f}-{max(all_sps):,.0f}) | {statistics.median(cpu):.2f} "
      f"({min(cpu):.2f}-{max(cpu):.2f}) | {p1:.4f} |")
PY
done
echo
echo "load average at the end (1, 5, 15 min): $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores"
