#!/usr/bin/env bash
# A worker restarted by hand in a running job, without a checkpoint, with
# the static split: its share of the data continues where the dead process
# stopped instead of starting again at epoch 1 (and so nothing is trained
# twice, and the rows it trains are counted exactly).
# 1 server, 2 workers, Bibtex (4,880 training rows: 2,440 per worker, 39
# minibatches of 64 an epoch), 6 epochs, ASP. Worker 1 is SIGKILLed once it
# is into epoch 3, restarted with the same rank once the server removed it.
# Asserts: the server's "rejoined at clock S (was at Y)"; the restarted
# worker's "reached clock Y (M minibatches of 64 rows) ... continues at
# epoch E, row R" with M = Y, E = M div 39, R = (M mod 39) × 64; the rows
# the new process trained = 6 × 2,440 − (E × 2,440 + R), from its last
# epoch line; the job exits 0 with P@1 ≥ 0.5.
# Usage: restart_share_test.sh static BIN_DIR
set -euo pipefail
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"
limit_s=120
flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=1 --num_workers=2 --staleness=-1 --epochs=6
       --worker_timeout_ms=1500 --request_timeout_ms=30000)
start_servers 1
# Worker 0 at a tenth of its speed trains its 6 epochs in about 6 s (idle
# machine), twice the 3 s worker 1 takes to be killed, removed (1.5 s) and
# back; a slower machine slows both.
start_worker 0 "$tmp/w0.log" --metrics_out="$tmp/m.json" --slowdown_rank=0 --slowdown=10; w0=$started
start_worker 1 "$tmp/w1.log"; w1=$started
poll 1200 grep -q "epoch 2/6" "$tmp/w1.log" || fail "worker 1 never finished epoch 2"
kill -9 "$(worker_pid "$w1")"
wait "$w1" 2>/dev/null || true
poll 400 grep -q "worker 1 silent for" "$tmp/server0.log" || fail "the server never removed worker 1"
grep -q "epoch 6/6" "$tmp/w0.log" && fail "worker 0 finished before worker 1 could rejoin"
start_worker 1 "$tmp/w1b.log"; w1b=$started
rc=0
for p in "$w0" "$w1b" "${server_pids[0]}"; do wait "$p" || rc=$?; done
pids=()
[ "$rc" = 0 ] || fail "a process exited with $rc"
line=$(grep -h "rejoined at clock" "$tmp/server0.log" | head -1)
[ -n "$line" ] || fail "no rejoin logged"
was=$(echo "$line" | sed -E 's/.*\(was at ([0-9]+).*/\1/')
said=$(grep -h "its previous process reached clock" "$tmp/w1b.log" | head -1)
[ -n "$said" ] || fail "the restarted worker did not say where its share continues"
echo "server: $line"
echo "worker: ${said#*] }"
python3 - "$was" "$said" "$tmp/w1b.log" "$tmp/m.json" <<'PY'
import json, re, sys
was, said, log, mfile = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
m = re.search(r"reached clock (\d+) \((\d+) minibatches of (\d+) rows\), so its share continues at epoch (\d+), row (\d+) of (\d+)", said)
assert m, f"unexpected line: {said}"
clock, mb, bs, epoch1, row, rows = map(int, m.groups())
per_epoch = (rows + bs - 1) // bs
ok = True
def check(name, got, want):
    global ok
    print(f"{name}: {got} (want {want})")
    ok &= got == want
check("clock told by the server", clock, was)
check("rows in the share", rows, 2440)
check("minibatches", mb, clock)
check("epoch it continues at", epoch1 - 1, mb // per_epoch)
check("row it continues at", row, (mb % per_epoch) * bs)
lines = [l for l in open(log) if re.search(r"epoch \d+/6 clock", l)]
assert lines, "no epoch line from the restarted worker"
first = int(re.search(r"epoch (\d+)/6", lines[0]).group(1))
check("first epoch the restarted worker ended", first, epoch1)
# Samples the new process trained: its final line's figure is
# samples/s × seconds; the exact count comes from the metrics.
mj = json.load(open(mfile))
workers = {w["rank"]: w for w in mj.get("workers", [])}
trained = workers[1]["samples"] if 1 in workers else None
check("rows the restarted worker trained", trained, 6 * rows - ((epoch1 - 1) * rows + row))
# The job's count keeps the killed process's rows: both shares, six epochs.
check("rows the job trained (total_samples)", mj["total_samples"], 2 * 6 * rows)
print(f"P@1 {mj['precision_at_1']:.4f}")
ok &= mj["precision_at_1"] >= 0.5
sys.exit(0 if ok else 1)
PY
