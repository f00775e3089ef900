#!/usr/bin/env bash
# Counts, sizes and durations past their bounds, and a budgeted table's
# evaluation (docs/ERRORS.md, docs/MEMORY.md). Usage: bounds_test.sh MODE BIN_DIR
#   refusals     refused at start with exit 2, naming the field and the
#                limit, within 20 s each: tether-server --num_workers=2^31-1,
#                --num_workers=10^8, --num_servers=10^5 and
#                --startup_timeout_ms=-5; tether-launch --workers=100000, a
#                config file with cluster.num_workers: 100000 (its line
#                named), --minibatch_size=2^31-1 (no overflowed b_max) and
#                --workers=2000, past the 1024 processes one launcher
#                starts, before anything starts.
#   spawn_stop   tether-launch copied beside a stand-in tether-server (it
#                writes its port file and sleeps) and tether-worker (a
#                sleep), --workers=1000: SIGTERM once 20 workers run ends
#                the start within a spawn: exit 143 within 3 s, the log
#                naming the worker it was starting (below 1000) and as many
#                started, every child reaped.
#   eval_budget  examples/bibtex.pbtxt with max_rows: 860 evict: LRU on w1
#                (an evaluation minibatch reads more of w1's rows on a shard
#                than 860), 1 epoch through tether-launch: exit 0, the
#                metrics JSON written with a P@1 and every shard's w1 rows
#                at most 860, rows evicted.
# No fixed sleeps wait for an event: every wait polls with a bound.
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"

# refused WHAT EXPECTED COMMAND...: COMMAND (bounded by 20 s) exits 2 and
# its output holds EXPECTED.
refused() {
  local what=$1 expected=$2 rc=0
  shift 2
  timeout -k 5 20 "$@" > "$tmp/refused.log" 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "$what: exit $rc, expected 2"
  grep -qF -- "$expected" "$tmp/refused.log" || fail "$what: no '$expected' in its output"
  echo "ok: $what refused (exit 2)"
}

server=("$bin/tether-server" --config=examples/bibtex.pbtxt --shard=0 --listen=tcp://127.0.0.1:0)
launch=("$bin/tether-launch" --config=examples/bibtex.pbtxt)

case "$mode" in
  refusals)
    refused "--num_workers=2147483647" \
      "config field cluster.num_workers: is 2147483647, above the limit 65536 (every shard keeps a clock and a slot per worker rank) (set by flag --num_workers=2147483647)" \
      "${server[@]}" --startup_timeout_ms=3000 --num_workers=2147483647
    refused "--num_workers=100000000" "config field cluster.num_workers: is 100000000, above the limit 65536" \
      "${server[@]}" --num_workers=100000000
    refused "--num_servers=100000" "config field cluster.num_servers: is 100000, above the limit 65536" \
      "${server[@]}" --num_servers=100000
    refused "--startup_timeout_ms=-5" \
      "config field cluster.startup_timeout_ms: must be ≥ 1 ms, got -5 (set by flag --startup_timeout_ms=-5)" \
      "${server[@]}" --startup_timeout_ms=-5
    refused "tether-launch --workers=100000" "config field cluster.num_workers: is 100000, above the limit 65536" \
      "${launch[@]}" --workers=100000
    sed -e 's/num_workers: 2/num_workers: 100000/' -e "s|\"\.\./data/|\"$PWD/data/|" examples/bibtex.pbtxt \
      > "$tmp/many.pbtxt"
    line=$(grep -n 'num_workers: 100000' "$tmp/many.pbtxt" | cut -d: -f1)
    refused "cluster.num_workers: 100000 in the file" \
      "many.pbtxt:$line: config field cluster.num_workers: is 100000, above the limit 65536" \
      "$bin/tether-launch" --config="$tmp/many.pbtxt"
    refused "--minibatch_size=2147483647" \
      "config field train.minibatch_size: is 2147483647, above the limit 16777216 (rows per minibatch) (set by flag --minibatch_size=2147483647)" \
      "${launch[@]}" --minibatch_size=2147483647
    grep -q "b_max" "$tmp/refused.log" && fail "--minibatch_size=2147483647 named b_max"
    refused "tether-launch --workers=2000" \
      "tether-launch would start 2 server(s) and 2000 worker(s): 2002 processes on this host, above the 1024 one launcher starts" \
      "${launch[@]}" --workers=2000
    grep -q "worker(s), timeout" "$tmp/refused.log" && fail "--workers=2000 started the job"
    ;;
  spawn_stop)
    # Stand-in servers and workers that run until the launcher stops them
    # (`exec sleep 60` is no wait for an event: 60 s only bounds one left
    # behind); the test waits on the launcher's children by polling.
    mkdir "$tmp/bin"
    cp "$bin/tether-launch" "$tmp/bin/"
    cat > "$tmp/bin/tether-server" <<'SH'
#!/bin/sh
for a in "$@"; do
  case $a in --port_file=*) f=${a#--port_file=}; echo tcp://127.0.0.1:9 > "$f.tmp" && mv "$f.tmp" "$f" ;; esac
done
exec sleep 60
SH
    printf '#!/bin/sh\nexec sleep 60\n' > "$tmp/bin/tether-worker"
    chmod +x "$tmp/bin/tether-server" "$tmp/bin/tether-worker"
    timeout -k 5 60 "$tmp/bin/tether-launch" --config=examples/bibtex.pbtxt --servers=1 --workers=1000 \
      > "$tmp/launch.log" 2>&1 &
    launcher=$!
    pids+=($launcher)
    wait_until 10 "tether-launch under timeout" pgrep -P "$launcher" > /dev/null || fail "no tether-launch"
    lpid=$(inner "$launcher")
    twenty_children() { [ "$(pgrep -P "$lpid" | wc -l)" -ge 20 ]; }
    wait_until 30 "20 child processes of tether-launch" twenty_children || fail "the launch did not start"
    t0=$(now_ms)
    kill -TERM "$lpid"
    exits_within "$launcher" 3000 || fail "tether-launch still ran 3 s after SIGTERM"
    wait_code "$launcher"
    echo "tether-launch exited $rc $(($(now_ms) - t0)) ms after SIGTERM"
    [ "$rc" = 143 ] || fail "tether-launch exited $rc after SIGTERM, expected 143"
    grep -q "interrupted by Terminated while starting worker" "$tmp/launch.log" ||
      fail "the launcher did not stop while starting its workers"
    at=$(grep -o "while starting worker [0-9]*" "$tmp/launch.log" | head -1 | awk '{print $4}')
    [ "$at" -lt 1000 ] || fail "stopped at worker $at"
    echo "stopped before starting worker $at of 1000"
    started=$(grep -c "\[launch\] started worker" "$tmp/launch.log")
    [ "$started" = "$at" ] || fail "$started workers started, but the launcher stopped before worker $at"
    launched_children_reaped "$tmp/launch.log"
    ;;
  eval_budget)
    sed -e "s|\"\.\./data/|\"$PWD/data/|" \
      -e 's|^  consistency { cache: false }$|  consistency { cache: false }\n  max_rows: 860 evict: LRU|' \
      examples/bibtex.pbtxt > "$tmp/budget.pbtxt"
    grep -q "max_rows: 860 evict: LRU" "$tmp/budget.pbtxt" || fail "the budget was not added to w1"
    rc=0
    timeout -k 5 240 "$bin/tether-launch" --config="$tmp/budget.pbtxt" --epochs=1 --metrics_out="$tmp/b.json" \
      > "$tmp/launch.log" 2>&1 || rc=$?
    [ "$rc" = 0 ] || fail "the budgeted job exited $rc"
    [ -s "$tmp/b.json" ] || fail "no metrics JSON"
    python3 - "$tmp/b.json" <<'PY' || fail "metrics"
import json, sys
m = json.load(open(sys.argv[1]))
p1 = m["precision_at_1"]
assert 0.1 < p1 <= 1.0 and m["test_rows"] == 2515, f"P@1 {p1} over {m['test_rows']} rows"
rows = [s["table_rows"][0] for s in m["servers"]]  # w1 is table 0
evicted = [s["rows_evicted"][0] for s in m["servers"]]
assert len(rows) == 2 and max(rows) <= 860, f"w1 rows {rows}"
assert sum(evicted) > 0, f"w1 rows evicted {evicted}"
print(f"P@1 = {p1:.4f}, w1 rows on the shards {rows}, evicted {evicted}")
PY
    ;;
  *) fail "unknown mode $mode" ;;
esac
echo PASS
