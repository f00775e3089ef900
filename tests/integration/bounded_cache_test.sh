#!/usr/bin/env bash
# Bounded worker memory. Usage: bounded_cache_test.sh MODE BIN_DIR
#   bibtex  Bibtex, 2 servers + 2 workers started by hand, each worker's cache
#           capped at 10% of the model (--cache_capacity=10%), the input layer
#           cached too so that rows compete for the room: P@1 >= 0.58, and the
#           metrics JSON reports for every worker evictions > 0, a hit rate
#           > 0, and peak cache bytes <= the capacity (= 10% of the model's
#           bytes, exactly).
#   fit     a job that cannot fit fails at start-up naming the sizes: a
#           worker whose cache and dense tables exceed --memory_limit (before
#           it reads data or connects), and a server shard whose tables do (it refuses
#           worker 0's HELLO and exits 1; the worker exits 1 too).
#   bomb    a gzip bomb as data.train_file (64 MiB of XMC rows in about
#           100 KiB) with --memory_limit=16MiB: the worker refuses it as bad
#           input (exit 6, which tether-launch never restarts), naming the
#           file, the budget and its source, before it inflates more than
#           the budget or connects.
# Every process is started under `timeout` and killed on exit.
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"
limit_s=120

# The example with absolute data paths and the input layer cached.
sed -e "s#\"\.\./\.\./data/#\"$PWD/data/#" -e 's/consistency { cache: false }/consistency { cache: true }/' \
  tests/data/bibtex_fixed.pbtxt > "$tmp/bibtex.pbtxt"
grep -q "consistency { cache: true }" "$tmp/bibtex.pbtxt" || { echo "FAIL: the example changed: no w1 cache line"; exit 1; }

flags=(--config="$tmp/bibtex.pbtxt")

case "$mode" in
bibtex)
  start_servers 2
  timeout -k 5 120 "$bin/tether-worker" --config="$tmp/bibtex.pbtxt" --rank=1 --server_addresses="$addrs" \
    --cache_capacity=10% > "$tmp/worker1.log" 2>&1 &
  w1=$!; pids+=($w1)
  timeout -k 5 120 "$bin/tether-worker" --config="$tmp/bibtex.pbtxt" --rank=0 --server_addresses="$addrs" \
    --cache_capacity=10% --metrics_out="$tmp/m.json" > "$tmp/worker0.log" 2>&1 ||
    { echo "FAIL: worker 0"; tail -20 "$tmp/worker0.log"; exit 1; }
  wait "$w1" || { echo "FAIL: worker 1"; tail -20 "$tmp/worker1.log"; exit 1; }
  for p in "${pids[@]}"; do wait "$p"; done
  pids=()
  python3 - "$tmp/m.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
# The model: w1 1836 x 256, b1 256, w2 159 x 257 (weights and bias) floats.
model_bytes = (1836 * 256 + 256 + 159 * 257) * 4
capacity = model_bytes // 10
ok = True
def check(cond, what):
    global ok
    print(("ok   " if cond else "FAIL ") + what)
    ok = ok and cond
p1 = m["precision_at_1"]
# One run, so the gate sits well below the run-to-run spread: 8 runs of
# `ctest -R 'integration.bounded_cache_bibtex$' -V` gave 0.612-0.620, and the
# same job without a cache bound (`tether-launch --config
# tests/data/bibtex_fixed.pbtxt`, 8 runs) 0.608-0.622; an untrained model is near 0.
check(p1 >= 0.58, f"P@1 = {p1:.4f} (gate >= 0.58) with each worker's cache at 10% of the model")
check(len(m["workers"]) == 2, "two workers in the metrics")
for w in m["workers"]:
    r = w["rank"]
    check(w["cache_capacity_bytes"] == capacity, f"worker {r}: capacity {w['cache_capacity_bytes']} = 10% of {model_bytes} bytes")
    check(w["cache_evictions"] > 0, f"worker {r}: {w['cache_evictions']} evictions > 0")
    check(w["cache_hit_rate"] > 0, f"worker {r}: hit rate {w['cache_hit_rate']:.4f} > 0")
    check(abs(w["cache_hit_rate"] - w["cache_hits"] / w["rows_read"]) < 1e-12, f"worker {r}: hit rate = cache_hits / rows_read")
    check(0 < w["cache_peak_bytes"] <= w["cache_capacity_bytes"],
          f"worker {r}: peak cache bytes {w['cache_peak_bytes']} <= capacity {w['cache_capacity_bytes']}")
sys.exit(0 if ok else 1)
PY
  grep -q "parameter cache capacity 199.7 KiB (204454 bytes)" "$tmp/worker0.log" ||
    { echo "FAIL: worker 0 did not log its cache capacity"; grep -i cache "$tmp/worker0.log" | head; exit 1; }
  ;;
fit)
  # Worker: an unbounded cache of this model (w1, b1 and w2 at full size,
  # 128 bytes of bookkeeping per entry: 1836 x 1152 + 1152 + 159 x 1156)
  # and the dense table b1 (1024 bytes) need 2301052 bytes; 1 MiB is
  # refused before any data is read or connection made.
  rc=0
  out=$(timeout -k 5 30 "$bin/tether-worker" --config="$tmp/bibtex.pbtxt" --rank=0 \
    --server_addresses=tcp://127.0.0.1:9,tcp://127.0.0.1:10 --memory_limit=1MiB 2>&1) || rc=$?
  [ "$rc" = 1 ] || { echo "FAIL: worker exit $rc (expected 1): $out"; exit 1; }
  grep -qF "worker 0 does not fit in memory: it needs 2.2 MiB (2301052 bytes) = parameter cache 2.2 MiB (2300028 bytes) (unbounded: every row of its cached tables; consistency.cache_capacity_bytes is 0) + dense tables 1.0 KiB (1024 bytes) (b1 1024), but 1.0 MiB (1048576 bytes) are available (consistency.memory_limit_bytes (--memory_limit))" <<< "$out" ||
    { echo "FAIL: message was: $out"; exit 1; }
  if grep -q "connected to\|HELLO\|training rows" <<< "$out"; then
    echo "FAIL: read data or connected before refusing: $out"; exit 1; fi
  # ... and a capacity that fits makes the same worker pass the check (it
  # then fails to reach the servers that are not there, which is another
  # error).
  out=$(timeout -k 5 30 "$bin/tether-worker" --config="$tmp/bibtex.pbtxt" --rank=0 \
    --server_addresses=tcp://127.0.0.1:9,tcp://127.0.0.1:10 --memory_limit=1MiB --cache_capacity=512KiB \
    --request_timeout_ms=1000 --startup_timeout_ms=1000 2>&1) || true
  if grep -q "does not fit" <<< "$out"; then echo "FAIL: a 512KiB cache within 1MiB refused: $out"; exit 1; fi
  grep -qF "parameter cache capacity 512.0 KiB (524288 bytes)" <<< "$out" || { echo "FAIL: $out"; exit 1; }
  # Server: shard 0 of 2 holds 918 rows of w1 (256 weights + 513 Adam
  # floats + 32 bytes of index: 3108 bytes each), 128 floats of b1 with
  # their state, and 80 rows of w2 (3120 bytes each): 3.0 MiB, over a 2 MiB
  # limit. It refuses worker 0's HELLO
  # and exits 1; the worker exits 1 with the server's message.
  start_servers 2 --memory_limit=2MiB
  rc=0
  out=$(timeout -k 5 60 "$bin/tether-worker" --config="$tmp/bibtex.pbtxt" --rank=0 --server_addresses="$addrs" 2>&1) || rc=$?
  [ "$rc" = 1 ] || { echo "FAIL: worker exit $rc (expected 1): $out"; exit 1; }
  want="does not fit in memory: the job's tables need"
  grep -qF "$want" <<< "$out" || { echo "FAIL: worker message was: $out"; exit 1; }
  for s in 0 1; do
    wait_code "${server_pids[$s]}"
    [ "$rc" = 1 ] || fail "server $s exit $rc (expected 1)"
  done
  pids=()
  grep -qF "server shard 0 of 2 does not fit in memory: the job's tables need 3.0 MiB (3104284 bytes) on this shard (weights, optimizer state and row index, in bytes: w1 918 rows 2853144, b1 1540, w2 80 rows 249600), but 2.0 MiB (2097152 bytes) are available (consistency.memory_limit_bytes (--memory_limit))" "$tmp/server0.log" ||
    { echo "FAIL: server 0 log:"; cat "$tmp/server0.log"; exit 1; }
  echo "tables and caches that cannot fit fail at start-up, naming the sizes"
  ;;
bomb)
  bomb="$tmp/bomb.txt.gz"
  python3 - "$bomb" <<'PY'
import gzip, sys
rows = 64 * 1024 * 1024 // 6
open(sys.argv[1], "wb").write(gzip.compress(b"%d 1836 159\n" % rows + b"0 0:1\n" * rows, 9))
PY
  sed -e "s#train_file: \".*\"#train_file: \"$bomb\"#" "$tmp/bibtex.pbtxt" > "$tmp/bomb.pbtxt"
  rc=0
  out=$(timeout -k 5 30 "$bin/tether-worker" --config="$tmp/bomb.pbtxt" --rank=0 \
    --server_addresses=tcp://127.0.0.1:9,tcp://127.0.0.1:10 --memory_limit=16MiB --cache_capacity=1MiB \
    --request_timeout_ms=1000 --startup_timeout_ms=1000 2>&1) || rc=$?
  [ "$rc" = 6 ] || { echo "FAIL: worker exit $rc (expected 6): $out"; exit 1; }
  grep -qF "data file $bomb: inflates to more than 16.0 MiB (16777216 bytes), the memory this process may count on (consistency.memory_limit_bytes (--memory_limit)); give it more memory (--memory_limit) or split the file (docs/DATA.md)" <<< "$out" ||
    { echo "FAIL: message was: $out"; exit 1; }
  if grep -q "connected to\|HELLO\|training rows" <<< "$out"; then echo "FAIL: read or connected past the refusal: $out"; exit 1; fi
  echo "a gzip bomb is refused as bad input (exit 6), naming the file and the budget"
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
