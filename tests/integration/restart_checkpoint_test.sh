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
# (a later checkpoint works) and the final one; the job's samples are
# exactly 2,440 (worker 0) + 2,440 − 64 × Y (the new process continues at
# minibatch Y, the clock the killed one reached).
# Usage: restart_checkpoint_test.sh abandon BIN_DIR
set -euo pipefail
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"
limit_s=60
ck="$tmp/ck"
# Worker 1 100x slower: the kill lands before its second minibatch ends
# (at 40x it sometimes did not), so it reached clock 1, the new process
# continues from there and the final checkpoint is at clock 42.
flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=2 --num_workers=2 --epochs=1
       --checkpoint_dir="$ck" --checkpoint_every_clocks=4 --slowdown=100 --slowdown_rank=1
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
[ -e "$ck/ckpt-000000000042-final/MANIFEST" ] || fail "no complete final checkpoint: $(ls "$ck")"
# (checkpoint.keep_last prunes ckpt-4 and ckpt-8 by the end.) Samples: both
# shares (2,440 rows each) once: the killed process's rows up to the clock
# it reached (64 each) count, and the new process trains its share from
# there.
was=$(sed -nE 's/.*worker 1 rejoined at clock [0-9]+ \(was at ([0-9]+)\).*/\1/p' "$tmp/server0.log" | head -1)
[ -n "$was" ] || fail "no rejoin logged"
want=$((2440 + 2440))
grep -q "training done: $want samples over all workers" "$tmp/w0.log" \
  || fail "samples: want $want, got: $(grep -h 'training done' "$tmp/w0.log")"
echo "PASS"
