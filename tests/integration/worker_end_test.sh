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
# Usage: worker_end_test.sh final_clock BIN_DIR   (from the repository root)
source "$(dirname "$0")/lib.sh"
tether_test_init "$@"
fail_lines=12

case "$mode" in
final_clock)
  flags=(--config=examples/bibtex.pbtxt --num_servers=1 --num_workers=3 --epochs=1 --minibatch_size=271
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
*)
  echo "usage: $0 final_clock BIN_DIR"
  exit 2
  ;;
esac
echo PASS
