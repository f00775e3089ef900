#!/usr/bin/env bash
# The metrics JSON of a job whose server process is killed while training
# (docs/ERRORS.md, "Exit codes"), with real processes on 127.0.0.1 and the
# bundled Bibtex data (200 epochs, so the kill lands mid-training).
# Usage: failure_metrics_test.sh MODE BIN_DIR
#   launch   tether-launch, 1 server + 1 worker, --metrics_out; SIGKILL the
#            server once training runs: exit 1, and the metrics JSON holds
#            exactly "exit_code": 1 and "failure" naming the server, its pid,
#            its signal and its shard's endpoint (no worker wrote one: the
#            launcher stopped it). The next tether-launch with that
#            --metrics_out takes the file for an earlier run's (--check_config
#            exits 0).
#   launch_stopped  2 servers + 2 workers under tether-launch
#            (--liveness_timeout_ms=1000); SIGSTOP to server 1 once training
#            runs: exit 1, and "failure" names shard 1 as lost on its stopped
#            server, not server 0, which exits 1 on the workers' abort.
#   launch_worker_stopped  2 servers + 2 workers under tether-launch
#            (--worker_timeout_ms=3000, 20 epochs); SIGSTOP to worker 1
#            once training runs: the servers remove it for silence, worker
#            0 trains on to the end and fails the job (worker 1 left), the
#            servers exit 1 on its ABORT; exit 1, and the launcher names
#            worker 1, its pid, as stopped (SIGSTOP) on its last line, not a
#            server; the metrics JSON keeps the evaluator's own "failure".
#   by_hand  the same job started by hand (worker 0 with --metrics_out,
#            --liveness_timeout_ms=1000): worker 0 exits 1 naming the gone
#            shard, and writes no metrics JSON.
# No fixed sleeps: every wait polls with a bound; every process runs under
# `timeout` and is killed on exit.
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"
limit_s=60

job=(--config=tests/data/bibtex_fixed.pbtxt --epochs=200 --staleness=2)

case "$mode" in
launch)
  timeout -k 5 60 "$bin/tether-launch" "${job[@]}" --servers 1 --workers 1 --metrics_out="$tmp/m.json" \
    > "$tmp/launch.log" 2>&1 &
  launcher=$!
  pids+=($launcher)
  wait_log "$tmp/launch.log" "epoch 1/200" 600
  victim=$(sed -n 's/.*\[launch\] started server 0 (pid \([0-9]*\)).*/\1/p' "$tmp/launch.log")
  [ -n "$victim" ] || fail "no pid for server 0 in the launcher's log"
  kill -9 "$victim"
  expect_exit "$launcher" 1 20000 "tether-launch (server 0 killed)"
  launched_children_reaped "$tmp/launch.log" 'server\|worker'
  pids=()
  [ -f "$tmp/m.json" ] || fail "no metrics JSON at --metrics_out"
  python3 - "$tmp/m.json" "$victim" <<'PY' || fail "metrics JSON: $(cat "$tmp/m.json")"
import json, re, sys
j = json.load(open(sys.argv[1]))
assert sorted(j) == ["exit_code", "failure"], sorted(j)
assert j["exit_code"] == 1, j["exit_code"]
want = rf"server 0 \(pid {sys.argv[2]}\) was killed by signal 9 \(Killed\); it was shard 0 at tcp://127\.0\.0\.1:[0-9]+"
assert re.fullmatch(want, j["failure"]), j["failure"]
print("failure:", j["failure"])
PY
  grep -q "\[launch\] $tmp/m.json: no metrics were written; it holds the job's failure" "$tmp/launch.log" \
    || fail "the launcher did not log the failure it wrote"
  timeout -k 5 30 "$bin/tether-launch" "${job[@]}" --servers 1 --workers 1 --metrics_out="$tmp/m.json" \
    --check_config > "$tmp/check.log" 2>&1 || fail "tether-launch --check_config refused the failed job's record: $?"
  ;;
launch_stopped)
  timeout -k 5 60 "$bin/tether-launch" "${job[@]}" --servers 2 --workers 2 --liveness_timeout_ms=1000 \
    --metrics_out="$tmp/m.json" > "$tmp/launch.log" 2>&1 &
  launcher=$!
  pids+=($launcher)
  wait_log "$tmp/launch.log" "epoch 1/200" 600
  victim=$(sed -n 's/.*\[launch\] started server 1 (pid \([0-9]*\)).*/\1/p' "$tmp/launch.log")
  [ -n "$victim" ] || fail "no pid for server 1 in the launcher's log"
  kill -STOP "$victim"
  expect_exit "$launcher" 1 30000 "tether-launch (server 1 stopped)"
  launched_children_reaped "$tmp/launch.log" 'server\|worker'
  pids=()
  python3 - "$tmp/m.json" <<'PY' || fail "metrics JSON: $(cat "$tmp/m.json" 2>&1)"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["exit_code"] == 1, j["exit_code"]
want = "shard 1 is lost: every server process left that holds it (1) is stopped (SIGSTOP)"
assert j["failure"] == want, j["failure"]
print("failure:", j["failure"])
PY
  ;;
launch_worker_stopped)
  timeout -k 5 60 "$bin/tether-launch" "${job[@]}" --epochs=20 --servers 2 --workers 2 --worker_timeout_ms=3000 \
    --metrics_out="$tmp/m.json" > "$tmp/launch.log" 2>&1 &
  launcher=$!
  pids+=($launcher)
  wait_log "$tmp/launch.log" "epoch 1/20" 600
  victim=$(sed -n 's/.*\[launch\] started worker 1 (pid \([0-9]*\)).*/\1/p' "$tmp/launch.log")
  [ -n "$victim" ] || fail "no pid for worker 1 in the launcher's log"
  kill -STOP "$victim"
  expect_exit "$launcher" 1 30000 "tether-launch (worker 1 stopped)"
  launched_children_reaped "$tmp/launch.log" 'server\|worker'
  pids=()
  want="worker 1 (pid $victim) is stopped (SIGSTOP, state T): the servers removed it for silence"
  grep -qF "[launch] $want" "$tmp/launch.log" || fail "the launcher did not name the stopped worker"
  grep -qE "job failed after [0-9:]+ \(exit code 1\): worker 1 \(pid $victim\) is stopped \(SIGSTOP\)$" \
    "$tmp/launch.log" || fail "the launcher's last line does not name the stopped worker"
  if grep -qE "job failed .*: server [01] " "$tmp/launch.log"; then fail "the launcher blamed a server"; fi
  python3 - "$tmp/m.json" <<'PY' || fail "metrics JSON: $(cat "$tmp/m.json" 2>&1)"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["exit_code"] == 1, j["exit_code"]
assert j["failure"] == ("the job did not finish: worker(s) 1 left before the end of training, so their rows were "
                        "not all trained (with checkpoint.dir set, a resume trains what they left)"), j["failure"]
print("failure:", j["failure"])
PY
  ;;
by_hand)
  flags=("${job[@]}" --num_servers=1 --num_workers=1 --liveness_timeout_ms=1000)
  start_servers 1
  start_worker 0 "$tmp/worker0.log" --metrics_out="$tmp/m.json"
  w0=$started
  wait_log "$tmp/worker0.log" "epoch 1/200" 600
  kill -9 "$(inner "${server_pids[0]}")"
  expect_exit "$w0" 1 10000 "worker 0 (server 0 killed)"
  wait "${server_pids[0]}" 2>/dev/null || true
  pids=()
  grep -q "server shard 0 at $(cat "$tmp/s0.port") is gone: " "$tmp/worker0.log" \
    || fail "worker 0 did not name the gone shard"
  [ ! -e "$tmp/m.json" ] || fail "worker 0 wrote a metrics JSON: $(cat "$tmp/m.json")"
  echo "worker 0 exited 1 ${took} ms after the kill, no metrics JSON"
  ;;
*)
  echo "unknown mode $mode"
  exit 2
  ;;
esac
