#!/usr/bin/env bash
# Case C18 with real processes: 2 servers, 4 workers, staleness 3 on Bibtex.
# Worker 2 is stopped mid-run (SIGKILL, or SIGTERM for a graceful leave) and
# restarted with the same rank. Asserts: no process hangs; the servers remove
# the dead worker within cluster.worker_timeout_ms and log the surviving
# workers at most s + 1 clocks past its last clock; the restarted worker
# rejoins at the slowest live clock; every pull honoured the bound
# (bound_violations 0); the job finishes with metrics.
# Usage: c18_test.sh kill|term BIN_DIR
set -euo pipefail
# tmp, pids and their cleanup; start_servers, start_worker.
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"
limit_s=240
flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=2 --num_workers=4 --staleness=3 --epochs=10
       --worker_timeout_ms=1500 --minibatch_size=32 --request_timeout_ms=30000)
start_servers 2
start_worker 0 "$tmp/w0.log" --metrics_out="$tmp/m.json"; w0=$started
start_worker 1 "$tmp/w1.log"; w1=$started
start_worker 2 "$tmp/w2.log"; w2=$started
start_worker 3 "$tmp/w3.log"; w3=$started
# Stop worker 2 once it is into its second epoch.
wait_log "$tmp/w2.log" "epoch 1/" 600
# `timeout` runs the worker as its child: signal the worker itself.
victim=$(worker_pid "$w2")
if [ "$mode" = kill ]; then kill -9 "$victim"; else kill -TERM "$victim"; fi
wait "$w2" 2>/dev/null || true
echo "worker 2 stopped ($mode)"
# A killed worker is restarted once both servers' worker timeout (1.5 s) has
# removed it; a worker that left with BYE is gone once both logged it. Poll
# the servers' logs for that, with a bound, and restart at once: the
# survivors must still be training for the restart to rejoin (10 epochs
# leave them seconds of margin).
# (A SIGTERM that lands while the worker is blocked in a wait ends that wait
# and the worker still says BYE.)
if [ "$mode" = kill ]; then gone="worker 2 silent for"; else gone="worker 2 left"; fi
for s in 0 1; do wait_log "$tmp/server$s.log" "$gone" 400; done
start_worker 2 "$tmp/w2b.log"; w2b=$started
rc=0
for p in "$w0" "$w1" "$w3" "$w2b" "${pids[0]}" "${pids[1]}"; do wait "$p" || rc=$?; done
pids=()
cat "$tmp"/server*.log | grep -E "removed from the min clock|rejoined|left|done:" || true
[ "$rc" = 0 ] || { echo "FAIL: a process exited with $rc"; for f in "$tmp"/*.log; do echo "== $f"; tail -n 5 "$f"; done; exit 1; }
if [ "$mode" = kill ]; then
  line=$(grep -h "removed from the min clock" "$tmp"/server0.log | head -1)
  [ -n "$line" ] || { echo "FAIL: worker 2 was never removed"; exit 1; }
  last=$(echo "$line" | sed -E 's/.*at its clock ([0-9]+).*/\1/')
  others=$(echo "$line" | sed -E 's/.*slowest other worker at ([0-9]+).*/\1/')
  echo "dead worker's clock $last, slowest survivor $others"
  [ $((others - last)) -le 4 ] || { echo "FAIL: survivors ran $((others - last)) clocks past the dead worker (s + 1 = 4)"; exit 1; }
fi
grep -q "worker 2 rejoined at clock" "$tmp/server0.log" || { echo "FAIL: no rejoin logged"; exit 1; }
python3 - "$tmp/m.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
v = sum(s.get("bound_violations", 0) for s in m.get("servers", []))
print(f"P@1 {m['precision_at_1']:.4f}, bound violations {v}, servers reported {len(m.get('servers', []))}")
sys.exit(0 if v == 0 and len(m.get("servers", [])) == 2 else 1)
PY
