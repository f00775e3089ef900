#!/usr/bin/env bash
# Hashed 64-bit feature ids end to end, with 2 servers and
# 2 workers started one by one with flags. Usage: hashed_test.sh BIN_DIR
#  - an XMC file whose feature ids include 2^63+1, 2^63+2 (equal once rounded
#    through a double) and 2^64-1 trains with data.hashed_features: true;
#  - each server holds exactly the w1 rows of the distinct training ids whose
#    key it owns (ShardForKey: SplitMix64 mod 2, computed here in Python) and
#    the w2 rows of its labels: ShardStats.table_rows in the metrics JSON,
#    taken after training, and the servers' "rows held at exit" log line,
#    written after the evaluation;
#  - the test file holds 40 ids never trained: evaluating it creates no rows
#    (the counts at exit equal those after training);
#  - an id of 2^64 fails the job (exit non-zero) with file:line and the token.
# Every process runs under `timeout` and is reaped.
source "$(dirname "$0")/lib.sh"
tether_test_init hashed "$1"

# Data and the expected per-shard row counts.
python3 - "$tmp" <<'PY'
import random, sys
tmp = sys.argv[1]
M = (1 << 64) - 1
def mix(x):  # MixKey, core/partition.h
    x = (x + 0x9E3779B97F4A7C15) & M
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M
    return x ^ (x >> 31)
rng = random.Random(15)
special = [(1 << 63) + 1, (1 << 63) + 2, (1 << 64) - 1]
assert float(special[0]) == float(special[1])
pool = special + [rng.getrandbits(64) for _ in range(197)]
L = 6
def row(ids, label):
    feats = " ".join(f"{i}:{rng.choice([0.5, 1, 2])}" for i in ids)
    return f"{label} {feats}"
train, used = [], set()
for r in range(300):
    label = r % L
    ids = sorted(set([pool[(label * 31 + k) % len(pool)] for k in range(4)] + rng.sample(pool, 5)))
    if r < 3: ids = sorted(set(ids) | {special[r]})
    used.update(ids)
    train.append(row(ids, label))
fresh = [rng.getrandbits(64) | 1 for _ in range(40)]  # never trained
fresh = [f for f in fresh if f not in used]
test = []
for r in range(60):
    label = r % L
    ids = sorted(set([pool[(label * 31 + k) % len(pool)] for k in range(4)] + [fresh[r % len(fresh)]]))
    test.append(row(ids, label))
open(f"{tmp}/train.txt", "w").write(f"{len(train)} 0 {L}\n" + "\n".join(train) + "\n")
open(f"{tmp}/test.txt", "w").write(f"{len(test)} 0 {L}\n" + "\n".join(test) + "\n")
w1 = [sum(1 for k in used if mix(k) % 2 == s) for s in (0, 1)]
w2 = [sum(1 for k in range(L) if mix(k) % 2 == s) for s in (0, 1)]
open(f"{tmp}/expect", "w").write(f"{w1[0]} {w1[1]} {w2[0]} {w2[1]} {len(used)}\n")
# 2^64: one past the largest id.
open(f"{tmp}/too_large.txt", "w").write(f"2 0 {L}\n0 1:1\n1 5:1 18446744073709551616:1\n")
PY
read -r e_w1_0 e_w1_1 e_w2_0 e_w2_1 distinct < "$tmp/expect"
echo "expected: $distinct distinct training ids; w1 rows $e_w1_0 + $e_w1_1, w2 rows $e_w2_0 + $e_w2_1"

cat > "$tmp/job.pbtxt" <<EOF2
name: "hashed"
cluster { num_servers: 2 num_workers: 2 }
data {
  format: XMC
  train_file: "train.txt"
  test_file: "test.txt"
  index_base: 0
  hashed_features: true
}
model { type: XMC_MLP hidden: 8 loss: SOFTMAX }
optimizer { type: ADAGRAD learning_rate: 0.1 }
consistency { staleness: 1 }
train { epochs: 3 minibatch_size: 16 seed: 3 threads: 1 }
EOF2

flags=(--config="$tmp/job.pbtxt")
start_servers 2
timeout -k 5 100 "$bin/tether-worker" --config="$tmp/job.pbtxt" --rank=1 --server_addresses="$addrs" \
  2> "$tmp/worker1.log" &
w1=$!; pids+=($w1)
timeout -k 5 100 "$bin/tether-worker" --config="$tmp/job.pbtxt" --rank=0 --server_addresses="$addrs" \
  --metrics_out="$tmp/m.json" 2> "$tmp/worker0.log" || { tail -20 "$tmp/worker0.log"; echo "FAIL: worker 0"; exit 1; }
wait "$w1" || { tail -20 "$tmp/worker1.log"; echo "FAIL: worker 1"; exit 1; }
for p in "${pids[@]}"; do wait "$p" || { cat "$tmp"/server*.log | tail -20; echo "FAIL: a server failed"; exit 1; }; done
pids=()

python3 - "$tmp/m.json" "$e_w1_0" "$e_w1_1" "$e_w2_0" "$e_w2_1" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
want = [[int(sys.argv[2]), 0, int(sys.argv[4])], [int(sys.argv[3]), 0, int(sys.argv[5])]]
got = [s["table_rows"] for s in m["servers"]]
print(f"after training: table_rows per server {got} (w1, b1, w2), expected {want}")
assert got == want, "FAIL: row counts after training"
print(f"test rows {m['test_rows']}, P@1 {m['precision_at_1']:.3f}")
assert m["test_rows"] == 60, "FAIL: test rows"
PY
for s in 0 1; do
  line=$(grep -o "rows held at exit: .*" "$tmp/server$s.log") || { tail "$tmp/server$s.log"; echo "FAIL: no exit line"; exit 1; }
  w1_want=$([ $s = 0 ] && echo "$e_w1_0" || echo "$e_w1_1")
  w2_want=$([ $s = 0 ] && echo "$e_w2_0" || echo "$e_w2_1")
  echo "server $s after evaluation: $line"
  [ "$line" = "rows held at exit: w1 $w1_want, w2 $w2_want" ] || { echo "FAIL: evaluation created rows on server $s"; exit 1; }
done

# 2^64 fails the job with file:line and the token.
sed -e 's#train.txt#too_large.txt#' -e '/test_file/d' "$tmp/job.pbtxt" > "$tmp/bad.pbtxt"
rc=0
out=$(timeout -k 5 60 "$bin/tether-launch" --config "$tmp/bad.pbtxt" --servers 1 --workers 1 --transport inproc 2>&1) || rc=$?
[ "$rc" != 0 ] || { echo "FAIL: an id of 2^64 trained (exit 0)"; exit 1; }
grep -F "too_large.txt:3: feature id too large in token '18446744073709551616:1'" <<< "$out" ||
  { echo "$out" | tail -5; echo "FAIL: the refusal does not name file:line and the token"; exit 1; }
echo "PASS"
