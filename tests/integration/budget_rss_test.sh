#!/usr/bin/env bash
# A job within a memory budget, measured from outside: the servers' VmRSS.
# tether-gen-xmc writes 10 training files whose vocabulary drifts (10 % of
# each later file's distinct ids are new); 2 tether-servers started by hand
# and one tether-worker under BSP stream them once with hashed features.
#   1. Uncapped: the peak table bytes of a shard (the largest sum of a
#      server's resident_bytes in the metrics JSON; tables only grow).
#   2. Empty tables: the same job with w1 admitting no key (admit_after:
#      65535), so that the servers serve the same requests while w1 holds no
#      row: a server's "empty" VmRSS is its peak VmRSS less the bytes its
#      tables still report (w1's admission sketch, w2, b1).
#   3. --server_memory at a quarter of (1), on the servers and the worker:
#      each server's VmRSS, read from /proc/PID/status every 0.2 s, stays at
#      most (budget + that server's empty VmRSS) × 1.05; each server's
#      reported resident bytes stay within the budget; the job exits 0; P@1
#      is within 1 point of the uncapped run's.
# The data make the budget tens of MB (~60,000 rows of w1 a shard
# uncapped). Prints every figure it checks.
# Usage: budget_rss_test.sh BIN_DIR   (run from the repository root)
source "$(dirname "$0")/lib.sh"
tether_test_init budget_rss "$1"
limit_s=240

timeout -k 5 120 "$bin/tether-gen-xmc" --feature_id_bits=64 --stream_files=10 --new_id_share=0.1 \
  --train_rows=60000 --test_rows=2000 --num_features=150000 --feature_exponent=0 --num_labels=100 \
  --out_prefix="$tmp/d" > "$tmp/gen.log" 2>&1 || fail "tether-gen-xmc: $(tail -2 "$tmp/gen.log")"

job() {  # job NAME [TABLE LINE]: writes $tmp/NAME.pbtxt
  cat > "$tmp/$1.pbtxt" <<PB
name: "budget_rss"
cluster { num_servers: 2 num_workers: 1 }
data {
  format: XMC
  train_file: "$tmp/d.train.*.txt"
  test_file: "$tmp/d.test.txt"
  index_base: 0
  hashed_features: true
  streaming: true
}
model { type: XMC_MLP hidden: 128 loss: SOFTMAX }
optimizer { type: ADAGRAD learning_rate: 0.1 }
consistency { staleness: 0 }
train { epochs: 1 minibatch_size: 64 seed: 1 }
${2:-}
PB
}

# run NAME [FLAGS...]: job NAME with FLAGS on every process; leaves
# $tmp/NAME.json (worker 0's metrics), $tmp/NAME.base (each server's VmRSS
# before its tables exist) and $tmp/NAME.peak (each server's largest VmRSS
# sampled), in bytes, servers in shard order.
run() {
  local name=$1 s
  shift
  flags=(--config="$tmp/$name.pbtxt" "$@")
  start_servers 2
  local inner_pids=()
  for s in 0 1; do inner_pids+=("$(inner "${server_pids[$s]}")"); done
  python3 - "${inner_pids[@]}" > "$tmp/$name.base" <<'PY' || fail "$name: no VmRSS of the idle servers"
import sys
print(" ".join(str(int(next(l for l in open(f"/proc/{p}/status") if l.startswith("VmRSS:")).split()[1]) * 1024)
               for p in sys.argv[1:]))
PY
  # The sampler ends when both servers have exited (a zombie has no VmRSS).
  timeout -k 5 "$limit_s" python3 - "${inner_pids[@]}" > "$tmp/$name.peak" <<'PY' &
import sys, time
pids = sys.argv[1:]
peak = {p: 0 for p in pids}
while True:
    alive = False
    for p in pids:
        try:
            for line in open(f"/proc/{p}/status"):
                if line.startswith("VmRSS:"):
                    peak[p] = max(peak[p], int(line.split()[1]) * 1024)
                    alive = True
        except OSError:
            pass
    if not alive:
        break
    time.sleep(0.2)
print(" ".join(str(peak[p]) for p in pids))
PY
  local sampler=$!
  pids+=("$sampler")
  start_worker 0 "$tmp/$name-worker0.log" --metrics_out="$tmp/$name.json"
  wait_zero "$name: the worker" "$started"
  wait_zero "$name: the servers" "${server_pids[@]}"
  wait_zero "$name: the VmRSS sampler" "$sampler"
  pids=()
}

job uncapped
run uncapped
job empty 'table { name: "w1" admit_after: 65535 }'
run empty
peak_table=$(python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
print(max(sum(s["resident_bytes"]) for s in m["servers"]))' "$tmp/uncapped.json")
budget=$((peak_table / 4))
job capped
run capped --server_memory="$budget"

python3 - "$tmp" "$budget" "$peak_table" <<'PY' || fail "the budgeted job's memory or P@1"
import json, sys
tmp, budget, peak_table = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
mb = lambda b: f"{b / 2**20:.1f} MiB"
runs = {n: json.load(open(f"{tmp}/{n}.json")) for n in ("uncapped", "empty", "capped")}
un, cap = runs["uncapped"], runs["capped"]
ok = True
print(f"uncapped: peak table bytes of a shard {mb(peak_table)}; budget (a quarter) {mb(budget)} ({budget} bytes)")
empty = []
for name in ("uncapped", "empty", "capped"):
    base = [int(x) for x in open(f"{tmp}/{name}.base").read().split()]
    peak = [int(x) for x in open(f"{tmp}/{name}.peak").read().split()]
    for s, srv in enumerate(runs[name]["servers"]):
        resident = sum(srv["resident_bytes"])
        line = (f"{name} server {s}: VmRSS idle {mb(base[s])}, peak {mb(peak[s])}; resident bytes {mb(resident)}, "
                f"w1 rows {srv['table_rows'][0]:,}, evicted {srv['rows_evicted'][0]:,}")
        if name == "empty":
            empty.append(peak[s] - resident)
            line += f"; empty VmRSS {mb(empty[s])}"
            if srv["table_rows"][0] != 0:
                line += "  <- w1 not empty"
                ok = False
        if name == "capped":
            bound = 1.05 * (budget + empty[s])
            line += f"; bound {mb(bound)}, margin {mb(bound - peak[s])}"
            if peak[s] > bound:
                line += "  <- VmRSS past the bound"
                ok = False
            if resident > budget:
                line += "  <- resident bytes past the budget"
                ok = False
            if srv["rows_evicted"][0] == 0:
                line += "  <- the budget never bound"
                ok = False
        print(line)
p_un, p_cap = un["precision_at_1"], cap["precision_at_1"]
print(f"P@1 uncapped {p_un:.4f}, capped {p_cap:.4f} (within 0.01)")
ok = ok and abs(p_un - p_cap) <= 0.01
sys.exit(0 if ok else 1)
PY
echo PASS
