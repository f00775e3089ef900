#!/usr/bin/env bash
# tether-bench kv (the Tether side of scripts/bench_pslite.sh) against a
# separately started tether-server: for SGD and NOOP tables, and NOOP tables
# with --wire=bf16 (16-bit values both ways), one RESULT line
# per shape with the shape and the number of timed requests asked for, and
# the server counts exactly the pushes and rows sent (1 untimed + 2 timed
# per shape); a bad --optimizer or --wire is refused. With --replicas=0,1 (no
# --server: in-process shards, each with a copy on a ReplicaHost in the
# replicated variant), one table row per shape and variant, each with its
# reps and positive times; a bad variant or one server with a replica is
# refused. Functional only: no time is asserted. Usage: bench_kv_test.sh BIN_DIR
# Every process runs under `timeout` and is reaped; waits poll with a bound.
source "$(dirname "$0")/lib.sh"
tether_test_init kv "$1"
limit_s=120

cat > "$tmp/server.pbtxt" <<'CFG'
name: "tether-bench-kv"
cluster { num_servers: 1 num_workers: 1 startup_timeout_ms: 60000 }
consistency { model: ASP staleness: -1 cache: false }
CFG

for run in sgd noop noop:bf16; do
  optimizer=${run%%:*}
  wire=fp32
  [ "$run" != "$optimizer" ] && wire=${run#*:}
  timeout -k 5 "$limit_s" "$bin/tether-server" --config="$tmp/server.pbtxt" --port_file="$tmp/$optimizer.port" \
    2> "$tmp/$optimizer.server.log" &
  server=$!
  pids+=($server)
  wait_port "$tmp/$optimizer.port" "$server" || fail "$optimizer: tether-server did not start"
  timeout -k 5 "$limit_s" "$bin/tether-bench" kv --server="$(cat "$tmp/$optimizer.port")" --optimizer=$optimizer --wire=$wire \
    --shapes=1x1,1000x4,10x3 --min_reps=2 --max_reps=2 --min_time_s=0 > "$tmp/$optimizer.out" \
    2> "$tmp/$optimizer.bench.log" || fail "$optimizer: tether-bench kv failed: $(tail -3 "$tmp/$optimizer.bench.log")"
  wait "$server" || fail "$optimizer: tether-server exited non-zero: $(tail -3 "$tmp/$optimizer.server.log")"
  [ "$(head -n 1 "$tmp/$optimizer.out")" = READY ] || fail "$optimizer: no READY line first"
  got=$(awk '$1 == "RESULT" && $4 > 0 && $5 > 0 { print $2 "x" $3 "/" $6 }' "$tmp/$optimizer.out" | paste -sd,)
  [ "$got" = "1x1/2,1000x4/2,10x3/2" ] || fail "$optimizer: RESULT lines '$got', expected 1x1/2,1000x4/2,10x3/2"
  # 3 shapes × (1 untimed + 2 timed) = 9 pushes and 9 pulls; 3 × 1,011 rows each way.
  grep -q "done: 9 pulls (3033 rows, 0 waited on the bound), 9 pushes (3033 rows, 3033 updates applied)" \
    "$tmp/$optimizer.server.log" || fail "$optimizer: server counts: $(grep 'done:' "$tmp/$optimizer.server.log")"
  echo "$optimizer ($wire): $got; server: 9 pulls, 9 pushes, 3033 rows each way"
  rm -f "$tmp/$optimizer.port"
done

timeout -k 5 "$limit_s" "$bin/tether-bench" kv --replicas=0,1 --servers=2,3 --shapes=1x1,1000x4 --min_reps=2 \
  --max_reps=2 --min_time_s=0 > "$tmp/replicated.out" 2> "$tmp/replicated.log" ||
  fail "replicated: tether-bench kv --replicas failed: $(tail -3 "$tmp/replicated.log")"
# | servers | keys | dim | replicas | reps | push p50 ms | push GB/s | push × | pull p50 ms | ...
got=$(awk -F' *\\| *' '$2 ~ /^[0-9]+$/ && $7 > 0 && $10 > 0 { print $2 ":" $3 "x" $4 "/" $5 "/" $6 }' \
  "$tmp/replicated.out" | paste -sd,)
want=2:1x1/0/2,2:1x1/1/2,2:1000x4/0/2,2:1000x4/1/2,3:1x1/0/2,3:1x1/1/2,3:1000x4/0/2,3:1000x4/1/2
[ "$got" = "$want" ] || fail "replicated: rows '$got', expected $want: $(cat "$tmp/replicated.out")"
echo "replicated: $got"
if timeout 60 "$bin/tether-bench" kv --replicas=0,2 --shapes=1x1 2> "$tmp/bad.log"; then
  fail "--replicas=0,2 was accepted"
fi
grep -q "each variant is 0 or 1" "$tmp/bad.log" || fail "bad replicas message: $(cat "$tmp/bad.log")"
if timeout 60 "$bin/tether-bench" kv --replicas=1 --servers=1 --shapes=1x1 2> "$tmp/bad.log"; then
  fail "--replicas=1 --servers=1 was accepted"
fi
grep -q "a replica needs at least 2 servers" "$tmp/bad.log" || fail "one-server message: $(cat "$tmp/bad.log")"

if timeout 60 "$bin/tether-bench" kv --server=tcp://127.0.0.1:1 --optimizer=adam 2> "$tmp/bad.log"; then
  fail "--optimizer=adam was accepted"
fi
grep -q "unknown --optimizer=adam (sgd, noop)" "$tmp/bad.log" || fail "bad optimizer message: $(cat "$tmp/bad.log")"
if timeout 60 "$bin/tether-bench" kv --server=tcp://127.0.0.1:1 --wire=int8 2> "$tmp/bad.log"; then
  fail "--wire=int8 was accepted"
fi
grep -q "unknown --wire=int8 (fp32, bf16, fp16)" "$tmp/bad.log" || fail "bad wire message: $(cat "$tmp/bad.log")"
echo PASS
