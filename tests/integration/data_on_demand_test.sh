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
#           With --accept_partial_eval, which then accepts nothing: the
#           evaluator scores worker 2's part of the test set itself.
#   gone_default  as gone, without the flag: the evaluator scores worker
#           2's part itself, so the final metrics cover all 2515 test rows
#           (eval_parts_for_others 1), and every process exits 0.
# Usage: data_on_demand_test.sh speeds|kill|gone|gone_default BIN_DIR   (from the repository root)
source "$(dirname "$0")/lib.sh"
tether_test_init "$@"

if [ "$mode" = speeds ]; then servers=2; epochs=3; else servers=1; epochs=4; fi
flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=$servers --num_workers=3 --staleness=inf
       --epochs=$epochs --seed=5 --data_on_demand=true --chunk_rows=64 --minibatch_size=32
       --request_timeout_ms=30000)
# kill: a timeout longer than the restart takes, so the rejoin (not the
# timeout) takes the chunk back.
if [ "$mode" = kill ]; then flags+=(--worker_timeout_ms=20000); else flags+=(--worker_timeout_ms=1500); fi
[ "$mode" = speeds ] && flags+=(--slowdown=4 --slowdown_rank=2 --chunk_taper=true)
# gone: the flag that would accept a partial final evaluation; the
# evaluator scores the gone worker's part itself, so it accepts nothing.
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

rc=0
for p in "${waits[@]}" "${server_pids[@]}"; do wait "$p" || rc=$?; done
pids=()
if [ "$mode" = gone_default ] || [ "$mode" = gone ]; then
  [ "$rc" = 0 ] || fail "a process exited with $rc"
  grep -qE "\[worker 0\] evaluation: worker 2 left the job; its part of the test set \([0-9]+ rows\) was scored here" \
    "$tmp/w0.log" || fail "worker 0 did not score worker 2's part: $(grep '^[EW]' "$tmp/w0.log" | tail -n 2)"
  rows=$(metric "$tmp/m.json" test_rows)
  others=$(metric "$tmp/m.json" eval_parts_for_others)
  [ "$rows" = 2515 ] && [ "$others" = 1 ] || fail "test_rows $rows, eval_parts_for_others $others: not 2515 and 1"
  echo "worker 0: exit 0, metrics over all $rows test rows, $others part scored for worker 2"
  [ "$mode" = gone_default ] && { echo PASS; exit 0; }
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
  ! grep -q '"accepted"' "$tmp/m.json" ||
    fail "the metrics say something was accepted: $(grep '"accepted"' "$tmp/m.json")"
fi
if [ "$mode" = speeds ]; then
  grep -q "chunks of 64 rows tapering toward each epoch's end, 3 epochs, seed 5 (84 chunks per epoch)" \
    "$tmp/server0.log" || fail "shard 0 did not taper the chunks (84 per epoch)"
fi
echo PASS
