#!/usr/bin/env bash
# Data on demand (train.data_on_demand) with real processes
# started one by one with flags, on Bibtex's 4880 training rows, 3 workers,
# ASP (so a fast worker is never held to the slow one's clock).
#   speeds  2 servers; worker 2 is 4x slower (--slowdown=4 --slowdown_rank=2).
#           Every epoch the workers' epoch_rows sum to 4880 exactly, shard 0
#           counted 4880 rows per epoch, nothing was re-dealt, and worker 2
#           trained on fewer rows than either other worker. The chunks
#           taper (--chunk_taper=true): shard 0 splits the 4880 rows into 84
#           chunks (77 without the taper) and the exact counts still hold.
#   kill    1 server; worker 2 is killed (SIGKILL) in its second epoch and
#           restarted at once with the same rank: its new HELLO gives the
#           chunk the dead process held back, and the others wait for it at
#           the epoch's end. Shard 0 counted exactly 4880 rows in every
#           epoch (each row of each epoch completed once), the chunk was
#           dealt again (rows_redealt > 0), the first epoch's per-worker rows
#           (the survivors' from the metrics, the killed worker's from its
#           log) sum to 4880, and so do the last epoch's (with the restarted
#           worker's).
#   gone    as kill, but worker 2 never comes back: the server declares it
#           gone after cluster.worker_timeout_ms (1.5 s) and deals its chunk
#           again; the job finishes (exit 0) with the same exact counts.
#   gone_default  as gone, without --accept_partial_eval: the evaluator
#           writes the metrics of the parts it has (fewer than 2515 rows),
#           then exits 4 naming the rows and the flag that accepts it.
# Usage: data_on_demand_test.sh speeds|kill|gone|gone_default BIN_DIR   (from the repository root)
source "$(dirname "$0")/lib.sh"
tether_test_init "$@"

if [ "$mode" = speeds ]; then servers=2; epochs=3; else servers=1; epochs=4; fi
flags=(--config=examples/bibtex.pbtxt --num_servers=$servers --num_workers=3 --staleness=inf
       --epochs=$epochs --seed=5 --data_on_demand=true --chunk_rows=64 --minibatch_size=32
       --request_timeout_ms=30000)
# kill: a timeout longer than the restart takes, so the rejoin (not the
# timeout) takes the chunk back.
if [ "$mode" = kill ]; then flags+=(--worker_timeout_ms=20000); else flags+=(--worker_timeout_ms=1500); fi
[ "$mode" = speeds ] && flags+=(--slowdown=4 --slowdown_rank=2 --chunk_taper=true)
# gone: worker 2's part of the test set is never scored; the run accepts
# that (by default the evaluator would exit 4).
[ "$mode" = gone ] && flags+=(--accept_partial_eval)
start_servers $servers
start_worker 0 "$tmp/w0.log" --metrics_out="$tmp/m.json"; w0=$started
start_worker 1 "$tmp/w1.log"; w1=$started
start_worker 2 "$tmp/w2.log"; w2=$started
waits=("$w0" "$w1" "$w2")

if [ "$mode" != speeds ]; then
  # Kill worker 2 once it is into its second epoch (it holds a chunk: it
  # asks for the next only when it completes one).
  poll 600 grep -q "epoch 1 on demand" "$tmp/w2.log" || fail "worker 2 never finished an epoch"
  kill -9 "$(worker_pid "$w2")"
  wait "$w2" 2>/dev/null || true
  echo "worker 2 killed"
  if [ "$mode" = kill ]; then
    start_worker 2 "$tmp/w2b.log"
    waits=("$w0" "$w1" "$started")
  else
    waits=("$w0" "$w1")
  fi
fi

if [ "$mode" = gone_default ]; then
  # Without --accept_partial_eval the evaluator writes the metrics of the
  # parts it has, then exits 4 saying so; every other process exits 0.
  rc0=0; wait "$w0" || rc0=$?
  [ "$rc0" = 4 ] || fail "worker 0 exited $rc0 after a partial evaluation, expected 4"
  waits=("$w1")
fi
rc=0
for p in "${waits[@]}" "${server_pids[@]}"; do wait "$p" || rc=$?; done
pids=()
if [ "$mode" = gone_default ]; then
  [ "$rc" = 0 ] || fail "a process other than the evaluator exited with $rc"
  grep -qE "\[worker 0\] the final evaluation covered only [0-9]+ test rows, the parts of 2 of 3 workers \(the others left\): the metrics are not the whole test set's; exit 4 \(accept such a run with --accept_partial_eval" \
    "$tmp/w0.log" || fail "worker 0 did not say why it exits 4: $(grep '^E' "$tmp/w0.log" | tail -n 2)"
  rows=$(metric "$tmp/m.json" test_rows)
  [ "$rows" -gt 0 ] && [ "$rows" -lt 2515 ] || fail "test_rows $rows: not a part of the 2515"
  echo "worker 0: exit 4, metrics over $rows of 2515 test rows"
  echo PASS
  exit 0
fi
[ "$rc" = 0 ] || fail "a process exited with $rc"
grep -h "data on demand" "$tmp"/server0.log | sed 's/^.*\] //' || true

killed_epoch1=0
if [ "$mode" != speeds ]; then
  killed_epoch1=$(sed -nE 's/.*epoch 1 on demand: ([0-9]+) rows counted.*/\1/p' "$tmp/w2.log")
  [ -n "$killed_epoch1" ] || fail "no epoch 1 count in the killed worker's log"
fi
python3 - "$tmp/m.json" "$mode" "$epochs" "$killed_epoch1" <<'PY'
import json, sys
m, mode, epochs, killed_epoch1 = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rows = 4880
workers = m["workers"]
per_worker = [w.get("epoch_rows", [0] * epochs) for w in workers]  # gone: rank 2 never reported
print("epoch_rows per worker:", per_worker)
print("chunks completed per worker:", [w.get("chunks_completed") for w in workers],
      "refused:", [w.get("chunks_refused") for w in workers])
counted = m["servers"][0]["chunk_epoch_rows"]
print("rows shard 0 counted per epoch:", counted, "; re-dealt:", m["chunks_redealt"], "chunks,",
      m["rows_redealt"], "rows; P@1", round(m["precision_at_1"], 4))
assert counted == [rows] * epochs, counted
assert all(len(r) == epochs for r in per_worker), per_worker
assert m["bound_violations"] == 0
if mode == "speeds":
    for e in range(epochs):
        total = sum(r[e] for r in per_worker)
        assert total == rows, f"epoch {e + 1}: {total} rows, expected {rows}"
    assert m["total_samples"] == rows * epochs, m["total_samples"]
    assert m["chunks_redealt"] == 0 and m["rows_redealt"] == 0
    slow, fast = sum(per_worker[2]), [sum(per_worker[0]), sum(per_worker[1])]
    assert slow < min(fast), f"the 4x slower worker trained {slow} rows, the others {fast}"
    assert m["precision_at_1"] >= 0.45, m["precision_at_1"]
else:
    assert m["chunks_redealt"] >= 1 and m["rows_redealt"] > 0, (m["chunks_redealt"], m["rows_redealt"])
    first = per_worker[0][0] + per_worker[1][0] + killed_epoch1
    assert first == rows, f"epoch 1: survivors {per_worker[0][0]} + {per_worker[1][0]}, killed {killed_epoch1}"
    last = sum(r[-1] for r in per_worker)
    assert last == rows, f"last epoch: {last} rows"
    if mode == "kill":
        assert per_worker[2][0] == 0, "the restarted worker joined mid-job: nothing in epoch 1"
        assert sum(per_worker[2]) > 0, "the restarted worker trained nothing"
PY
[ "$mode" = speeds ] || grep -q "data on demand: worker 2 left holding 1 chunk" "$tmp/server0.log" \
  || fail "the server did not take back worker 2's chunk"
if [ "$mode" = kill ]; then
  grep -q "worker 2 rejoined" "$tmp/server0.log" || fail "no rejoin logged"
  ! grep -q "worker 2 silent for" "$tmp/server0.log" || fail "worker 2 timed out: the rejoin should take its chunk back"
  grep -q "joining at epoch [2-4]" "$tmp/w2b.log" || fail "the restarted worker did not join mid-job"
fi
if [ "$mode" = gone ]; then
  grep -q "worker 2 silent for" "$tmp/server0.log" || fail "the server never declared worker 2 gone"
  [ "$(metric "$tmp/m.json" accepted)" = "['partial_evaluation']" ] ||
    fail "the metrics do not say the partial evaluation was accepted: $(metric "$tmp/m.json" accepted)"
fi
if [ "$mode" = speeds ]; then
  grep -q "chunks of 64 rows tapering toward each epoch's end, 3 epochs, seed 5 (84 chunks per epoch)" \
    "$tmp/server0.log" || fail "shard 0 did not taper the chunks (84 per epoch)"
fi
echo PASS
