#!/usr/bin/env bash
# Data on demand (train.data_on_demand) when a worker dies for good mid-epoch
# and a worker with a new rank joins in its place (what must
# hold: every training row is used exactly once per epoch, also when a
# worker is killed and another joins mid-epoch). Real processes started one by one
# with flags: Bibtex (4880 training rows, chunks of 64), 2 servers, SSP
# s = 2, 3 initial workers (cluster.max_workers 4), 4 epochs.
#   Worker 2, 4x slower (--slowdown), is SIGKILLed as soon as its
#   --progress_file says epoch 2 (it then holds the epoch-2 chunk it is
#   training: a worker asks for the next chunk only when it completes one;
#   being slow, it is still far from its last chunk of the epoch when the
#   poll sees the file, even on a loaded machine) and is never restarted;
#   once it is dead nothing is slowed. A worker with
#   the new rank 3 is started right after. The servers declare worker 2 gone
#   after cluster.worker_timeout_ms (3 s) and deal its chunk again; epoch 2
#   cannot end before that, so the joiner joins while epoch 2 is open.
# Asserts, from shard 0's metrics and log: exit 0 for every process but the
# killed one; chunk_epoch_rows is 4880 in every epoch, and so is the sum of
# shard 0's per-worker rows of every epoch (the killed worker's included);
# the survivors' and the joiner's epoch_rows in the metrics equal shard 0's
# per-worker counts, and the killed worker's epoch-1 rows equal those its
# own log counted; it has none after epoch 2, the joiner none before it
# joined and > 0 in all (samples > 0); exactly the one chunk worker 2 held
# was dealt again (chunks_redealt 1, rows_redealt = that chunk's rows, as
# shard 0 logged them); both shards log the join (workers_joined 1) and
# worker 2's removal; worker 0 scores worker 2's part of the test set in
# the final evaluation (3 parts merged, eval_workers 3, one of them for
# another, test_rows 2515); the join
# came while epoch 2 was open (shard 0 logged it before epoch 2's end, and
# the joiner's first chunk was of epoch 2); no bound violation; P@1 ≥ 0.55
# over the whole test set.
# Usage: kill_join_test.sh kill_join BIN_DIR   (from the repository root)
source "$(dirname "$0")/lib.sh"
tether_test_init "$@"
[ "$mode" = kill_join ] || { echo "usage: $0 kill_join BIN_DIR"; exit 2; }
fail_lines=15
epochs=4
flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=2 --num_workers=3 --max_workers=4 --staleness=2
       --epochs=$epochs --seed=5 --data_on_demand=true --chunk_rows=64 --minibatch_size=32
       --request_timeout_ms=30000 --worker_timeout_ms=3000 --slowdown=4 --slowdown_rank=2)
start_servers 2
start_worker 0 "$tmp/w0.log" --metrics_out="$tmp/m.json"; w0=$started
start_worker 1 "$tmp/w1.log"; w1=$started
start_worker 2 "$tmp/w2.log" --progress_file="$tmp/w2.progress"; w2=$started

# The progress file holds "EPOCH CLOCK", replaced at the first clock of
# each epoch.
in_epoch() { [ -s "$tmp/w2.progress" ] && [ "$(cut -d' ' -f1 "$tmp/w2.progress")" -ge "$1" ]; }
poll 1200 in_epoch 2 || fail "worker 2 never reached epoch 2 (progress: $(cat "$tmp/w2.progress" 2>/dev/null))"
kill -9 "$(worker_pid "$w2")"
wait "$w2" 2>/dev/null || true
echo "worker 2 killed at epoch/clock $(cat "$tmp/w2.progress")"
start_worker 3 "$tmp/w3.log" --progress_file="$tmp/w3.progress"; w3=$started

rc=0
for p in "$w0" "$w1" "$w3" "${server_pids[@]}"; do wait "$p" || { rc=$?; echo "pid $p exited $rc"; }; done
pids=()
grep -h -E "data on demand: (epoch|worker 2|rows)|joined the running job|silent for" "$tmp"/server0.log \
  | sed 's/^.*\] //' || true
grep -h "joining at epoch" "$tmp/w3.log" | sed 's/^.*\] //' || true
[ "$rc" = 0 ] || fail "a process exited with $rc"

for s in 0 1; do
  grep -q "worker 3 joined the running job at clock" "$tmp/server$s.log" || fail "server $s never logged the join"
  grep -q "worker 2 silent for" "$tmp/server$s.log" || fail "server $s never declared worker 2 gone"
done
grep -q "data on demand: worker 2 left holding 1 chunk" "$tmp/server0.log" \
  || fail "shard 0 did not take back the one chunk worker 2 held"
grep -q "evaluation: worker 2 left the job; its part of the test set ([0-9]* rows) was scored here" "$tmp/w0.log" \
  || fail "the evaluator did not score worker 2's part of the test set"
# The join came while epoch 2 (the kill's) was open: shard 0 logged it
# before that epoch's end, and the joiner's first chunk was of epoch 2.
join_line=$(grep -n "worker 3 joined the running job" "$tmp/server0.log" | head -1 | cut -d: -f1)
end2_line=$(grep -n "data on demand: epoch 2/$epochs complete" "$tmp/server0.log" | head -1 | cut -d: -f1)
[ -n "$join_line" ] && [ -n "$end2_line" ] && [ "$join_line" -lt "$end2_line" ] \
  || fail "worker 3 did not join while epoch 2 was open (join at log line ${join_line:-none}, epoch 2 end at ${end2_line:-none})"
grep -q "joining at epoch 2$" "$tmp/w3.log" || fail "the joiner's first chunk was not of epoch 2"
killed_epoch1=$(sed -nE 's/.*epoch 1 on demand: ([0-9]+) rows counted.*/\1/p' "$tmp/w2.log")
[ -n "$killed_epoch1" ] || fail "no epoch 1 count in the killed worker's log"

killed_test_rows=$(sed -nE 's/.*read [0-9]+ training rows .*, ([0-9]+) test rows.*/\1/p' "$tmp/w2.log")
[ -n "$killed_test_rows" ] || fail "no test part size in the killed worker's log"

python3 - "$tmp/m.json" "$tmp/server0.log" "$epochs" "$killed_epoch1" "$killed_test_rows" <<'PY' || fail "metrics gates"
import json, re, sys
m = json.load(open(sys.argv[1]))
log = open(sys.argv[2]).read()
epochs, killed_epoch1, killed_test_rows = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
rows, test_rows = 4880, 2515
ok = True
def check(cond, what):
    global ok
    print(("ok: " if cond else "FAILED: ") + what)
    ok = ok and cond

s0 = m["servers"][0]
check(s0["chunk_epoch_rows"] == [rows] * epochs, f"shard 0 counted {s0['chunk_epoch_rows']} rows per epoch")
# Shard 0's per-worker rows of each epoch, as it logged them at the epoch's end.
by_epoch = {}
for e, per in re.findall(r"data on demand: epoch (\d+)/\d+ complete, \d+ rows in \d+ chunks; rows by worker ([^;]*);", log):
    by_epoch[int(e)] = {int(r): int(n) for r, n in re.findall(r"(\d+): (\d+)", per)}
check(sorted(by_epoch) == list(range(1, epochs + 1)), f"shard 0 logged epochs {sorted(by_epoch)}")
for e in sorted(by_epoch):
    check(sum(by_epoch[e].values()) == rows, f"epoch {e}: rows by worker {by_epoch[e]} sum to {rows}")
rank_rows = lambda r: [by_epoch.get(e, {}).get(r, 0) for e in range(1, epochs + 1)]
workers = m["workers"]
check(len(workers) == 4 and "rank" not in workers[2] and all(workers[r].get("rank") == r for r in (0, 1, 3)),
      "metrics hold ranks 0, 1, 3 and nothing from the killed rank 2")
for r in (0, 1, 3):
    check(workers[r]["epoch_rows"] == rank_rows(r), f"worker {r}: epoch_rows {workers[r]['epoch_rows']} = shard 0's")
killed = rank_rows(2)
check(killed[0] == killed_epoch1 > 0, f"killed worker 2: {killed} (its own log: {killed_epoch1} in epoch 1)")
check(all(n == 0 for n in killed[2:]), "killed worker 2 completed nothing after epoch 2")
joiner = rank_rows(3)
check(joiner[0] == 0 and sum(joiner) > 0 and workers[3]["samples"] > 0,
      f"joiner 3: {joiner}, {workers[3]['samples']} samples")
# The one chunk worker 2 held, dealt again: its size as shard 0 logged it.
again = re.findall(r"rows \[(\d+), (\d+)\) of epoch (\d+), held by a worker that left, dealt again to worker (\d+)", log)
check(len(again) == 1 and again[0][2] == "2", f"re-dealt (begin, end, epoch, to): {again}")
held = int(again[0][1]) - int(again[0][0]) if again else -1
check(m["chunks_redealt"] == 1 and m["rows_redealt"] == held,
      f"chunks_redealt {m['chunks_redealt']}, rows_redealt {m['rows_redealt']} (the held chunk: {held} rows)")
joined = [s["workers_joined"] for s in m["servers"]]
check(joined == [1, 1], f"workers_joined per shard {joined}")
check(m["eval_workers"] == 3 and m["eval_parts_for_others"] == 1 and m["test_rows"] == test_rows,
      f"{m['eval_workers']} parts ({m['eval_parts_for_others']} scored for others) over {m['test_rows']} of "
      f"{test_rows} test rows (worker 2's part: {killed_test_rows})")
check(m["bound_violations"] == 0, f"bound violations {m['bound_violations']}")
check(m["precision_at_1"] >= 0.55, f"P@1 {m['precision_at_1']:.4f} (gate 0.55)")
sys.exit(0 if ok else 1)
PY
echo PASS
