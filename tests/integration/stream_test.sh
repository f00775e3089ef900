#!/usr/bin/env bash
# Many files, streamed. Bibtex's training split is cut
# into three files (two plain, one gzip) under $TMPDIR:
#   1. in memory, one worker: the three files (a glob, relative to the
#      config's folder, run from another directory) train bit for bit like
#      the one file they were cut from;
#   2. streamed, one worker, one file in one block: bit for bit like (1);
#   3. streamed, 2 servers, 2 workers, 3 files in blocks of 500 rows: the
#      workers' epoch_rows sum to 4880 exactly in every epoch, and P@1 is
#      within 0.03 of (1);
#   4. a pattern that matches nothing stops tether-launch before any
#      process starts, naming the pattern and the folder it looked in.
# Usage: stream_test.sh BIN_DIR   (run from the repository root)
set -euo pipefail
bin=$(cd "$1" && pwd)
root=$PWD
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# bibtex_parts; this test keeps its own fail and metric (below).
source "$(dirname "$0")/lib.sh"
fail() { echo "FAIL: $*"; exit 1; }
metric() {  # metric FILE KEY
  python3 -c 'import json,sys; print(repr(json.load(open(sys.argv[1]))[sys.argv[2]]))' "$1" "$2"
}

# The split's rows as XMC files, the training rows cut into three parts
# (bibtex_parts, lib.sh).
mkdir -p "$tmp/data" "$tmp/cfg" "$tmp/elsewhere"
bibtex_parts "$tmp"

# Configs in $tmp/cfg with paths relative to it.
config() {  # config NAME TRAIN_FILE STREAMING BLOCK_ROWS
  sed -e "s#train_file: .*#train_file: \"$2\"#" -e "s#test_file: .*#test_file: \"../data/test.txt\"#" \
      -e "/train_split:/d" -e "/test_split:/d" \
      -e "s#^  num_labels: 159#  num_labels: 159\n  streaming: $3\n  shuffle_buffer_rows: $4#" \
      tests/data/bibtex_fixed.pbtxt > "$tmp/cfg/$1.pbtxt"
}
config one ../data/train.txt false 65536
config list "../data/part-*" false 65536
config stream_one ../data/train.txt true 100000
config stream "../data/part-0.txt, ../data/part-[12]*" true 500
run() {  # run NAME WORKERS SERVERS
  (cd "$tmp/elsewhere" && timeout -k 5 120 "$bin/tether-launch" --config "$tmp/cfg/$1.pbtxt" --servers "$3" \
     --workers "$2" --epochs=3 --seed=7 --metrics_out "$tmp/$1.json" > "$tmp/$1.log" 2>&1) ||
    { tail -20 "$tmp/$1.log"; fail "$1 job"; }
}
run one 1 2
run list 1 2
run stream_one 1 2
for k in precision_at_1 precision_at_3 ndcg_at_5 final_loss total_samples; do
  a=$(metric "$tmp/one.json" $k); b=$(metric "$tmp/list.json" $k); c=$(metric "$tmp/stream_one.json" $k)
  echo "$k: one file $a, 3 files in memory $b, one file streamed $c"
  [ "$a" = "$b" ] && [ "$a" = "$c" ] || fail "$k differs"
done
[ "$(metric "$tmp/one.json" total_samples)" = 14640 ] || fail "expected 3 x 4880 samples"

run stream 2 2
python3 - "$tmp/stream.json" "$tmp/one.json" <<'PY' || fail "streamed job's counts or P@1"
import json, sys
s, one = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
per_worker = [w["epoch_rows"] for w in s["workers"]]
print("streamed epoch_rows per worker:", per_worker)
assert all(len(r) == 3 for r in per_worker), per_worker
for e in range(3):
    total = sum(r[e] for r in per_worker)
    assert total == 4880, f"epoch {e + 1}: {total} rows read, expected 4880"
assert all(min(r) > 0 for r in per_worker), "a worker read nothing"
p1, p1_one = s["precision_at_1"], one["precision_at_1"]
print(f"P@1 streamed, 2 workers: {p1:.4f}; one file in memory, 1 worker: {p1_one:.4f}")
assert abs(p1 - p1_one) <= 0.03, (p1, p1_one)
PY
grep -q "streamed 2880 rows\|streamed 2000 rows\|rows per piece" "$tmp/stream.log" || fail "no per-piece counts logged"

# A pattern that matches nothing: refused before any process starts.
config nomatch "../data/nothing-*.gz" true 500
rc=0
out=$(cd "$tmp/elsewhere" && timeout 30 "$bin/tether-launch" --config "$tmp/cfg/nomatch.pbtxt" --servers 1 \
        --workers 1 2>&1) || rc=$?
[ "$rc" != 0 ] || fail "a pattern matching nothing exited 0"
grep -q "config field data.train_file: the pattern '$tmp/data/nothing-\*.gz' matches no file (looked in $tmp/data)" \
  <<<"$out" || fail "no-match message: $out"
! grep -q "started\|server 0" <<<"$out" || fail "processes started: $out"
echo "PASS"
