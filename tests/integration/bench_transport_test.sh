#!/usr/bin/env bash
# tether-bench transport (docs/PERFORMANCE.md) and its --curve mode run
# their documented commands on small cells and print one table row per
# cell: servers × keys × dims × {pull, push}, each with at least the asked
# repetitions and a positive time on both sides. Functional only: no time
# is asserted. It guards the commands themselves: every cell was once
# refused at start-up (a key space of 2^40 rows did not fit the server's
# memory check); a request cut into 1,024 messages (--chunk_bytes=16384)
# must complete on both sides. Usage: bench_transport_test.sh BIN_DIR
source "$(dirname "$0")/lib.sh"
tether_test_init transport "$1"
fail_lines=5
TMPDIR=$tmp timeout -k 5 120 "$bin/tether-bench" transport --keys=100,1000 --dims=1,4 --servers=1,2 \
  --min_reps=2 --min_time_s=0 > "$tmp/plain.out" 2> "$tmp/plain.log" || fail "tether-bench transport failed"
# | servers | keys | dim | op | reps | Tether p50 ms | ... | raw p50 ms | raw GB/s | ratio |
rows=$(awk -F'|' '$2 ~ /^ *[0-9]+ *$/ && $6 >= 2 && $7 > 0 && $11 > 0 { n++ } END { print n + 0 }' "$tmp/plain.out")
echo "transport: $rows of 16 cells measured"
[ "$rows" = 16 ] || { cat "$tmp/plain.out"; fail "expected 16 measured cells, got $rows"; }
# Small messages: a 16 MiB request in 1,024 messages of 16 KiB each, more
# than a ZeroMQ queue's default high-water mark; every reply must come
# (the raw baseline once waited forever for replies its ROUTER dropped).
TMPDIR=$tmp timeout -k 5 60 "$bin/tether-bench" transport --keys=1024 --dims=4096 --servers=1 --chunk_bytes=16384 \
  --min_reps=2 --min_time_s=0 > "$tmp/small.out" 2> "$tmp/small.log" || fail "tether-bench transport --chunk_bytes=16384 failed"
rows=$(awk -F'|' '$2 ~ /^ *[0-9]+ *$/ && $6 >= 2 && $7 > 0 && $11 > 0 { n++ } END { print n + 0 }' "$tmp/small.out")
echo "transport --chunk_bytes=16384: $rows of 2 cells measured"
[ "$rows" = 2 ] || { cat "$tmp/small.out"; fail "expected 2 measured cells, got $rows"; }
TMPDIR=$tmp timeout -k 5 120 "$bin/tether-bench" transport --curve --shapes=100x1,1000x4 --servers=1 \
  --min_reps=2 --min_time_s=0 > "$tmp/curve.out" 2> "$tmp/curve.log" || fail "tether-bench transport --curve failed"
# | servers | keys | dim | op | reps | off p50 ms | off GB/s | on p50 ms | on GB/s | on/off |
rows=$(awk -F'|' '$2 ~ /^ *[0-9]+ *$/ && $6 >= 2 && $7 > 0 && $9 > 0 { n++ } END { print n + 0 }' "$tmp/curve.out")
echo "transport --curve: $rows of 4 cells measured"
[ "$rows" = 4 ] || { cat "$tmp/curve.out"; fail "expected 4 measured cells, got $rows"; }
