#!/usr/bin/env bash
# Runs Tether at the scale of a real XMC set on synthetic data: generates it
# with tether-gen-xmc (once; kept in BUILD/synthetic/), trains with the
# matching job config, and reports samples/s, P@k and peak memory (resident
# set, per process and summed over the job's processes, sampled every 0.2 s)
# and the bytes the workers' frames took on the wire (metrics JSON
# workers[].wire: with --wire=bf16 the values travel in 16 bits).
#
#   scripts/bench_xmc_scale.sh [--build DIR] [--shape amazon670k] [--config FILE] [-- EXTRA FLAGS]
#
# Default: --shape amazon670k with examples/synthetic_amazon670k.pbtxt
# (2 servers, 2 workers, sampled softmax over 2,048 labels, 1 epoch over
# 490,449 rows). Flags after `--` go to tether-launch (e.g. --num_workers=1
# --staleness=0 --wire=bf16).
#
# Each run keeps its own files in BUILD/bench-scale-SHAPE/run-<UTC time>-<tag>/
# (metrics.json, metrics/, job.log, peak_rss_kb.txt): runs compared one
# after another (--wire=fp32, then bf16) do not overwrite each other.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
shape=amazon670k
config=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --shape) shape="$2"; shift 2 ;;
    --config) config="$2"; shift 2 ;;
    --) shift; break ;;
    *) echo "scripts/bench_xmc_scale.sh: unknown argument $1 (--build, --shape, --config, -- FLAGS)" >&2; exit 2 ;;
  esac
done
config="${config:-examples/synthetic_${shape}.pbtxt}"
[ -f "$config" ] || { echo "scripts/bench_xmc_scale.sh: no config $config" >&2; exit 2; }
data="$build/synthetic/$shape"
out="$build/bench-scale-$shape"
mkdir -p "$build/synthetic" "$out"
run=$(mktemp -d "$out/run-$(date -u +%Y%m%dT%H%M%SZ)-XXXX")
if [ ! -s "$data.train.txt" ] || [ ! -s "$data.test.txt" ]; then
  echo "scripts/bench_xmc_scale.sh: generating $data.{train,test}.txt" >&2
  "$build/bin/tether-gen-xmc" --shape="$shape" --test_rows=2000 --out_prefix="$data"
fi
echo "scripts/bench_xmc_scale.sh: this run's files are in $run" >&2

"$build/bin/tether-launch" --config "$config" --train_file="$data.train.txt" --test_file="$data.test.txt" \
  --metrics_dir="$run/metrics" --metrics_out "$run/metrics.json" "$@" > "$run/job.log" 2>&1 &
launcher=$!
peak_sum=0
declare -A peak
while kill -0 "$launcher" 2>/dev/null; do
  sum=0
  for pid in $(pgrep -P "$launcher" || true); do
    # A child may exit between pgrep and these reads: ignore it then.
    name=$({ tr '\0' ' ' < "/proc/$pid/cmdline"; } 2>/dev/null | grep -o -- '--\(rank\|shard\|in_process\)=\?[0-9]*' | head -1 || true)
    kb=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
    kb=${kb:-0}
    sum=$((sum + kb))
    key="${name:-pid$pid}"
    if [ "${peak[$key]:-0}" -lt "$kb" ]; then peak[$key]=$kb; fi
  done
  if [ "$sum" -gt "$peak_sum" ]; then peak_sum=$sum; fi
  sleep 0.2
done
status=0
wait "$launcher" || status=$?
if [ "$status" -ne 0 ]; then
  echo "scripts/bench_xmc_scale.sh: job failed ($status); see $run/job.log" >&2
  tail -20 "$run/job.log" >&2
  exit "$status"
fi
{
  for k in "${!peak[@]}"; do echo "$k ${peak[$k]}"; done
} | sort > "$run/peak_rss_kb.txt"
python3 - "$run" "$peak_sum" "$shape" <<'EOF'
import json, sys
out, peak_sum, shape = sys.argv[1], int(sys.argv[2]), sys.argv[3]
m = json.load(open(f"{out}/metrics.json"))
# Bytes on the wire, every worker's frames both ways as counted where they
# are sent and received, and what they would have been in float32.
wire_bytes = fp32_bytes = 0
encodings = set()
for w in m.get("workers", []):
    for v in w.get("wire", {}).values():
        b = v["sent_bytes"] + v["received_bytes"]
        wire_bytes += b
        fp32_bytes += (b - v["sent_value_bytes"] - v["received_value_bytes"] + v["sent_fp32_value_bytes"]
                       + v["received_fp32_value_bytes"])
        encodings.add(f"{v['pull_wire']}/{v['push_wire']}")
print(f"## Synthetic {shape}: one run\n")
print("| workers | servers | wire (pull/push) | samples | train s | samples/s | P@1 | P@3 | P@5 | test rows "
      "| MB on the wire (workers, both ways) | float32 bytes ÷ bytes | peak RSS, all processes |")
print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
print(f"| {m['num_workers']} | {m['num_servers']} | {', '.join(sorted(encodings))} | {m['total_samples']} | "
      f"{m['train_seconds']:.1f} | {m['samples_per_second']:.0f} | {m['precision_at_1']:.4f} | "
      f"{m['precision_at_3']:.4f} | {m['precision_at_5']:.4f} | {m['test_rows']} | {wire_bytes / 1e6:,.1f} | "
      f"{fp32_bytes / max(wire_bytes, 1):.3f} | {peak_sum / 1048576:.2f} GiB |")
print("\nPeak resident set per process (sampled every 0.2 s):\n")
for line in open(f"{out}/peak_rss_kb.txt"):
    k, kb = line.split()
    role = k.replace("--rank=", "worker ").replace("--shard=", "server ").replace("--in_process", "whole job (one process)")
    print(f"- {role}: {int(kb) / 1048576:.2f} GiB")
EOF
