#!/usr/bin/env bash
# Benchmark of many files, streamed (data.streaming): a
# synthetic XMC training set of about 2 GB uncompressed, in 64 gzip files,
# trains with data.streaming; each worker's peak RSS is measured with
# /usr/bin/time -v, and the workers' rows per epoch must sum to the set's
# rows exactly. Generated under a temporary folder, removed at the end;
# nothing is committed. Not a ctest (minutes, GBs of disk).
#
# Usage: scripts/bench_stream.sh [BUILD_BIN_DIR]   (from the repository root)
# Environment: ROWS (default 2240000, ~2.1 GB), FILES (64), WORKERS (2),
#   EPOCHS (1), HIDDEN (8), BLOCK_ROWS (65536), TMPDIR (where the data goes),
#   DATA_DIR (reuse DATA_DIR/parts/*.txt.gz and DATA_DIR/set.test.txt instead
#   of generating).
# Prints a table: per process, peak RSS and time; rows per epoch per worker.
set -euo pipefail
bin=$(cd "${1:-build/bin}" && pwd)
ROWS=${ROWS:-2240000}; FILES=${FILES:-64}; WORKERS=${WORKERS:-2}; EPOCHS=${EPOCHS:-1}
HIDDEN=${HIDDEN:-8}; BLOCK_ROWS=${BLOCK_ROWS:-65536}
[ -x /usr/bin/time ] || { echo "SKIP: /usr/bin/time (GNU time) is not installed"; exit 77; }
(( ROWS % FILES == 0 )) || { echo "ROWS must be a multiple of FILES"; exit 2; }
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
per=$((ROWS / FILES))
F=100000 L=1000

if [ -n "${DATA_DIR:-}" ]; then
  # A set generated before (DATA_DIR/parts/part-*.txt.gz, DATA_DIR/set.test.txt), e.g. kept from an earlier run.
  ln -s "$(cd "$DATA_DIR" && pwd)/parts" "$tmp/parts"
  cp "$DATA_DIR/set.test.txt" "$tmp/"
  set +o pipefail  # `zcat | head -1` ends zcat with SIGPIPE
  FILES=$(ls "$tmp"/parts/part-*.txt.gz | wc -l)
  ROWS=$(for f in "$tmp"/parts/part-*.txt.gz; do zcat "$f" | head -1 | cut -d' ' -f1; done | awk '{s += $1} END {print s}')
  raw_bytes=$(( $(zcat "$tmp"/parts/part-*.txt.gz | wc -c) - $(for f in "$tmp"/parts/part-*.txt.gz; do zcat "$f" | head -1; done | wc -c) ))
  set -o pipefail
  gz_bytes=$(du -cbL "$tmp"/parts/*.gz | tail -1 | cut -f1)
  echo "reusing $FILES files of $DATA_DIR: $ROWS rows, $raw_bytes bytes of rows uncompressed, $gz_bytes bytes gzip"
else
echo "generating $ROWS rows ($F features, $L labels) into $FILES gzip files under $tmp"
t0=$(date +%s)
nice "$bin/tether-gen-xmc" --out_prefix="$tmp/set" --train_rows="$ROWS" --test_rows=5000 \
  --num_features=$F --num_labels=$L --seed=1 > /dev/null
raw_bytes=$(($(stat -c %s "$tmp/set.train.txt") - $(head -1 "$tmp/set.train.txt" | wc -c)))
mkdir "$tmp/parts"
# Rows of the one generated file cut into FILES parts, each with its header.
tail -n +2 "$tmp/set.train.txt" | nice awk -v per="$per" -v F=$F -v L=$L -v dir="$tmp/parts" '
  (NR - 1) % per == 0 { if (out) close(out); out = sprintf("gzip -1 > %s/part-%03d.txt.gz", dir, (NR - 1) / per); print per, F, L | out }
  { print | out }
  END { close(out) }'
rm "$tmp/set.train.txt"
gz_bytes=$(du -cb "$tmp"/parts/*.gz | tail -1 | cut -f1)
echo "generated in $(( $(date +%s) - t0 )) s: $raw_bytes bytes of rows uncompressed, $gz_bytes bytes in $(ls "$tmp/parts" | wc -l) gzip files"
fi

cat > "$tmp/job.pbtxt" <<PB
# Long timeouts: on a loaded machine a niced process can be starved for many
# seconds, which must not read as a dead worker or server.
cluster { num_servers: 1 num_workers: $WORKERS worker_timeout_ms: 600000 startup_timeout_ms: 600000
          liveness_timeout_ms: 600000 request_timeout_ms: 600000 }
data {
  format: XMC
  train_file: "parts/part-*.txt.gz"
  test_file: "set.test.txt"
  index_base: 0
  streaming: true
  shuffle_buffer_rows: $BLOCK_ROWS
}
model { type: XMC_MLP hidden: $HIDDEN loss: SOFTMAX }
optimizer { type: ADAGRAD learning_rate: 0.05 }
consistency { staleness: 2 }
table { name: "w1" consistency { cache: false } }
train { epochs: $EPOCHS minibatch_size: 256 minibatches_per_clock: 4 seed: 1 threads: 1 }
PB

t0=$(date +%s)
/usr/bin/time -v -o "$tmp/time.server" nice timeout -k 5 7200 "$bin/tether-server" --config="$tmp/job.pbtxt" \
  --shard=0 --listen=tcp://127.0.0.1:0 --port_file="$tmp/s0.port" > "$tmp/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do [ -s "$tmp/s0.port" ] && break; sleep 0.1; done
[ -s "$tmp/s0.port" ] || { tail "$tmp/server.log"; echo "FAIL: the server did not start"; exit 1; }
for ((r = WORKERS - 1; r >= 0; r--)); do
  extra=(); [ $r = 0 ] && extra=(--metrics_out="$tmp/m.json")
  /usr/bin/time -v -o "$tmp/time.w$r" nice timeout -k 5 7200 "$bin/tether-worker" --config="$tmp/job.pbtxt" \
    --rank=$r --server_addresses="$(cat "$tmp/s0.port")" "${extra[@]}" > "$tmp/w$r.log" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
pids=()
wall=$(( $(date +%s) - t0 ))
[ $rc = 0 ] || { for f in "$tmp"/*.log; do echo "== $f"; tail -5 "$f"; done; echo "FAIL: the job failed (rc $rc)"; exit 1; }

rss() { awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$1"; }
el() { awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$1"; }
echo
echo "job: $ROWS rows, $FILES gzip files ($raw_bytes bytes uncompressed, $gz_bytes gzip), $WORKERS workers, 1 server,"
echo "     $EPOCHS epoch(s), hidden $HIDDEN, $F features, $L labels, blocks of $BLOCK_ROWS rows; $wall s"
printf '%-10s %14s %12s\n' process "peak RSS MiB" elapsed
printf '%-10s %14s %12s\n' server "$(rss "$tmp/time.server")" "$(el "$tmp/time.server")"
for ((r = 0; r < WORKERS; r++)); do printf '%-10s %14s %12s\n' "worker $r" "$(rss "$tmp/time.w$r")" "$(el "$tmp/time.w$r")"; done
python3 - "$tmp/m.json" "$ROWS" "$EPOCHS" <<'PY'
import json, sys
m, rows, epochs = json.load(open(sys.argv[1])), int(sys.argv[2]), int(sys.argv[3])
per_worker = [w["epoch_rows"] for w in m["workers"]]
print("rows per epoch per worker:", per_worker)
for e in range(epochs):
    total = sum(r[e] for r in per_worker)
    print(f"epoch {e + 1}: {total} rows read over the workers, expected {rows}: {'OK' if total == rows else 'WRONG'}")
    assert total == rows
print(f"P@1 {m['precision_at_1']:.4f}, samples/s {m.get('samples_per_second', 0):.0f}")
PY
limit_mib=1024
for ((r = 0; r < WORKERS; r++)); do
  [ "$(rss "$tmp/time.w$r")" -lt $limit_mib ] || { echo "FAIL: worker $r peak RSS is not below $limit_mib MiB"; exit 1; }
done
echo "PASS: every worker's peak RSS < $limit_mib MiB (w1 is not cached; dense tables are < 5 MiB here)"
