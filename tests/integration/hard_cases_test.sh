#!/usr/bin/env bash
# Second-round hard cases through the real binaries (cases in
# ../shared/cases, copies in tests/data/cases/). Usage: hard_cases_test.sh MODE BIN_DIR
#   c21_ties   a model that scores every label alike (zero init, unlabeled
#              training rows) gets the same P@1 on two test files that differ
#              only in the true label's number: the expected value under a
#              random order of the ties, with one warning counting the rows
# Every process runs under `timeout`; everything is written under one mktemp dir.
set -euo pipefail
mode=$1
bin=$(cd "$2" && pwd)
cases=tests/data/cases
tmp=$(mktemp -d)
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# json FILE KEY: the value of a top-level key of a metrics JSON.
json() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }

case "$mode" in
c21_ties)
  for f in test_label0_everywhere test_label7_everywhere; do
    timeout 60 "$bin/tether-launch" --config "$cases/C21/const_model.pbtxt" --transport=inproc \
      --test_file="$cases/C21/$f.txt" --metrics_out "$tmp/$f.json" > "$tmp/$f.log" 2>&1 ||
      fail "$f: exit $?:"$'\n'"$(cat "$tmp/$f.log")"
    # 4 rows, each with 2 true labels among 8 tied ones: P@1 = 2/8.
    p1=$(json "$tmp/$f.json" precision_at_1)
    python3 -c "import sys; sys.exit(abs($p1 - 0.25) > 1e-12)" || fail "$f: precision_at_1 $p1, expected 0.25"
    p5=$(json "$tmp/$f.json" precision_at_5)
    python3 -c "import sys; sys.exit(abs($p5 - 0.25) > 1e-12)" || fail "$f: precision_at_5 $p5, expected 0.25"
    [ "$(grep -c "evaluation: 4 of 4 test rows have tied scores" "$tmp/$f.log")" = 1 ] ||
      fail "$f: no single tie warning:"$'\n'"$(cat "$tmp/$f.log")"
    echo "ok   C21 $f: P@1 = P@5 = 0.25, tie warning for 4 of 4 rows"
  done
  ;;
*)
  fail "unknown mode $mode"
  ;;
esac
