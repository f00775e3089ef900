#!/usr/bin/env bash
# Acceptance benchmark for hashed 64-bit feature ids (issue 15 item 1):
# synthetic XMC data whose feature ids are spread over the whole 64-bit range
# (tether-gen-xmc --feature_id_bits=64), ~10^7 distinct ids, hidden width 16,
# trained with data.hashed_features: true by 2 servers and 2 workers started
# by hand, each under /usr/bin/time -v (peak RSS per process). Prints a table
# for docs/PERFORMANCE.md: rows held per server (distinct ids trained), peak
# RSS, wall time, samples/s, P@1.
#
#   scripts/bench_hashed.sh [--build DIR] [--distinct N] [--rows R] [--epochs E]
#
# Defaults: --distinct 10000000 (F, the number of distinct ids the generator
# draws from, uniformly), --rows 1000000 training rows of ~50 ids each (so
# nearly every id occurs), --epochs 1. The data (~1.5 GB of text) is kept in
# BUILD/synthetic/ and reused. Not a test: it takes minutes and gigabytes.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
distinct=10000000
rows=1000000
epochs=1
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --distinct) distinct="$2"; shift 2 ;;
    --rows) rows="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    *) echo "scripts/bench_hashed.sh: unknown argument $1 (--build, --distinct, --rows, --epochs)" >&2; exit 2 ;;
  esac
done
bin="$(cd "$build/bin" && pwd)"
data="$(cd "$build" && pwd)/synthetic/hashed-$distinct-$rows"
out="$(cd "$build" && pwd)/bench-hashed"
mkdir -p "$(dirname "$data")" "$out"
rm -f "$out"/*.port "$out"/*.time "$out"/*.log "$out/m.json"
if [ ! -s "$data.train.txt" ] || [ ! -s "$data.test.txt" ]; then
  echo "generating $data.{train,test}.txt" >&2
  /usr/bin/time -v "$bin/tether-gen-xmc" --feature_id_bits=64 --num_features="$distinct" --feature_exponent=0 \
    --features_per_row=50 --signal_fraction=0.1 --num_labels=1000 --labels_per_row=3 --train_rows="$rows" \
    --test_rows=10000 --seed=15 --out_prefix="$data" 2> "$out/gen.time"
fi
cat > "$out/job.pbtxt" <<EOF2
name: "bench-hashed"
cluster {
  num_servers: 2 num_workers: 2
  request_timeout_ms: 600000 startup_timeout_ms: 600000 idle_timeout_ms: 1800000 worker_timeout_ms: 600000
}
data {
  format: XMC
  train_file: "$data.train.txt"
  test_file: "$data.test.txt"
  index_base: 0
  hashed_features: true
}
model { type: XMC_MLP hidden: 16 loss: SOFTMAX }
optimizer { type: ADAGRAD learning_rate: 0.1 }
consistency { staleness: 2 }
# The input rows are touched once or twice an epoch each: not cached. The
# output layer and hidden bias are cached (the default; cache-bounded by the
# table's size: 1000 x 17 floats).
table { name: "w1" consistency { cache: false } }
train { epochs: $epochs minibatch_size: 256 seed: 1 threads: 1 }
EOF2
pids=()
cleanup() { for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
start=$SECONDS
for s in 0 1; do
  /usr/bin/time -v -o "$out/server$s.time" "$bin/tether-server" --config="$out/job.pbtxt" --shard=$s \
    --listen=tcp://127.0.0.1:0 --port_file="$out/s$s.port" 2> "$out/server$s.log" &
  pids+=($!)
done
for _ in $(seq 1 300); do [ -f "$out/s0.port" ] && [ -f "$out/s1.port" ] && break; sleep 0.1; done
addrs="$(cat "$out/s0.port"),$(cat "$out/s1.port")"
/usr/bin/time -v -o "$out/worker1.time" "$bin/tether-worker" --config="$out/job.pbtxt" --rank=1 \
  --server_addresses="$addrs" 2> "$out/worker1.log" &
pids+=($!)
/usr/bin/time -v -o "$out/worker0.time" "$bin/tether-worker" --config="$out/job.pbtxt" --rank=0 \
  --server_addresses="$addrs" --metrics_out="$out/m.json" 2> "$out/worker0.log"
for p in "${pids[@]}"; do wait "$p"; done
pids=()
wall=$((SECONDS - start))
python3 - "$out" "$wall" "$distinct" "$rows" <<'PY'
import json, re, sys
out, wall, distinct, rows = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
m = json.load(open(f"{out}/m.json"))
def rss(name):
    t = open(f"{out}/{name}.time").read()
    return int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1)) / 1048576
held = [s["table_rows"][0] for s in m["servers"]]
print(f"## Hashed 64-bit features: {distinct} ids drawn, {rows} training rows, hidden 16, 2 servers, 2 workers\n")
print(f"distinct ids trained (w1 rows, server 0 + server 1): {held[0]} + {held[1]} = {sum(held)}")
print(f"wall {wall} s (start of the servers to the end), train {m['train_seconds']:.1f} s, "
      f"{m['samples_per_second']:.0f} samples/s, P@1 {m['precision_at_1']:.4f} on {m['test_rows']} test rows\n")
print("| process | peak RSS (GiB, /usr/bin/time -v) |")
print("|---|---:|")
total = 0
for p in ("server0", "server1", "worker0", "worker1"):
    total += rss(p)
    print(f"| {p} | {rss(p):.2f} |")
print(f"| sum | {total:.2f} |")
PY
