#!/usr/bin/env bash
# Benchmark of hashed 64-bit feature ids:
# synthetic XMC data whose feature ids are spread over the whole 64-bit range
# (tether-gen-xmc --feature_id_bits=64), ~10^7 distinct ids, hidden width 16,
# trained with data.hashed_features: true by 2 servers and 2 workers started
# by hand, each under /usr/bin/time -v (peak RSS per process). Prints a table
# for docs/SCALE_AND_GPU.md: rows held per server (distinct ids trained), peak
# RSS, wall time, samples/s, P@1.
#
#   scripts/bench_hashed.sh [--build DIR] [--distinct N] [--rows R] [--epochs E] [--compare]
#                           [--cache_capacity BYTES]
#
# Defaults: --distinct 10000000 (F, the number of distinct ids the generator
# draws from, uniformly), --rows 1000000 training rows of ~50 ids each (so
# nearly every id occurs), --epochs 1, --cache_capacity 67108864 (each
# worker's cache, every table in it). --compare also trains the same rows
# with ordinary ids 0..F-1 (data.num_features = F, no hashing): the baseline
# the hashed run is compared with (ratios in the last table). Data (~1.5 GB
# of text at the defaults) is kept in BUILD/synthetic/ and reused. Not a
# test: at the defaults it takes many minutes and several GB.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
distinct=10000000
rows=1000000
epochs=1
compare=0
cache=67108864
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --distinct) distinct="$2"; shift 2 ;;
    --rows) rows="$2"; shift 2 ;;
    --epochs) epochs="$2"; shift 2 ;;
    --compare) compare=1; shift ;;
    --cache_capacity) cache="$2"; shift 2 ;;
    *) echo "scripts/bench_hashed.sh: unknown argument $1 (--build, --distinct, --rows, --epochs, --compare, --cache_capacity)" >&2
       exit 2 ;;
  esac
done
bin="$(cd "$build/bin" && pwd)"
root="$(cd "$build" && pwd)"
mkdir -p "$root/synthetic"
pids=()
cleanup() { for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

run() {  # run hashed|plain: generates (once), trains, leaves BUILD/bench-hashed/KIND/
  local kind=$1 bits=64 data out
  [ "$kind" = plain ] && bits=32
  data="$root/synthetic/$kind-$distinct-$rows"
  out="$root/bench-hashed/$kind"
  mkdir -p "$out"
  rm -f "$out"/*.port "$out"/*.time "$out"/*.log "$out/m.json"
  if [ ! -s "$data.train.txt" ] || [ ! -s "$data.test.txt" ]; then
    echo "generating $data.{train,test}.txt" >&2
    "$bin/tether-gen-xmc" --feature_id_bits=$bits --num_features="$distinct" --feature_exponent=0 \
      --features_per_row=50 --signal_fraction=0.1 --num_labels=1000 --labels_per_row=3 --train_rows="$rows" \
      --test_rows=10000 --seed=15 --out_prefix="$data" > "$out/gen.log"
  fi
  local width="hashed_features: true"
  [ "$kind" = plain ] && width="num_features: $distinct"
  cat > "$out/job.pbtxt" <<EOF2
name: "bench-hashed-$kind"
cluster {
  num_servers: 2 num_workers: 2
  request_timeout_ms: 1800000 startup_timeout_ms: 1800000 idle_timeout_ms: 1800000 worker_timeout_ms: 1800000
}
data {
  format: XMC
  train_file: "$data.train.txt"
  test_file: "$data.test.txt"
  index_base: 0
  $width
}
model { type: XMC_MLP hidden: 16 loss: SOFTMAX }
optimizer { type: ADAGRAD learning_rate: 0.1 }
# Every table cached, in one LRU bounded by --cache_capacity bytes per worker
# (default 64 MiB, a tenth of w1's 10^7 x 16 floats).
consistency { staleness: 2 cache_capacity_bytes: $cache }
train { epochs: $epochs minibatch_size: 256 seed: 1 threads: 1 }
EOF2
  local start=$SECONDS s
  for s in 0 1; do
    /usr/bin/time -v -o "$out/server$s.time" "$bin/tether-server" --config="$out/job.pbtxt" --shard=$s \
      --listen=tcp://127.0.0.1:0 --port_file="$out/s$s.port" 2> "$out/server$s.log" &
    pids+=($!)
  done
  for _ in $(seq 1 300); do [ -f "$out/s0.port" ] && [ -f "$out/s1.port" ] && break; sleep 0.1; done
  local addrs
  addrs="$(cat "$out/s0.port"),$(cat "$out/s1.port")"
  /usr/bin/time -v -o "$out/worker1.time" "$bin/tether-worker" --config="$out/job.pbtxt" --rank=1 \
    --server_addresses="$addrs" 2> "$out/worker1.log" &
  pids+=($!)
  /usr/bin/time -v -o "$out/worker0.time" "$bin/tether-worker" --config="$out/job.pbtxt" --rank=0 \
    --server_addresses="$addrs" --metrics_out="$out/m.json" 2> "$out/worker0.log"
  for s in "${pids[@]}"; do wait "$s"; done
  pids=()
  echo $((SECONDS - start)) > "$out/wall_s"
}

run hashed
[ "$compare" = 1 ] && run plain
python3 - "$root/bench-hashed" "$distinct" "$rows" "$compare" <<'PY'
import json, re, sys
base, distinct, rows, compare = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
def rss(kind, name):
    t = open(f"{base}/{kind}/{name}.time").read()
    return int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1)) / 1048576
def row(kind):
    m = json.load(open(f"{base}/{kind}/m.json"))
    held = [s["table_rows"][0] for s in m["servers"]]
    r = {p: rss(kind, p) for p in ("server0", "server1", "worker0", "worker1")}
    wall = int(open(f"{base}/{kind}/wall_s").read())
    return m, held, r, wall
print(f"## Hashed 64-bit features: ids from {distinct} drawn, {rows} training rows, hidden 16, "
      "2 servers, 2 workers, started by hand\n")
print("| ids | w1 rows (server 0 + 1) | wall s | train s | samples/s | P@1 | peak RSS GiB: server 0, server 1, "
      "worker 0, worker 1 (sum) | cache per worker: capacity, peak bytes, evictions, hit rate |")
print("|---|---:|---:|---:|---:|---:|---|---|")
results = {}
for kind in (["hashed", "plain"] if compare else ["hashed"]):
    m, held, r, wall = row(kind)
    results[kind] = (m, r, wall)
    label = "64-bit, hashed" if kind == "hashed" else "0..F-1, num_features F"
    print(f"| {label} | {held[0]} + {held[1]} = {sum(held)} | {wall} | {m['train_seconds']:.1f} | "
          f"{m['samples_per_second']:.0f} | {m['precision_at_1']:.4f} | "
          f"{r['server0']:.2f}, {r['server1']:.2f}, {r['worker0']:.2f}, {r['worker1']:.2f} "
          f"({sum(r.values()):.2f}) | " +
          "; ".join(f"{w['cache_capacity_bytes']}, {w['cache_peak_bytes']}, {w['cache_evictions']}, "
                    f"{w['cache_hit_rate']:.3f}" for w in m["workers"]) + " |")
if compare:
    (mh, rh, wh), (mp, rp, wp) = results["hashed"], results["plain"]
    print(f"\nhashed / plain: samples/s {mh['samples_per_second'] / mp['samples_per_second']:.2f}, "
          f"peak RSS sum {sum(rh.values()) / sum(rp.values()):.2f}, "
          f"worker 0 peak RSS {rh['worker0'] / rp['worker0']:.2f}")
PY
