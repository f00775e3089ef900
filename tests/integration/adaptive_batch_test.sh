#!/usr/bin/env bash
# Adaptive batch sizes (train.adaptive_batch) with real
# processes started one by one: 2 servers and 2 workers on Bibtex, s = 2,
# worker 1 slowed 2x (--slowdown). Asserts: every process exits 0; shard 0
# moved the sizes apart (the slow worker's final and smallest size below the
# fast worker's, the fast one above train.minibatch_size at some point, both
# within the bounds); the per-clock metrics log carries the sizes; every
# minibatch is counted (samples = sum of the clock log's rows); no pull
# broke the bound; and the job's accuracy gate holds (P@1 >= 0.55).
# Mode on_demand adds --data_on_demand: the rows are dealt in chunks by
# shard 0, so the fast worker also trains on more rows than the slow one,
# and every row is used once per epoch (the rows sum to 7 x 4880).
# Usage: adaptive_batch_test.sh static|on_demand BIN_DIR
set -euo pipefail
# tmp, pids and their cleanup; start_servers.
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"
limit_s=120
flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=2 --num_workers=2 --staleness=2 --slowdown=2
       --slowdown_rank=1 --adaptive_batch=true --adaptive_batch_min=16 --adaptive_batch_max=160
       --adaptive_batch_step=server_weight --metrics_dir="$tmp/jsonl" --request_timeout_ms=30000)
[ "$mode" = on_demand ] && flags+=(--data_on_demand=true --chunk_rows=320)
start_servers 2
for r in 0 1; do
  extra=()
  [ "$r" = 0 ] && extra=(--metrics_out="$tmp/m.json")
  timeout -k 5 120 "$bin/tether-worker" "${flags[@]}" --rank=$r --server_addresses="$addrs" "${extra[@]}" \
    > "$tmp/w$r.log" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
pids=()
[ "$rc" = 0 ] || { echo "FAIL: a process exited with $rc"; for f in "$tmp"/*.log; do echo "== $f"; tail -n 8 "$f"; done; exit 1; }
grep -h "adaptive batch sizes in \[16, 160\], mean 64" "$tmp/server0.log" \
  || { echo "FAIL: shard 0 never set up the controller"; exit 1; }
grep -h "epoch 7/7" "$tmp"/w*.log || true
python3 - "$tmp/m.json" "$tmp/jsonl" "$mode" <<'PY'
import json, os, sys
m = json.load(open(sys.argv[1]))
w = {x["rank"]: x for x in m["workers"]}
for r in (0, 1):
    print(f"worker {r}: batch final {w[r]['batch_size_final']} mean {w[r]['batch_size_mean']:.1f} "
          f"min {w[r]['batch_size_min']} max {w[r]['batch_size_max']} minibatches {w[r]['minibatches']} "
          f"samples {w[r]['samples']}")
print(f"P@1 {m['precision_at_1']:.4f}, bound violations {m['bound_violations']}")
fail = []
if not w[1]["batch_size_final"] < w[0]["batch_size_final"]:
    fail.append("the slow worker's final size is not below the fast worker's")
if not w[1]["batch_size_min"] < w[0]["batch_size_min"]:
    fail.append("the slow worker's smallest size is not below the fast worker's")
if not w[0]["batch_size_max"] > 64:
    fail.append("the fast worker never trained above minibatch_size 64")
for r in (0, 1):
    if not (16 <= w[r]["batch_size_min"] <= w[r]["batch_size_max"] <= 160):
        fail.append(f"worker {r}'s sizes leave [16, 160]")
    rows = clocks = 0
    sizes = set()
    prev = 0
    for line in open(os.path.join(sys.argv[2], f"worker-{r}.jsonl")):
        j = json.loads(line)
        if j["kind"] != "clock":
            continue
        sizes.add(j["batch_size"])
        clocks += 1
        if j["minibatches"] != clocks:  # one minibatch per clock (bibtex.pbtxt)
            fail.append(f"worker {r}: clock {j['clock']} logs {j['minibatches']} minibatches")
            break
    if len(sizes) < 2:
        fail.append(f"worker {r}'s clock log shows one size only: {sorted(sizes)}")
    if clocks != w[r]["minibatches"]:
        fail.append(f"worker {r}: {clocks} clock lines for {w[r]['minibatches']} minibatches")
if m["bound_violations"] != 0:
    fail.append(f"bound_violations {m['bound_violations']}")
if sys.argv[3] == "on_demand" and not w[0]["samples"] > w[1]["samples"]:
    fail.append("on demand, the fast worker did not train on more rows than the slow one")
if sys.argv[3] == "on_demand" and [a + b for a, b in zip(w[0]["epoch_rows"], w[1]["epoch_rows"])] != [4880] * 7:
    fail.append(f"epoch rows {w[0]['epoch_rows']} + {w[1]['epoch_rows']} are not 4880 each")
if m["total_samples"] != 7 * 4880:
    fail.append(f"total_samples {m['total_samples']} != 7 x 4880")
if not m["precision_at_1"] >= 0.55:
    fail.append(f"P@1 {m['precision_at_1']} < 0.55")
if fail:
    print("FAIL: " + "; ".join(fail))
    sys.exit(1)
print("PASS")
PY
