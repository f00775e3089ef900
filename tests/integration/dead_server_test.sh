#!/usr/bin/env bash
# A dead server does not hang or silently end the job,
# with real processes on 127.0.0.1 and the bundled Bibtex data (200 epochs,
# so every kill lands mid-training). Usage: dead_server_test.sh MODE BIN_DIR
#   launch_kill   tether-launch, 2 servers + 2 workers; SIGKILL server 1 once
#                 training runs: the launcher exits non-zero within 30 s,
#                 naming the dead shard and its endpoint, with every child reaped.
#   by_hand_kill  3 servers + 4 workers started by hand; SIGKILL server 1: the
#                 workers name the gone shard (cluster.liveness_timeout_ms),
#                 tell the other servers (ABORT), and every process has exited,
#                 non-zero, within 30 s.
#   stop_signals  2 servers + 2 workers by hand. SIGTERM to worker 1: exit 143
#                 within 2 s, both servers log its goodbye. SIGSTOP server 1
#                 (a stalled server), then SIGTERM to worker 0, blocked on it:
#                 exit 143 within 2.5 s; server 0, whose workers both said
#                 goodbye, exits 0. SIGTERM to server 1 (then SIGCONT): exit 143.
#   stalled_server  1 server + 1 worker, --liveness_timeout_ms=1000; SIGSTOP the
#                 server (a vanished host: its kernel still accepts TCP, nobody
#                 answers the ZMTP heartbeats): the worker exits 1 within 10 s
#                 naming the gone shard.
# No fixed sleeps: every wait polls with a bound; every process runs under
# `timeout` and is killed on exit.
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"
limit_s=90
fail_lines=15

job=(--config=tests/data/bibtex_fixed.pbtxt --epochs=200 --staleness=2)
flags=("${job[@]}")
start_workers() {  # N: workers 0..N-1 (logs $tmp/workerR.log), pids in wpid[R]
  for ((r = 0; r < $1; r++)); do
    start_worker "$r" "$tmp/worker$r.log"
    wpid[$r]=$started
  done
}

case "$mode" in
launch_kill)
  timeout -k 5 90 "$bin/tether-launch" "${job[@]}" --servers 2 --workers 2 > "$tmp/launch.log" 2>&1 &
  launcher=$!
  pids+=($launcher)
  wait_log "$tmp/launch.log" "epoch 1/200" 600
  victim=$(sed -n 's/.*\[launch\] started server 1 (pid \([0-9]*\)).*/\1/p' "$tmp/launch.log")
  [ -n "$victim" ] || fail "no pid for server 1 in the launcher's log"
  kill -9 "$victim"
  t0=$(now_ms)
  exits_within "$launcher" 30000 || fail "the launcher still runs 30 s after server 1 was killed"
  took=$(($(now_ms) - t0))
  wait_code "$launcher"
  [ "$rc" != 0 ] || fail "the launcher exited 0 after a server was killed"
  grep -q "server 1 (pid $victim) was killed by signal 9.*shard 1 at tcp://127.0.0.1:" "$tmp/launch.log" \
    || fail "the launcher's log does not name the dead shard and its endpoint"
  launched_children_reaped "$tmp/launch.log" 'server\|worker'
  pids=()
  echo "launcher exited $rc ${took} ms after server 1 was killed"
  ;;
by_hand_kill)
  flags+=(--num_servers=3 --num_workers=4)
  start_servers 3
  start_workers 4
  wait_log "$tmp/worker0.log" "epoch 1/200" 600
  kill -9 "$(inner "${server_pids[1]}")"
  t0=$(now_ms)
  end=$((t0 + 30000))
  survivors=("${wpid[@]}" "${server_pids[0]}" "${server_pids[2]}")
  for p in "${survivors[@]}"; do
    left=$((end - $(now_ms)))
    ((left > 0)) && exits_within "$p" "$left" || fail "process $p still runs 30 s after server 1 was killed"
  done
  took=$(($(now_ms) - t0))
  for r in 0 1 2 3; do
    wait_code "${wpid[$r]}"
    [ "$rc" != 0 ] || fail "worker $r exited 0"
  done
  for s in 0 2; do
    wait_code "${server_pids[$s]}"
    [ "$rc" != 0 ] || fail "server $s exited 0"
    grep -q "job aborted: worker [0-9] failed" "$tmp/server$s.log" || fail "server $s logged no ABORT"
  done
  wait "${server_pids[1]}" 2>/dev/null || true
  pids=()
  ep1=$(cat "$tmp/s1.port")
  grep -q "server shard 1 at $ep1 is gone: " "$tmp"/worker*.log \
    || fail "no worker named the gone shard and its endpoint"
  echo "every process exited non-zero within ${took} ms of the kill"
  grep -h "is gone" "$tmp"/worker*.log | head -1
  ;;
stop_signals)
  start_servers 2
  start_workers 2
  wait_log "$tmp/worker1.log" "epoch 1/200" 600
  # (1) SIGTERM to a training worker.
  stop_within "${wpid[1]}" "worker 1" 2000
  for s in 0 1; do wait_log "$tmp/server$s.log" "worker 1 left" 100; done
  echo "both servers logged worker 1's goodbye"
  # (2) A stalled server, and SIGTERM to the worker blocked on it.
  kill -STOP "$(inner "${server_pids[1]}")"
  stop_within "${wpid[0]}" "worker 0 (server 1 stalled)" 2500
  expect_exit "${server_pids[0]}" 0 5000 "server 0 (every worker said BYE)"
  grep -q "worker 0 left" "$tmp/server0.log" || fail "server 0 did not log worker 0's goodbye"
  # (3) SIGTERM to a server (delivered when it resumes).
  kill -TERM "$(inner "${server_pids[1]}")"
  kill -CONT "$(inner "${server_pids[1]}")"
  expect_exit "${server_pids[1]}" 143 2000 "server 1 (SIGTERM)"
  pids=()
  echo "server 1: exit 143 ${took} ms after SIGTERM"
  ;;
stalled_server)
  # The worker's exit (see above) reaches the stopped server only if its
  # ABORT was queued before it left: otherwise the server learns of it from
  # its silence (cluster.worker_timeout_ms, 2 s here), and its SIGTERM's
  # stop then ends at once, as every worker is gone.
  flags+=(--num_servers=1 --num_workers=1 --liveness_timeout_ms=1000 --worker_timeout_ms=2000)
  start_servers 1
  start_workers 1
  wait_log "$tmp/worker0.log" "epoch 1/200" 600
  kill -STOP "$(inner "${server_pids[0]}")"
  expect_exit "${wpid[0]}" 1 10000 "worker 0 (its server stopped)"
  grep -q "server shard 0 at $(cat "$tmp/s0.port") is gone: " "$tmp/worker0.log" \
    || fail "worker 0 did not name the gone shard"
  kill -TERM "$(inner "${server_pids[0]}")"
  kill -CONT "$(inner "${server_pids[0]}")"
  exits_within "${server_pids[0]}" 5000 || fail "server 0 still runs after SIGTERM"
  wait "${server_pids[0]}" 2>/dev/null || true
  pids=()
  echo "worker 0 gave its stopped server up after ${took} ms (liveness 1000 ms)"
  ;;
*)
  echo "unknown mode $mode"
  exit 2
  ;;
esac
