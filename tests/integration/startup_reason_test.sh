#!/usr/bin/env bash
# A job that cannot start tells its waiting workers why (found by a fresh
# user: the good worker only said that shard 0's connection dropped).
# Real processes started one by one with flags: 2 servers, num_workers 2,
# cluster.startup_timeout_ms 5000 (at 2000 the servers gave up before
# worker 0, 3 s reading its data on a loaded machine, said HELLO).
# Worker 1 comes with another staleness (mode refused) or another
# train.epochs (mode epochs: with the static split it would train on after
# the others finished) or another --checkpoint_dir (mode checkpoint_dir:
# worker 0 writes to ckA, worker 1 to ckB; found at the first checkpoint
# before, mid-training, leaving partial checkpoint folders) and is refused;
# worker 0 joins and waits for it.
# Asserts: worker 1 exits ≠ 0 naming the mismatch; both shards say, 3 s
# after the first HELLO, that they wait for worker 1, and end the job
# naming worker 1 and its refusal; worker 0 exits ≠ 0 and its own log gives
# the same reason (from a shard's ERROR_REPLY to the request it held
# waiting), not only a dropped connection; every server exits ≠ 0.
# Mode all_refused: 1 server, num_workers 1, startup_timeout_ms 60000;
# the one worker comes with --staleness=3 and is refused, so every worker
# was: the server exits 1 within 10 s of the refusal (it waited out the
# 60 s before), naming the mismatch and the worker's connection (its pid),
# and the worker exits 1 with the server's reason.
# Mode replicas: 2 servers found through a rendezvous folder, server 0 with
# --replicas=1 and server 1 with --replicas=0, 1 worker started once both
# servers found that, startup_timeout_ms 60000: server 1 refuses server
# 0's copy of shard 1 naming both values, and both servers refuse the
# worker with it; every process exits 1 within 20 s of the first start.
# Mode num_workers: 2 servers with --num_workers=3, workers 0 and 1 with
# --num_workers=2, startup_timeout_ms 60000: each worker is refused naming
# both counts, the servers end the job (rank 2, never started, is waited
# for Membership::kCannotRunLingerMs) and every process exits 1 within
# 20 s of the first start.
# Usage: startup_reason_test.sh refused|epochs|checkpoint_dir|all_refused|replicas|num_workers BIN_DIR   (from the repository root)
source "$(dirname "$0")/lib.sh"
tether_test_init "$@"
first=()
case "$mode" in
  refused) odd=(--staleness=3); differs="staleness differs" ;;
  epochs) odd=(--epochs=3); differs="train.epochs differs: worker 1 trains 3 epoch(s)" ;;
  checkpoint_dir)
    first=(--checkpoint_dir="$tmp/ckA"); odd=(--checkpoint_dir="$tmp/ckB")
    differs="checkpoint.dir differs: worker 1 writes its checkpoints to $tmp/ckB, the job's workers so far to $tmp/ckA" ;;
  all_refused | replicas | num_workers) ;;
  *) echo "usage: $0 refused|epochs|checkpoint_dir|all_refused|replicas|num_workers BIN_DIR"; exit 2 ;;
esac
if [ "$mode" = replicas ]; then
  limit_s=60
  mkdir -p "$tmp/rdzv"
  flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=2 --num_workers=1 --staleness=2 --epochs=1
         --startup_timeout_ms=60000 --rendezvous="file:$tmp/rdzv")
  t0=$(now_ms)
  server_pids=()
  for s in 0 1; do
    timeout -k 5 "$limit_s" "$bin/tether-server" "${flags[@]}" --replicas=$((1 - s)) --shard=$s \
      --listen=tcp://127.0.0.1:0 > "$tmp/server$s.log" 2>&1 &
    pids+=($!)
    server_pids+=($!)
  done
  # The worker comes once both servers found the disagreement (one that
  # joined a shard before would be no longer at the start there).
  wait_log "$tmp/server1.log" "the job cannot run: shard 1 runs without replicas" 400
  wait_log "$tmp/server0.log" "the job cannot run: this process's copy of shard 1" 400
  timeout -k 5 "$limit_s" "$bin/tether-worker" "${flags[@]}" --rank=0 > "$tmp/w0.log" 2>&1 &
  w0=$!
  pids+=($w0)
  expect_exit "$w0" 1 20000 "worker 0 of servers that disagree"
  for s in 0 1; do expect_exit "${server_pids[$s]}" 1 20000 "server $s"; done
  took=$(($(now_ms) - t0))
  pids=()
  ((took < 20000)) || fail "the job took $took ms to fail (cluster.startup_timeout_ms=60000)"
  differs="shard 1 runs without replicas (cluster.replicas=0 here), but server process 0 holds a copy of it with cluster.replicas=1 (the copy serves at tcp://127.0.0.1:"
  advice="): start every server with the same --replicas"
  grep -qF "$advice (not waiting out cluster.startup_timeout_ms=60000)" <<< "$(grep -F "[server 1] the job cannot run: $differs" "$tmp/server1.log")" ||
    fail "server 1 did not end naming both --replicas values"
  refusal=$(grep -F "[server 0] the job cannot run: this process's copy of shard 1 was refused by its primary: [server 1] $differs" \
    "$tmp/server0.log" || true)
  grep -qF "$advice (not waiting out" <<< "$refusal" || fail "server 0 did not end naming server 1's refusal"
  grep -qF "$differs" <<< "$(grep "^E" "$tmp/w0.log" | grep -F "refused to pair: [server " | grep -F "the job cannot run: ")" ||
    fail "worker 0 did not say why: $(grep '^E' "$tmp/w0.log" | tail -n 2)"
  echo "every process exited 1 within $took ms (cluster.startup_timeout_ms=60000)"
  echo PASS
  exit 0
fi
if [ "$mode" = num_workers ]; then
  limit_s=60
  flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=2 --staleness=2 --epochs=1 --startup_timeout_ms=60000)
  t0=$(now_ms)
  start_servers 2 --num_workers=3
  start_worker 0 "$tmp/w0.log" --num_workers=2; w0=$started
  start_worker 1 "$tmp/w1.log" --num_workers=2; w1=$started
  expect_exit "$w0" 1 20000 "worker 0 (--num_workers=2)"
  expect_exit "$w1" 1 20000 "worker 1 (--num_workers=2)"
  for s in 0 1; do expect_exit "${server_pids[$s]}" 1 20000 "server $s (--num_workers=3)"; done
  took=$(($(now_ms) - t0))
  pids=()
  ((took < 20000)) || fail "the job took $took ms to fail (cluster.startup_timeout_ms=60000)"
  for r in 0 1; do
    grep -qE "refused to pair: \[server [01]\] cluster.num_workers differs: worker $r has 2, server [01] has 3 \(--num_workers must be the same on every server and worker\)" <<< "$(grep "^E" "$tmp/w$r.log")" ||
      fail "worker $r did not name both counts: $(grep '^E' "$tmp/w$r.log" | tail -n 2)"
  done
  for s in 0 1; do
    ended=$(grep -E "\[server $s\] the job cannot run: worker [01] \(refused: cluster.num_workers differs: worker [01] has 2, server $s has 3 " \
      "$tmp/server$s.log" || true)
    grep -qF "(not waiting out cluster.startup_timeout_ms=60000)" <<< "$ended" || fail "server $s did not end naming both counts"
  done
  echo "every process exited 1 within $took ms (cluster.startup_timeout_ms=60000)"
  echo PASS
  exit 0
fi
if [ "$mode" = all_refused ]; then
  flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=1 --num_workers=1 --staleness=2 --epochs=1
         --startup_timeout_ms=60000)
  start_servers 1
  start_worker 0 "$tmp/w0.log" --staleness=3; w0=$started
  expect_exit "$w0" 1 60000 "worker 0, refused"
  grep -qF "refused to pair: [server 0] staleness differs: worker 0 has 3 (SSP), server 0 has 2 (SSP)" "$tmp/w0.log" ||
    fail "worker 0 did not say why it was refused"
  expect_exit "${server_pids[0]}" 1 10000 "server 0, its one worker refused"
  echo "server 0: exit 1 $took ms after worker 0 (cluster.startup_timeout_ms=60000)"
  why="the job cannot run: worker 0 (refused: staleness differs: worker 0 has 3 (SSP), server 0 has 2 (SSP); connection 'w0-"
  grep -qE "connection 'w0-[0-9]+-[0-9]+'\)" <<< "$(grep -F "$why" "$tmp/server0.log")" ||
    fail "server 0 did not name the mismatch and the connection"
  grep -qF "every one of its 1 initial worker(s) was refused, so no worker is left to come (not waiting out cluster.startup_timeout_ms=60000)" \
    "$tmp/server0.log" || fail "server 0 did not say why it ended before the startup timeout"
  pids=()
  echo PASS
  exit 0
fi
limit_s=60
flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=2 --num_workers=2 --staleness=2 --epochs=1
       --startup_timeout_ms=5000)
start_servers 2
# Worker 0 first: its HELLO sets the job's tables and, being the first
# admitted, the epochs every later worker must have.
start_worker 0 "$tmp/w0.log" "${first[@]}"; w0=$started
joined() { grep -q "worker 0 joined" "$tmp/server0.log" && grep -q "worker 0 joined" "$tmp/server1.log"; }
poll 400 joined || fail "worker 0 did not join both shards within 20 s"
start_worker 1 "$tmp/w1.log" "${odd[@]}"; w1=$started
rc=0; wait "$w1" || rc=$?
[ "$rc" != 0 ] || fail "worker 1, refused, exited 0"
grep -qF "$differs" "$tmp/w1.log" || fail "worker 1 did not say why it was refused"
rc=0; wait "$w0" || rc=$?
[ "$rc" != 0 ] || fail "worker 0 exited 0 from a job that could not run"
why="the job cannot run: worker 1 (refused: $differs"
for s in 0 1; do
  rc=0; wait "${server_pids[$s]}" || rc=$?
  [ "$rc" != 0 ] || fail "server $s exited 0 from a job that could not run"
  grep -qF "$why" "$tmp/server$s.log" || fail "server $s did not name worker 1's refusal"
done
# While it waited, each shard said for whom, 3 s after the first HELLO.
for s in 0 1; do
  grep -qE "\[server $s\] waiting for worker 1 .*\(of 2\) to join: 3 s of cluster.startup_timeout_ms=5000$" \
    "$tmp/server$s.log" || fail "server $s did not say that it waits for worker 1"
done
grep -qF "$why" <<< "$(grep "^E" "$tmp/w0.log")" || fail "worker 0 did not say why the job ended: $(grep '^E' "$tmp/w0.log" | tail -n 2)"
echo "worker 0: $(grep "^E" "$tmp/w0.log" | grep -oF "$why" | head -1) ..."
if [ "$mode" = checkpoint_dir ]; then
  ! compgen -G "$tmp/ck[AB]/ckpt-*" > /dev/null ||
    fail "a checkpoint was begun in a job that could not run: $(compgen -G "$tmp/ck[AB]/ckpt-*")"
fi
pids=()
echo PASS
