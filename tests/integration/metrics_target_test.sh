#!/usr/bin/env bash
# --metrics_sd_file is withdrawn however the process ends (docs/METRICS.md,
# the --metrics_sd_file row), with real processes on 127.0.0.1 and the bundled
# Bibtex data.
# Usage: metrics_target_test.sh MODE BIN_DIR
#   server_stopped  a tether-server serving /metrics, its --metrics_sd_file a
#                   regular file: SIGTERM before any worker joins; exit 143
#                   and the file is gone.
#   worker_stopped  a worker training (200 epochs) whose --metrics_sd_file is
#                   a link to a file: SIGTERM mid-training; exit 143, the link
#                   kept and its target's list emptied to [].
# No fixed sleeps: every wait polls with a bound; every process runs under
# `timeout` and is killed on exit.
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"
limit_s=60
flags=(--config=tests/data/bibtex_fixed.pbtxt --epochs=200 --num_servers=1 --num_workers=1)

has_target() { grep -q '"targets"' "$1" 2>/dev/null; }

case "$mode" in
server_stopped)
  start_servers 1 --metrics_port=0 --metrics_linger_s=0 --metrics_sd_file="$tmp/s0.json"
  wait_until 20 "target file from server 0" has_target "$tmp/s0.json"
  stop_within "${server_pids[0]}" "server 0" 5000
  [ ! -e "$tmp/s0.json" ] || fail "server 0's --metrics_sd_file is still there: $(cat "$tmp/s0.json")"
  ;;
worker_stopped)
  echo '[]' > "$tmp/target.json"
  ln -s "$tmp/target.json" "$tmp/w0.json"
  start_servers 1
  start_worker 0 "$tmp/worker0.log" --metrics_port=0 --metrics_linger_s=0 --metrics_sd_file="$tmp/w0.json"
  w0=$started
  wait_log "$tmp/worker0.log" "epoch 1/200" 600
  has_target "$tmp/target.json" || fail "worker 0 did not write its target through the link: $(cat "$tmp/target.json")"
  stop_within "$w0" "worker 0" 5000
  [ -L "$tmp/w0.json" ] || fail "the --metrics_sd_file link was not kept: $(ls -l "$tmp")"
  [ "$(tr -d ' \n' < "$tmp/target.json")" = "[]" ] \
    || fail "worker 0's target was not withdrawn: $(cat "$tmp/target.json")"
  kill -TERM "$(inner "${server_pids[0]}")" 2>/dev/null || true
  wait "${server_pids[0]}" 2>/dev/null || true
  ;;
*)
  fail "unknown mode $mode"
  ;;
esac
pids=()
echo "PASS: $mode"
