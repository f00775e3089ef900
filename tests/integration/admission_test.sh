#!/usr/bin/env bash
# Admission on a long tail, end to end. Usage: admission_test.sh BIN_DIR [EPOCHS [K]]
# Bibtex (the bundled data) with hashed features, each training row given
# two extra feature ids that occur nowhere else (noisy_bibtex.py; noise:
# 9,760 ids seen once an epoch, 84 % of the training ids), one server and one worker under
# BSP in one process (tether-launch --transport inproc), trained twice with
# the same seed: without admission, and with `table { name: "w1"
# admit_after: K }`, K = EPOCHS + 1 (a noise id is pushed once an epoch, so
# over EPOCHS epochs it never reaches K; an id in two minibatches an epoch
# does).
# Gates: w1's rows cut by at least 30 %; P@1 within 0.5 points; the
# server's counters add up: rows_admitted = table_rows (no eviction), and
# rows_not_admitted ≥ the noise ids × EPOCHS (every push of a noise id is
# dropped). EPOCHS defaults to 1 (K = 2); a K given ≤ EPOCHS admits the
# noise ids at their K-th epoch, and the row gate then fails by design.
# Every process runs under `timeout` and is reaped.
source "$(dirname "$0")/lib.sh"
tether_test_init admission "$1"
epochs=${2:-1}
admit=${3:-$((epochs + 1))}

python3 tests/integration/noisy_bibtex.py "$tmp"

job() {  # job(NAME, EXTRA): the Bibtex example's model and optimizer, hashed, BSP
  cat > "$tmp/$1.pbtxt" <<EOF2
name: "$1"
data { format: XMC train_file: "train.txt" test_file: "test.txt" index_base: 0 hashed_features: true }
model { type: XMC_MLP hidden: 256 loss: SOFTMAX }
optimizer { type: ADAM learning_rate: 0.001 }
consistency { model: BSP }
table { name: "w1" consistency { cache: false } $2 }
train { epochs: $epochs minibatch_size: 64 minibatches_per_clock: 1 seed: 1 threads: 1 }
EOF2
  timeout -k 5 120 "$bin/tether-launch" --config "$tmp/$1.pbtxt" --servers 1 --workers 1 --transport inproc \
    --metrics_out "$tmp/$1.json" 2> "$tmp/$1.log" || { tail -20 "$tmp/$1.log"; echo "FAIL: job $1"; exit 1; }
}
job all ""
job admitted "admit_after: $admit"

python3 - "$tmp/all.json" "$tmp/admitted.json" "$(cat "$tmp/noise")" "$epochs" "$admit" <<'PY'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
noise, epochs, admit = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
sa, sb = a["servers"][0], b["servers"][0]
rows_a, rows_b = sa["table_rows"][0], sb["table_rows"][0]  # w1 is table 0
cut = 1.0 - rows_b / rows_a
p1a, p1b = a["precision_at_1"], b["precision_at_1"]
print(f"{epochs} epoch(s): w1 rows {rows_a} without admission, {rows_b} with admit_after: {admit} "
      f"({100 * cut:.1f} % fewer); P@1 {p1a:.4f} / {p1b:.4f} ({100 * (p1b - p1a):+.2f} points); "
      f"rows_not_admitted {sb['rows_not_admitted'][0]}; resident bytes of w1 {sa['resident_bytes'][0]} / "
      f"{sb['resident_bytes'][0]}")
assert sa["rows_admitted"][0] == rows_a and sa["rows_not_admitted"][0] == 0 and sa["rows_evicted"][0] == 0, \
    "FAIL: counters without admission"
assert sb["rows_admitted"][0] == rows_b and sb["rows_evicted"][0] == 0, "FAIL: rows_admitted != table_rows"
assert sb["rows_not_admitted"][0] >= noise * min(epochs, admit - 1), "FAIL: a noise id's push was not dropped"
assert cut >= 0.30, f"FAIL: w1 rows cut by {100 * cut:.1f} % (< 30 %)"
assert abs(p1b - p1a) <= 0.005, f"FAIL: P@1 moved by {100 * (p1b - p1a):.2f} points (> 0.5)"
print("PASS")
PY
