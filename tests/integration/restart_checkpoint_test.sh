#!/usr/bin/env bash
# A worker restarted by hand while a checkpoint round waits on it: the new
# process starts at or past the round's clock and never sends its state for
# it, so the servers abandon that round (no MANIFEST, never resumed from),
# release the workers waiting at it, and training goes on; later
# checkpoints are complete.
# 2 servers, 2 workers, Bibtex, 1 epoch, checkpoints every 4 clocks, worker
# 1 slowed. As soon as worker 0 wrote its state for clock 4, worker 1 is
# SIGKILLed and started again at once with the same flags, but for
# --slowdown_rank=0 (the new process trains at full speed: the slowdown
# only had to hold the first one back at the round).
# Asserts: every process exits 0 (well before request_timeout_ms);
# both servers and worker 0 log "checkpoint at clock 4 abandoned: worker 1
# was restarted"; worker 0 wrote no MANIFEST at clock 4 and did at clock 8
# (a later checkpoint works); the new process continues at minibatch Y,
# the clock the killed one reached (the servers' "rejoined at clock C (was
# at Y)" and its own log agree), so it ends at clock C + 39 − Y (a share of
# 2,440 rows is 39 minibatches of 64) and the final checkpoint is at the
# later of that and worker 0's clock 39; the job's samples are exactly
# 2 × 2,440 (the killed process's minibatches count, the new one trains
# the rest of its share). Y depends on when the kill lands (1 or 2 as a
# rule): the expectations are derived from it, not fixed.
# Usage: restart_checkpoint_test.sh abandon BIN_DIR
set -euo pipefail
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"
limit_s=60
ck="$tmp/ck"
# Worker 1 50x slower: held back at the round of clock 4 (worker 0 runs at
# most staleness 2 clocks ahead), and killed well before it could reach
# clock 4 itself, which takes three more of its minibatches.
flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=2 --num_workers=2 --epochs=1
       --checkpoint_dir="$ck" --checkpoint_every_clocks=4 --slowdown=50 --slowdown_rank=1
       --request_timeout_ms=40000)
start_servers 2
start_worker 0 "$tmp/w0.log"; w0=$started
start_worker 1 "$tmp/w1.log"; w1=$started
poll 600 test -e "$ck/ckpt-000000000004/worker-0.state" || fail "worker 0 never wrote its state for clock 4"
kill -9 "$(worker_pid "$w1")"
wait "$w1" 2>/dev/null || true
start_worker 1 "$tmp/w1b.log" --slowdown_rank=0; w1b=$started
rc=0
for p in "$w0" "$w1b" "${server_pids[@]}"; do wait "$p" || { rc=$?; echo "pid $p exited $rc"; }; done
pids=()
grep -h -E "rejoined|abandoned" "$tmp"/server*.log "$tmp/w0.log" | sed 's/^.*\] //' || true
[ "$rc" = 0 ] || fail "a process exited with $rc"
for s in 0 1; do
  grep -q "checkpoint at clock 4 abandoned: worker 1 was restarted before it wrote its state" "$tmp/server$s.log" \
    || fail "server $s did not abandon the checkpoint at clock 4"
done
grep -q "checkpoint at clock 4 abandoned" "$tmp/w0.log" || fail "worker 0 did not say the checkpoint was abandoned"
grep -q "checkpoint at clock 4 written" "$tmp/w0.log" && fail "worker 0 wrote a MANIFEST for the abandoned checkpoint"
grep -q "checkpoint at clock 8 written" "$tmp/w0.log" || fail "the checkpoint at clock 8 after the abandoned one was not written"
# (checkpoint.keep_last prunes ckpt-4 and ckpt-8 by the end.)
rejoin=$(sed -nE 's/.*worker 1 rejoined at clock ([0-9]+) \(was at ([0-9]+)\).*/\1 \2/p' "$tmp/server0.log" | head -1)
[ -n "$rejoin" ] || fail "no rejoin logged"
read -r at was <<< "$rejoin"
grep -q "its previous process reached clock $was ($was minibatches of 64 rows)" "$tmp/w1b.log" \
  || fail "the new worker 1 did not continue at minibatch $was: $(grep -h 'previous process' "$tmp/w1b.log")"
final=$((at + 39 - was))
[ "$final" -ge 39 ] || final=39
final_dir=$(printf '%s/ckpt-%012d-final' "$ck" "$final")
[ -e "$final_dir/MANIFEST" ] || fail "no complete final checkpoint at clock $final (rejoined at $at, was at $was): $(ls "$ck")"
echo "worker 1 killed at clock $was, rejoined at clock $at, final checkpoint at clock $final"
# Samples: both shares (2,440 rows each) once: the killed process's rows
# up to the clock it reached (64 each) count, and the new process trains
# its share from there.
want=$((2440 + 2440))
grep -q "training done: $want samples over all workers" "$tmp/w0.log" \
  || fail "samples: want $want, got: $(grep -h 'training done' "$tmp/w0.log")"
echo "PASS"
