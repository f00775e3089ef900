#!/usr/bin/env bash
# How a worker's run ends, with real processes started one by one with
# flags on 127.0.0.1, Bibtex (4880 training rows). Faults a fresh user found
# in a by-hand trial.
#   final_clock  1 server, 3 workers, the static split, minibatches of 271
#            rows, 1 epoch, checkpoints on: worker 0 has 1626 rows (6
#            minibatches), workers 1 and 2 have 1627 (7), so worker 0 ends
#            at clock 6 and the final checkpoint is at clock 7
#            (ckpt-000000000007-final). The shard's line for it names clock
#            7 (it named worker 0's 6), and the checkpoint loads: a job
#            resumed from it (nothing left to train) evaluates to the same
#            P@1 (its shard file carried clock 6 against the manifest's 7,
#            and a resume refused it).
#   removed  1 server, 2 workers, data on demand, cluster.worker_timeout_ms
#            1.5 s: worker 1 is stopped (SIGSTOP) in its second epoch; the
#            shard removes it and deals its chunk again; worker 0 and the
#            server finish the job and exit 0 while worker 1 is still
#            stopped. Then SIGCONT: worker 1 reads the shard's REMOVED (sent
#            at the removal, waiting in its socket) and exits non-zero with
#            "removed: silent for N ms at clock C (cluster.worker_timeout_ms=
#            1500)", not "shard gone", and does not abort the job.
#   failed_after_bye  1 server, 3 workers, the static split, 6 epochs,
#            cluster.worker_timeout_ms 1.5 s: worker 2 is SIGKILLed in its
#            second epoch and never comes back; the shard removes it, the
#            barrier lets workers 0 and 1 through, they evaluate, worker 1
#            says BYE, and worker 0 fails the job (worker 2's rows of the
#            static split were never trained: ABORT). Every process exits
#            non-zero, worker 1 too, with worker 0's reason: the shard held
#            its BYE's answer until the job's end (it exited 0 before).
# Usage: worker_end_test.sh final_clock|removed|failed_after_bye BIN_DIR   (from the repository root)
source "$(dirname "$0")/lib.sh"
tether_test_init "$@"
fail_lines=12

case "$mode" in
final_clock)
  flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=1 --num_workers=3 --epochs=1 --minibatch_size=271
         --seed=5 --request_timeout_ms=30000 --checkpoint_dir="$tmp/ck")
  run_job() {  # NAME [extra flags]: servers and workers, every process waited for; its exit status
    local name=$1 p rc=0 ws=()
    shift
    start_servers 1
    mv "$tmp/s0.port" "$tmp/$name-s0.port"
    for r in 0 1 2; do
      local extra=()
      [ "$r" = 0 ] && extra=(--metrics_out="$tmp/$name.json")
      start_worker "$r" "$tmp/$name-w$r.log" "$@" "${extra[@]}"
      ws+=("$started")
    done
    for p in "${ws[@]}" "${server_pids[@]}"; do wait "$p" || rc=$?; done
    mv "$tmp/server0.log" "$tmp/$name-server0.log"
    pids=()
    return "$rc"
  }
  run_job first || fail "the job exited non-zero"
  final="$tmp/ck/ckpt-000000000007-final"
  [ -f "$final/MANIFEST" ] || fail "no $final: $(ls "$tmp/ck")"
  grep -q "epoch 1/1 clock 6 " "$tmp/first-w0.log" || fail "worker 0 did not end at clock 6"
  grep -q "checkpoint at clock 7 (final): $final/shard-0.tables" "$tmp/first-server0.log" ||
    fail "the shard's line for the final checkpoint: $(grep "(final)" "$tmp/first-server0.log" | sed 's/^.*\] //')"
  grep -h "(final)" "$tmp/first-server0.log" | sed 's/^.*\] //'
  flags+=(--checkpoint_dir="$tmp/ck-loaded")
  run_job loaded --resume_from="$final" || fail "the job resumed from $final exited non-zero"
  p1=$(metric "$tmp/first.json" precision_at_1)
  p1_loaded=$(metric "$tmp/loaded.json" precision_at_1)
  [ "$p1" = "$p1_loaded" ] || fail "P@1 $p1_loaded from the final checkpoint, $p1 at the end of the job"
  echo "resumed from $(basename "$final"): P@1 $p1_loaded, as at the end of the job"
  ;;
removed)
  # Worker 1's part of the test set is scored by worker 0, the evaluator.
  flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=1 --num_workers=2 --epochs=3 --seed=5 --minibatch_size=32
         --data_on_demand=true --chunk_rows=64 --request_timeout_ms=30000 --worker_timeout_ms=1500)
  start_servers 1
  start_worker 0 "$tmp/w0.log"; w0=$started
  start_worker 1 "$tmp/w1.log"; w1=$started
  poll 1200 grep -q "epoch 1 on demand" "$tmp/w1.log" || fail "worker 1 never finished an epoch"
  kill -STOP "$(worker_pid "$w1")"
  rc=0
  for p in "$w0" "${server_pids[@]}"; do wait "$p" || rc=$?; done
  [ "$rc" = 0 ] || fail "worker 0 or the server exited $rc (worker 1 stopped)"
  grep -q "worker 1 silent for [0-9]* ms" "$tmp/server0.log" || fail "the shard did not remove worker 1"
  kill -CONT "$(worker_pid "$w1")"
  rc=0
  wait "$w1" || rc=$?
  pids=()
  [ "$rc" = 1 ] || fail "worker 1, removed, exited $rc (want 1)"
  why="\[server 0\] worker 1 removed: silent for [0-9]+ ms at clock [0-9]+ \(cluster.worker_timeout_ms=1500\)"
  grep -Eq "$why" "$tmp/w1.log" || fail "worker 1 did not say it was removed: $(grep "^[EF]" "$tmp/w1.log" | tail -n 2)"
  ! grep -q "is gone\|ABORT" "$tmp/w1.log" || fail "worker 1 said a shard is gone or aborted the job"
  grep -Eo "$why" "$tmp/w1.log" | head -n 1
  ;;
failed_after_bye)
  flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=1 --num_workers=3 --epochs=6 --seed=5 --minibatch_size=32
         --request_timeout_ms=30000 --worker_timeout_ms=1500)
  start_servers 1
  start_worker 0 "$tmp/w0.log" --metrics_out="$tmp/m.json"; w0=$started
  start_worker 1 "$tmp/w1.log"; w1=$started
  start_worker 2 "$tmp/w2.log"; w2=$started
  poll 1200 grep -q "epoch 1/6" "$tmp/w2.log" || fail "worker 2 never finished an epoch"
  kill -9 "$(worker_pid "$w2")"
  wait "$w2" 2>/dev/null || true
  declare -A rcs
  for p in "$w0" "$w1" "${server_pids[@]}"; do rcs[$p]=0; wait "$p" || rcs[$p]=$?; done
  pids=()
  why="the job did not finish: worker(s) 2 left before the end of training"
  grep -q "job aborted: worker 0 failed: $why" "$tmp/server0.log" || fail "the shard did not fail the job on worker 2"
  [ "${rcs[${server_pids[0]}]}" != 0 ] || fail "the server exited 0"
  for r in 0 1; do
    p=$w0; [ "$r" = 1 ] && p=$w1
    [ "${rcs[$p]}" = 1 ] || fail "worker $r exited ${rcs[$p]} (want 1)"
    grep -q "$why" "$tmp/w$r.log" || fail "worker $r did not give the shard's reason: $(grep "^[EF]" "$tmp/w$r.log" | tail -n 2)"
  done
  echo "workers 0 and 1 exited 1: $(grep -o "$why[^;]*" "$tmp/w1.log" | head -n 1)"
  # Rank 0 still wrote the metrics of what was trained, saying why the job failed.
  [ -s "$tmp/m.json" ] || fail "rank 0 wrote no metrics file"
  failure=$(metric "$tmp/m.json" failure 2>/dev/null || true)
  case "$failure" in "$why"*) ;; *) fail "the metrics' failure is '$failure', want '$why...'" ;; esac
  echo "metrics: failure = $failure"
  ;;
*)
  echo "usage: $0 final_clock|removed|failed_after_bye BIN_DIR"
  exit 2
  ;;
esac
echo PASS
