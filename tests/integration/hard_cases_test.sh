#!/usr/bin/env bash
# Hard cases C21, C24, C25 through the real binaries (cases in
# tests/data/cases/). Usage: hard_cases_test.sh MODE BIN_DIR
#   c21_ties   a model that scores every label alike (zero init, unlabeled
#              training rows) gets the same P@1 on two test files that differ
#              only in the true label's number: the expected value under a
#              random order of the ties, with one warning counting the rows
#   c24_divergence  Bibtex (one worker) with SGD at learning rate 100 (the case): the loss
#              diverges without a NaN; a warning names the epoch and the values,
#              the metrics JSON says "diverged": true, and the job exits 3
#              by default (metrics still written); with --nofail_on_divergence
#              it exits 0 and the metrics say "accepted": ["diverged"]; the
#              same job at the example's settings is not marked
#   c25_closed_pipe  tether-launch ... 2>&1 | head -3 (the case): the closed
#              pipe does not stop the job; exit 0, the metrics are written, and
#              the launcher's temp folder is gone
#   c25_dead_launcher  a launcher killed with SIGKILL leaves its temp folder;
#              the next start removes it (keyed by the dead owner's pid)
# Every process runs under `timeout`; everything is written under one mktemp dir.
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"
cases=tests/data/cases

case "$mode" in
c21_ties)
  for f in test_label0_everywhere test_label7_everywhere; do
    timeout 60 "$bin/tether-launch" --config "$cases/C21/const_model.pbtxt" --transport=inproc \
      --test_file="$cases/C21/$f.txt" --metrics_out "$tmp/$f.json" > "$tmp/$f.log" 2>&1 ||
      fail "$f: exit $?:"$'\n'"$(cat "$tmp/$f.log")"
    # 4 rows, each with 2 true labels among 8 tied ones: P@1 = 2/8.
    p1=$(metric "$tmp/$f.json" precision_at_1)
    python3 -c "import sys; sys.exit(abs($p1 - 0.25) > 1e-12)" || fail "$f: precision_at_1 $p1, expected 0.25"
    p5=$(metric "$tmp/$f.json" precision_at_5)
    python3 -c "import sys; sys.exit(abs($p5 - 0.25) > 1e-12)" || fail "$f: precision_at_5 $p5, expected 0.25"
    [ "$(grep -c "evaluation: 4 of 4 test rows have tied scores" "$tmp/$f.log")" = 1 ] ||
      fail "$f: no single tie warning:"$'\n'"$(cat "$tmp/$f.log")"
    echo "ok   C21 $f: P@1 = P@5 = 0.25, tie warning for 4 of 4 rows"
  done
  ;;
c24_divergence)
  # One worker: its first minibatch is the untrained model's whatever the
  # machine's load (with two, the other's first push at learning rate 100
  # may land before it, and the reference the warning names moves).
  run() {  # run NAME WANT_RC ARGS...: tether-launch on Bibtex, 2 epochs, in one process
    local name=$1 want=$2 rc=0
    shift 2
    timeout 120 "$bin/tether-launch" --config tests/data/bibtex_fixed.pbtxt --transport=inproc --epochs=2 --workers=1 \
      --metrics_out "$tmp/$name.json" "$@" > "$tmp/$name.log" 2>&1 || rc=$?
    [ "$rc" = "$want" ] || fail "$name: exit $rc (expected $want):"$'\n'"$(tail -20 "$tmp/$name.log")"
    [ -s "$tmp/$name.json" ] || fail "$name: no metrics written"
  }
  run sane 0
  [ "$(metric "$tmp/sane.json" diverged)" = False ] || fail "sane run marked diverged"
  [ "$(metric "$tmp/sane.json" diverged_at_epoch)" = 0 ] || fail "sane run: diverged_at_epoch is not 0"
  ! grep -q "training diverged" "$tmp/sane.log" || fail "sane run warned of divergence"
  echo "ok   C24 example settings: not diverged"
  run warn 3 --optimizer=sgd --learning_rate=100
  [ "$(metric "$tmp/warn.json" diverged)" = True ] || fail "lr 100: not marked diverged"
  [ "$(metric "$tmp/warn.json" diverged_at_epoch)" = 1 ] || fail "lr 100: diverged_at_epoch $(metric "$tmp/warn.json" diverged_at_epoch)"
  grep -qE "W.*\[worker 0\] training diverged at epoch 1: mean loss [0-9.e+]+ is above train.divergence_factor 10 x 5\.[0-9]+ \(the larger of the first minibatch's loss 5\.[0-9]+ and log\(159\) = 5\.0689\)" \
    "$tmp/warn.log" || fail "lr 100: no divergence warning naming the epoch and values:"$'\n'"$(grep -i diverg "$tmp/warn.log")"
  grep -qF "training diverged at epoch 1: exit 3 (accept a diverged run with --nofail_on_divergence" "$tmp/warn.log" ||
    fail "lr 100: the worker did not say why it exits 3"
  grep -qF "training loss diverged" "$tmp/warn.log" || fail "lr 100: launcher did not say why"
  echo "ok   C24 lr 100: warned, marked diverged at epoch 1, exit 3 by default"
  run accepted 0 --optimizer=sgd --learning_rate=100 --nofail_on_divergence
  [ "$(metric "$tmp/accepted.json" accepted)" = "['diverged']" ] ||
    fail "--nofail_on_divergence: the metrics do not say the divergence was accepted"
  grep -qF 'accepted by the job'"'"'s config: ["diverged"]' "$tmp/accepted.log" ||
    fail "--nofail_on_divergence: the launcher did not repeat what was accepted"
  echo "ok   C24 --nofail_on_divergence: exit 0, \"accepted\": [\"diverged\"]"
  # Without --metrics_out the exit code is the same.
  rc=0
  timeout 120 "$bin/tether-launch" --config tests/data/bibtex_fixed.pbtxt --transport=inproc --epochs=2 --workers=1 \
    --optimizer=sgd --learning_rate=100 > "$tmp/nometrics.log" 2>&1 || rc=$?
  [ "$rc" = 3 ] || fail "diverged run without --metrics_out exited $rc, expected 3"
  run fail 3 --optimizer=sgd --learning_rate=100 --fail_on_divergence=true
  [ "$(metric "$tmp/fail.json" diverged)" = True ] || fail "fail_on_divergence: metrics not marked"
  grep -qF "training loss diverged" "$tmp/fail.log" || fail "fail_on_divergence: launcher did not say why"
  echo "ok   C24 --fail_on_divergence=true: exit 3, metrics written and marked"
  ;;
c25_closed_pipe)
  export TMPDIR=$tmp/t
  mkdir "$TMPDIR"
  rc=0
  timeout 120 "$bin/tether-launch" --config tests/data/bibtex_fixed.pbtxt --epochs=2 --timeout_s=100 \
    --metrics_out "$tmp/m.json" 2>&1 | head -3 > "$tmp/head.txt" || true
  rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || fail "closed pipe: tether-launch exit $rc (expected 0; 141 is SIGPIPE)"
  [ "$(wc -l < "$tmp/head.txt")" = 3 ] || fail "head did not get its 3 lines"
  p1=$(metric "$tmp/m.json" precision_at_1) || fail "no metrics JSON written"
  python3 -c "import sys; sys.exit(not $p1 > 0.4)" || fail "precision_at_1 $p1"
  [ -z "$(ls -A "$TMPDIR")" ] || fail "temp state left: $(ls -A "$TMPDIR")"
  echo "ok   C25 | head -3: exit 0, metrics written (P@1 $p1), no temp state left"
  ;;
c25_dead_launcher)
  export TMPDIR=$tmp/t
  mkdir "$TMPDIR"
  # Started directly (not under `timeout`) so that $! is the launcher itself;
  # --timeout_s bounds it, and the EXIT trap kills it if the test fails early.
  "$bin/tether-launch" --config tests/data/bibtex_fixed.pbtxt --transport=inproc --epochs=100000 \
    --timeout_s=90 > "$tmp/long.log" 2>&1 &
  lp=$!
  pids+=("$lp")
  # Poll (bounded) until it owns its temp folder and has started its child.
  owns_and_started() {
    compgen -G "$TMPDIR/tether-launch.$lp.*/owner" > /dev/null && grep -q "started worker 0 (pid" "$tmp/long.log"
  }
  poll 400 owns_and_started || true
  compgen -G "$TMPDIR/tether-launch.$lp.*/owner" > /dev/null || { kill -9 "$lp"; fail "no temp folder for pid $lp"; }
  child=$(sed -n 's/.*started worker 0 (pid \([0-9]*\)).*/\1/p' "$tmp/long.log" | head -1)
  kill -9 "$lp"
  wait "$lp" 2>/dev/null || true
  # Its child dies with it (PR_SET_PDEATHSIG); bounded wait, then make sure.
  if [ -n "$child" ]; then
    poll 200 gone "$child" || true
    if kill -0 "$child" 2>/dev/null; then kill -9 "$child"; fail "child $child outlived its launcher"; fi
  fi
  left=$(compgen -G "$TMPDIR/tether-launch.$lp.*") || fail "the killed launcher left nothing to clean (test is moot)"
  timeout 100 "$bin/tether-launch" --config tests/data/bibtex_fixed.pbtxt --transport=inproc --epochs=1 --timeout_s=90 \
    > "$tmp/next.log" 2>&1 || fail "next start: exit $?:"$'\n'"$(tail -20 "$tmp/next.log")"
  grep -qF "removed $left, left by launcher pid $lp, which is gone" "$tmp/next.log" ||
    fail "next start did not say it removed $left:"$'\n'"$(grep launch "$tmp/next.log" | head)"
  [ -z "$(ls -A "$TMPDIR")" ] || fail "temp state left: $(ls -A "$TMPDIR")"
  echo "ok   C25 SIGKILLed launcher's $left removed by the next start"
  ;;
*)
  fail "unknown mode $mode"
  ;;
esac
