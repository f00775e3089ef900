#!/usr/bin/env bash
# Data on demand over streamed files (train.data_on_demand with
# data.streaming), real processes started one by one with
# flags. Bibtex's 4880 training rows are cut into three XMC files, each
# with its own header: part-0.txt (2000 rows), part-1.txt.gz (1500 rows,
# gzip: one chunk, whole) and part-2.txt (1380 rows). 2 servers, 3 workers,
# ASP, worker 2 four times slower (--slowdown=4 --slowdown_rank=2), chunks
# of 16384 bytes (--chunk_bytes). Asserted:
#   - shard 0 cut the files into the expected number of chunks (the plain
#     files' sizes / 16384, rounded up, plus 1 for the gzip file);
#   - every epoch, shard 0's chunk_epoch_rows is 4880 exactly and the
#     workers' epoch_rows sum to it; total_samples is 3 x 4880;
#   - nothing was re-dealt, and the slow worker trained fewer rows than
#     either other worker;
#   - no worker read the training set whole (each logs the streamed files);
#   - P@1 >= 0.45 (the gate of data_on_demand_test.sh speeds).
# Usage: stream_on_demand_test.sh speeds BIN_DIR   (from the repository root)
source "$(dirname "$0")/lib.sh"
tether_test_init "$@"
limit_s=60

# The split's rows as XMC files, the training rows cut into three parts
# (bibtex_parts, lib.sh).
mkdir -p "$tmp/data" "$tmp/cfg"
bibtex_parts "$tmp"
chunk_bytes=16384
chunks=1  # the gzip file, whole
for f in "$tmp/data/part-0.txt" "$tmp/data/part-2.txt"; do
  size=$(stat -c %s "$f")
  chunks=$((chunks + (size + chunk_bytes - 1) / chunk_bytes))
done

# The config: paths relative to its folder, streamed in blocks of 500 rows.
sed -e 's#train_file: .*#train_file: "../data/part-*"#' -e 's#test_file: .*#test_file: "../data/test.txt"#' \
    -e '/train_split:/d' -e '/test_split:/d' \
    -e 's#^  num_labels: 159#  num_labels: 159\n  streaming: true\n  shuffle_buffer_rows: 500#' \
    tests/data/bibtex_fixed.pbtxt > "$tmp/cfg/stream.pbtxt"

epochs=3
flags=(--config="$tmp/cfg/stream.pbtxt" --num_servers=2 --num_workers=3 --staleness=inf --epochs=$epochs
       --seed=5 --data_on_demand=true --chunk_bytes=$chunk_bytes --minibatch_size=32
       --request_timeout_ms=30000 --worker_timeout_ms=5000 --slowdown=4 --slowdown_rank=2)
start_servers 2
start_worker 0 "$tmp/w0.log" --metrics_out="$tmp/m.json"; w0=$started
start_worker 1 "$tmp/w1.log"; w1=$started
start_worker 2 "$tmp/w2.log"; w2=$started
rc=0
for p in "$w0" "$w1" "$w2" "${server_pids[@]}"; do wait "$p" || rc=$?; done
pids=()
[ "$rc" = 0 ] || fail "a process exited with $rc"
grep -h "data on demand" "$tmp"/server0.log | sed 's/^.*\] //' || true

grep -q "3 streamed training file(s) of .* bytes in chunks of $chunk_bytes bytes, $epochs epochs, seed 5 ($chunks chunks per epoch)" \
  "$tmp/server0.log" || fail "shard 0 did not deal $chunks byte-range chunks per epoch"
for r in 0 1 2; do
  grep -q "data on demand over 3 streamed file(s)" "$tmp/w$r.log" || fail "worker $r did not stream the files"
  ! grep -q "read [1-9][0-9]* training rows" "$tmp/w$r.log" || fail "worker $r read the training set into memory"
done

python3 - "$tmp/m.json" "$epochs" <<'PY'
import json, sys
m, epochs = json.load(open(sys.argv[1])), int(sys.argv[2])
rows = 4880
per_worker = [w["epoch_rows"] for w in m["workers"]]
counted = m["servers"][0]["chunk_epoch_rows"]
print("epoch_rows per worker:", per_worker, "; shard 0 counted per epoch:", counted,
      "; chunks completed per worker:", [w.get("chunks_completed") for w in m["workers"]])
assert counted == [rows] * epochs, counted
assert all(len(r) == epochs for r in per_worker), per_worker
for e in range(epochs):
    total = sum(r[e] for r in per_worker)
    assert total == counted[e], f"epoch {e + 1}: workers' rows sum to {total}, shard 0 counted {counted[e]}"
assert m["total_samples"] == rows * epochs, m["total_samples"]
assert m["chunks_redealt"] == 0 and m["rows_redealt"] == 0, (m["chunks_redealt"], m["rows_redealt"])
slow, fast = sum(per_worker[2]), [sum(per_worker[0]), sum(per_worker[1])]
print(f"rows trained: slow worker {slow}, the others {fast}")
assert slow < min(fast), f"the 4x slower worker trained {slow} rows, the others {fast}"
PY
gate "$(metric "$tmp/m.json" precision_at_1)" 0.45 "P@1" || fail "P@1 below the gate"
echo PASS
