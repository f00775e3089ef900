#!/usr/bin/env bash
# Data on demand with checkpoints (train.data_on_demand + checkpoint.dir):
# processes started one by one with flags on 127.0.0.1, Bibtex (4880
# training rows), 2 servers, 2 workers, SSP 2, 4 epochs, chunks of 64 rows,
# a checkpoint every 20 clocks.
#   1. Once a checkpoint cut in the middle of epoch 2 or later is complete
#      (shard 0 logged chunks of the epoch completed and others held), every
#      process is killed with SIGKILL (the rows completed after that
#      checkpoint are lost with them).
#   2. Resuming with another train.chunk_rows, another train.seed or the
#      static split fails at once, naming the field (exit ≠ 0, nothing
#      started).
#   3. The job resumes (--resume_from on every process) and finishes:
#      shard 0's chunk_epoch_rows (rows completed per epoch, counting those
#      completed before the checkpoint) are exactly [4880] * 4; the chunks
#      held at the checkpoint were dealt again (chunks_redealt ≥ 1); P@1 ≥ 0.5.
# Usage: on_demand_resume_test.sh BIN_DIR   (from the repository root)
# tmp, pids and their reaping, fail, poll.
source "$(dirname "$0")/lib.sh"
tether_test_init resume "$1"
fail_lines=12

ck=$tmp/ck
flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=2 --num_workers=2 --staleness=2 --epochs=4 --seed=5
       --data_on_demand=true --chunk_rows=64 --minibatch_size=32 --request_timeout_ms=30000
       --checkpoint_dir="$ck" --checkpoint_every_clocks=20 --checkpoint_keep_last=50)

# start_job NAME [extra flags]: servers, then workers; sets $server_pids,
# $worker_pids; rank 0 writes $tmp/NAME.json.
start_job() {
  local name=$1; shift
  server_pids=()
  worker_pids=()
  for s in 0 1; do
    timeout -k 5 100 "$bin/tether-server" "${flags[@]}" "$@" --shard=$s --listen=tcp://127.0.0.1:0 \
      --port_file="$tmp/$name-s$s.port" > "$tmp/$name-server$s.log" 2>&1 &
    server_pids+=($!)
    pids+=($!)
  done
  local addrs=
  for s in 0 1; do
    poll 200 test -f "$tmp/$name-s$s.port" || fail "server $s of $name wrote no port file within 10 s"
    addrs="$addrs${addrs:+,}$(cat "$tmp/$name-s$s.port")"
  done
  for r in 0 1; do
    local extra=()
    [ "$r" = 0 ] && extra=(--metrics_out="$tmp/$name.json")
    timeout -k 5 100 "$bin/tether-worker" "${flags[@]}" "$@" --rank=$r --server_addresses="$addrs" "${extra[@]}" \
      > "$tmp/$name-worker$r.log" 2>&1 &
    worker_pids+=($!)
    pids+=($!)
  done
}

# 1. Train until a checkpoint cut mid-epoch (epoch ≥ 2, some chunks of it
# completed) is complete, then SIGKILL everything.
start_job first
# cut_or_end: sets $cut once the latest complete checkpoint is a cut in
# epoch 2 or later with chunks of it completed; true then, or once the job
# wrote its final checkpoint (too late).
cut=
cut_or_end() {
  local latest clock epoch done_chunks
  latest=$(ls -d "$ck"/ckpt-*/MANIFEST 2>/dev/null | sort | tail -1 || true)
  if [ -n "$latest" ]; then
    clock=$(basename "$(dirname "$latest")" | sed -E 's/^ckpt-0*([0-9]+).*/\1/')
    # "checkpoint at clock N: data on demand at epoch E of N, K chunk(s) of it completed, H dealt ..."
    read -r epoch done_chunks < <(sed -nE "s/.*checkpoint at clock $clock: data on demand at epoch ([0-9]+) of [0-9]+, ([0-9]+) chunk.*/\1 \2/p" \
                                    "$tmp/first-server0.log" | tail -1) || true
    if [ "${epoch:-0}" -ge 2 ] && [ "${done_chunks:-0}" -gt 0 ]; then cut=$clock; return 0; fi
  fi
  ls -d "$ck"/ckpt-*-final >/dev/null 2>&1
}
poll 1200 cut_or_end || true  # 60 s at most
[ -n "$cut" ] || fail "no complete checkpoint cut mid-epoch (epoch ≥ 2) before the job ended"
for p in "${worker_pids[@]}" "${server_pids[@]}"; do
  for c in $(pgrep -P "$p" 2>/dev/null); do kill -9 "$c" 2>/dev/null || true; done  # `timeout` runs it as its child
  kill -9 "$p" 2>/dev/null || true
done
for p in "${worker_pids[@]}" "${server_pids[@]}"; do wait "$p" 2>/dev/null || true; done
pids=()
! ls -d "$ck"/ckpt-*-final >/dev/null 2>&1 || fail "the job finished before the kill"
latest=$(dirname "$(ls -d "$ck"/ckpt-*/MANIFEST | sort | tail -1)")
echo "killed every process after the checkpoint at clock $cut (cut mid-epoch), the latest complete one: $latest"
grep -h "checkpoint at clock $cut: data on demand" "$tmp/first-server0.log" | sed 's/^.*\] //'
grep -q "chunks.state" "$latest/MANIFEST" || fail "$latest/MANIFEST lists no chunks.state"

# 2. A resume that does not fit the checkpoint fails at once, naming the field.
refused() {  # expected-text flags...
  local want=$1; shift
  local rc=0
  timeout -k 5 60 "$bin/tether-worker" "${flags[@]}" "$@" --rank=0 --server_addresses=tcp://127.0.0.1:9,tcp://127.0.0.1:10 \
    --resume_from="$ck" > "$tmp/refused.log" 2>&1 || rc=$?
  [ "$rc" != 0 ] || fail "a resume with $* exited 0"
  grep -q -- "$want" "$tmp/refused.log" || fail "a resume with $* did not say '$want': $(tail -n 3 "$tmp/refused.log")"
  echo "refused ($*): $(grep -o -- "$want[^(]*" "$tmp/refused.log" | head -1)"
}
refused "field train.chunk_rows: the checkpoint has 64, the job has 50" --chunk_rows=50
refused "field train.seed: the checkpoint has 5, the job has 6" --seed=6
# The static split without --chunk_rows (a flag only data on demand reads is
# refused on its own, before the checkpoint is read).
all_flags=("${flags[@]}")
flags=()
for f in "${all_flags[@]}"; do [[ $f == --chunk_rows=* ]] || flags+=("$f"); done
refused "field train.data_on_demand: the checkpoint has true, the job has false" --data_on_demand=false
flags=("${all_flags[@]}")

# 3. Resume and finish.
start_job resumed --resume_from="$ck"
rc=0
for p in "${worker_pids[@]}" "${server_pids[@]}"; do wait "$p" || rc=$?; done
pids=()
[ "$rc" = 0 ] || fail "the resumed job exited $rc"
resumed_clock=$(basename "$latest" | sed -E 's/^ckpt-0*([0-9]+).*/\1/')
grep -Eq "data on demand resumed from the checkpoint at clock $resumed_clock: [1-3] of 4 epochs complete" \
  "$tmp/resumed-server0.log" || fail "shard 0 did not resume the dealing from $latest"
grep -h "data on demand resumed\|data on demand: epoch" "$tmp/resumed-server0.log" | sed 's/^.*\] //'
ls -d "$ck"/ckpt-*-final >/dev/null || fail "no final checkpoint"
python3 - "$tmp/resumed.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
counted = m["servers"][0]["chunk_epoch_rows"]
print("rows shard 0 counted per epoch (before and after the resume):", counted,
      "; re-dealt:", m["chunks_redealt"], "chunks,", m["rows_redealt"], "rows; P@1", round(m["precision_at_1"], 4))
assert counted == [4880] * 4, counted
assert m["chunks_redealt"] >= 1, m["chunks_redealt"]
assert m["bound_violations"] == 0
assert m["precision_at_1"] >= 0.5, m["precision_at_1"]
PY
echo PASS
