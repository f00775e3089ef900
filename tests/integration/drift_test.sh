#!/usr/bin/env bash
# A vocabulary that drifts, streamed with hashed 64-bit features.
# tether-gen-xmc writes 10 training files in which 10 % of each later
# file's distinct feature ids are new (input/drifting_xmc.h); a job of
# 2 servers and 2 workers (tether-launch, SSP 2) streams them with
# data.hashed_features for 10 epochs:
#   - every file says it holds exactly round(0.1 · D) new ids of its D;
#   - the servers hold exactly one w1 row per distinct training id (rows on
#     first touch; evaluation creates none): the sum of the files' new ids;
#   - P@1 clears the most frequent label's share of the test rows (what a
#     model that learned nothing scores) by 5 points.
# Usage: drift_test.sh BIN_DIR   (run from the repository root)
source "$(dirname "$0")/lib.sh"
tether_test_init drift "$1"

timeout -k 5 120 "$bin/tether-gen-xmc" --feature_id_bits=64 --stream_files=10 --new_id_share=0.1 \
  --train_rows=20000 --test_rows=1000 --num_features=5000 --num_labels=200 --out_prefix="$tmp/d" > "$tmp/gen.log" \
  || fail "tether-gen-xmc: $(tail -2 "$tmp/gen.log")"
python3 - "$tmp/gen.log" > "$tmp/ids" <<'PY' || fail "the generator's new-id shares: $(cat "$tmp/ids")"
import re, sys
total = 0
for line in open(sys.argv[1]):
    m = re.search(r"train\.(\d+)\.txt: \d+ rows, (\d+) distinct feature ids, (\d+) new", line)
    if not m:
        continue
    t, d, new = int(m[1]), int(m[2]), int(m[3])
    want = d if t == 0 else int(0.1 * d + 0.5)
    if new != want:
        print(f"file {t}: {new} new ids of {d}, want {want}")
        sys.exit(1)
    total += new
print(total)
PY
ids=$(cat "$tmp/ids")

cat > "$tmp/job.pbtxt" <<PB
name: "drift"
cluster { num_servers: 2 num_workers: 2 }
data {
  format: XMC
  train_file: "$tmp/d.train.*.txt"
  test_file: "$tmp/d.test.txt"
  index_base: 0
  hashed_features: true
  streaming: true
}
model { type: XMC_MLP hidden: 32 loss: SOFTMAX }
optimizer { type: ADAGRAD learning_rate: 0.1 }
consistency { staleness: 2 }
train { epochs: 10 minibatch_size: 256 seed: 1 }
PB
timeout -k 5 300 "$bin/tether-launch" --config "$tmp/job.pbtxt" --metrics_out "$tmp/m.json" > "$tmp/job.log" 2>&1 \
  || fail "the streamed hashed job exited $?"
python3 - "$tmp/m.json" "$tmp/d.test.txt" "$ids" <<'PY' || fail "drifting stream"
import collections, json, sys
m = json.load(open(sys.argv[1]))
held = sum(s["table_rows"][0] for s in m["servers"])
counts, rows = collections.Counter(), 0
with open(sys.argv[2]) as f:
    next(f)
    for line in f:
        rows += 1
        counts.update(line.split(" ", 1)[0].split(","))
prior = counts.most_common(1)[0][1] / rows
p1 = m["precision_at_1"]
print(f"w1 rows held {held}, distinct training ids {sys.argv[3]}; P@1 {p1:.4f}, top label's share {prior:.4f}")
sys.exit(0 if held == int(sys.argv[3]) and p1 >= prior + 0.05 else 1)
PY
echo PASS
