#!/usr/bin/env bash
# What a person sees on the console of the quick start's job:
#   tether-launch --config examples/bibtex.pbtxt --metrics_out m.json
# (2 servers, 2 workers, the example's epochs), run RUNS times (default 5, first
# argument): the first run as written, the others with --epochs=2 (what
# can differ from run to run, the start and the end of the job and the
# lines around them, at a sixth of the training). Each run must exit 0
# and print, stdout and stderr together:
#   - at most 45 lines besides the workers' epoch lines (one per worker
#     and epoch: twice the example's epochs more in the first run);
#   - no WARNING (glog "W" lines or the word): a connection that closes
#     because the job ended is no warning;
#   - the config in force once, in one line;
#   - each server's "listening on" once and each worker's "epoch N/E" line
#     for every epoch (the lines scripts wait on);
#   - no metrics JSON (it stays in the file), and as the last line the
#     summary naming P@1, the train time and the metrics file.
# The first run's metrics file has P@1 >= 0.55 (the quick start's gate).
# Usage: console_test.sh RUNS BIN_DIR
set -euo pipefail
# tmp, pids and their cleanup; fail.
source "$(dirname "$0")/lib.sh"
runs=$1
tether_test_init console "$2"
# train.epochs of examples/bibtex.pbtxt
example_epochs=$(sed -n 's/^ *epochs: *\([0-9][0-9]*\).*/\1/p' examples/bibtex.pbtxt | head -n 1)
[ -n "$example_epochs" ] || fail "no train.epochs line in examples/bibtex.pbtxt"
for i in $(seq 1 "$runs"); do
  out="$tmp/run$i.log"
  epochs=$example_epochs
  more=()
  [ "$i" = 1 ] || { epochs=2; more=(--epochs=$epochs); }
  timeout -k 5 300 "$bin/tether-launch" --config examples/bibtex.pbtxt "${more[@]}" --metrics_out "$tmp/m$i.json" \
    > "$out" 2>&1 || fail "run $i: tether-launch exited $?"
  lines=$(wc -l < "$out")
  other=$(grep -vc "\] epoch [0-9]*/$epochs clock " "$out" || true)
  [ "$other" -le 45 ] || { cat "$out"; fail "run $i: $other lines on the console besides the epoch lines (at most 45)"; }
  ! grep -nE "^W[0-9]{4} |WARNING" "$out" || fail "run $i: a warning on a successful run"
  [ "$(grep -c "config in force" "$out")" = 1 ] || fail "run $i: the config in force not logged exactly once"
  grep -q "\[launch\] config in force (examples/bibtex.pbtxt[^)]*): bibtex: XMC_MLP" "$out" ||
    fail "run $i: the launcher did not log the config in force in one line"
  for s in 0 1; do
    [ "$(grep -c "\[server $s\] listening on tcp://127.0.0.1:" "$out")" = 1 ] || fail "run $i: server $s's listening line"
  done
  for w in 0 1; do
    for e in $(seq 1 "$epochs"); do
      grep -q "\[worker $w\] epoch $e/$epochs clock" "$out" || fail "run $i: no 'epoch $e/$epochs' line from worker $w"
    done
  done
  ! grep -q '"precision_at_1"' "$out" || fail "run $i: the metrics JSON was printed"
  last=$(tail -n 1 "$out")
  [[ "$last" =~ ^tether-launch:\ job\ finished:\ P@1\ 0\.[0-9]{4},.*train\ [0-9.]+\ s,.*\;\ metrics\ in\ .*/m$i\.json$ ]] ||
    fail "run $i: the last line is not the summary naming P@1, the train time and the file: $last"
  echo "run $i: $lines lines; $last"
done
gate "$(metric "$tmp/m1.json" precision_at_1)" 0.55 "P@1 (the quick start: tether-launch, 2 servers, 2 workers)" ||
  fail "the quick start's P@1 is below its gate"
# --print_metrics prints the file's JSON before the summary line (2 epochs: what
# is checked is where the JSON goes).
timeout -k 5 300 "$bin/tether-launch" --config examples/bibtex.pbtxt --workers 1 --servers 1 --epochs=2 \
  --print_metrics --metrics_out "$tmp/p.json" > "$tmp/print.log" 2>&1 || fail "--print_metrics: tether-launch exited $?"
grep -q "^  \"precision_at_1\": 0\.[0-9]*,$" "$tmp/print.log" || fail "--print_metrics printed no JSON"
grep -q "^tether-launch: job finished: P@1 " <<< "$(tail -n 1 "$tmp/print.log")" || fail "--print_metrics: the summary is not last"
echo "PASS"
