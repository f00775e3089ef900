#!/usr/bin/env bash
# The validation split (train.validation_fraction) and early stopping,
# end to end through tether-launch on Bibtex (2 servers, 2 workers).
#   test_last   the test split is read only for the final evaluation: a
#               test file whose header parses and whose first row does not
#               stops a job with a validation split only after its last
#               epoch and its last validation line; the same job without
#               a validation split stops before its first epoch
#   early_stop  patience 1 on a learning rate that overfits at once: the
#               metrics JSON has the validation split's own keys beside the
#               test split's, training ends one epoch after the best one,
#               and 1 worker sets aside the same rows as 2
# Usage: validation_test.sh test_last|early_stop BIN_DIR
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"
data=$(pwd)/data/bibtex

write_config() {  # write_config FILE EPOCHS TEST_LINES TRAIN_EXTRA...: a Bibtex job
  local file=$1 epochs=$2 test_lines=$3
  shift 3
  cat > "$file" <<CFG
name: "validation"
cluster { num_servers: 2 num_workers: 2 }
data {
  format: XMC
  train_file: "$data/Bibtex_data.txt.gz"
  train_split: "$data/bibtex_trSplit.txt"
  $test_lines
  index_base: 0
  num_features: 1836
  num_labels: 159
}
model { type: XMC_MLP hidden: 64 loss: SOFTMAX }
optimizer { type: ADAM learning_rate: 0.002 }
train { epochs: $epochs minibatch_size: 64 seed: 1 threads: 1 $* }
CFG
}

case $mode in
  test_last)
    # A header that parses (2 rows, 1836 features, 159 labels), a row that
    # parses, then one that does not.
    printf '2 1836 159\n0 1:1\nthis is not a row\n' > "$tmp/bad_test.txt"
    write_config "$tmp/val.pbtxt" 2 "test_file: \"$tmp/bad_test.txt\"" "validation_fraction: 0.2"
    timeout -k 5 200 "$bin/tether-launch" --config "$tmp/val.pbtxt" > "$tmp/val.log" 2>&1 \
      && fail "a job whose test file does not parse exited 0"
    grep -q "bad_test.txt:3" "$tmp/val.log" || fail "the parse error does not name bad_test.txt:3"
    # The error comes after every epoch and every validation round.
    last_epoch=$(grep -n "epoch 2/2 clock" "$tmp/val.log" | tail -1 | cut -d: -f1)
    last_val=$(grep -n "validation after epoch 2 " "$tmp/val.log" | tail -1 | cut -d: -f1)
    first_err=$(grep -n "bad_test.txt:3" "$tmp/val.log" | head -1 | cut -d: -f1)
    [[ -n $last_epoch && -n $last_val && -n $first_err ]] || fail "missing epoch, validation or error lines"
    (( first_err > last_epoch && first_err > last_val )) \
      || fail "the test file was read before the end (error at line $first_err, last epoch at $last_epoch)"
    echo "with a validation split: the test file's error at log line $first_err, after epoch 2 (line $last_epoch)"
    # Without a validation split the test part is read at the start.
    write_config "$tmp/plain.pbtxt" 2 "test_file: \"$tmp/bad_test.txt\""
    timeout -k 5 200 "$bin/tether-launch" --config "$tmp/plain.pbtxt" > "$tmp/plain.log" 2>&1 \
      && fail "a job whose test file does not parse exited 0"
    grep -q "bad_test.txt:3" "$tmp/plain.log" || fail "the parse error does not name bad_test.txt:3"
    grep -q "epoch 1/2" "$tmp/plain.log" && fail "without a validation split the job trained before reading the test file"
    echo "without: the error before any epoch"
    ;;
  early_stop)
    tests="test_file: \"$data/Bibtex_data.txt.gz\" test_split: \"$data/bibtex_tstSplit.txt\""
    write_config "$tmp/es.pbtxt" 12 "$tests" \
      "validation_fraction: 0.2 early_stopping { metric: \"precision_at_1\" patience: 1 }"
    sed -i 's/learning_rate: 0.002/learning_rate: 0.02/' "$tmp/es.pbtxt"
    timeout -k 5 250 "$bin/tether-launch" --config "$tmp/es.pbtxt" --metrics_out "$tmp/es.json" \
      > "$tmp/es.log" 2>&1 || fail "the early-stopping job exited $?"
    timeout -k 5 250 "$bin/tether-launch" --config "$tmp/es.pbtxt" --workers=1 --epochs=1 \
      --metrics_out "$tmp/one.json" > "$tmp/one.log" 2>&1 || fail "the one-worker job exited $?"
    python3 - "$tmp/es.json" "$tmp/one.json" <<'PY' || fail "metrics JSON"
import json, sys
m, one = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
for k in ["precision_at_1", "validation_precision_at_1", "validation_precision_at_3", "validation_ndcg_at_5",
          "validation_rows", "best_epoch", "epochs_trained", "stopped_early"]:
    assert k in m, f"no {k} in the metrics JSON"
assert m["validation_metric"] == "precision_at_1", m["validation_metric"]
assert m["test_rows"] == 2515, m["test_rows"]
# 4880 training rows; about a fifth set aside, the same whatever the workers.
assert 800 < m["validation_rows"] < 1150, m["validation_rows"]
assert one["validation_rows"] == m["validation_rows"], (one["validation_rows"], m["validation_rows"])
assert m["stopped_early"], "patience 1 at learning rate 0.02 did not stop within 12 epochs"
assert m["epochs_trained"] == m["best_epoch"] + 1, (m["epochs_trained"], m["best_epoch"])
assert 0 < m["validation_precision_at_1"] <= 1
print(f"best epoch {m['best_epoch']} of {m['epochs_trained']} trained; validation P@1 "
      f"{m['validation_precision_at_1']:.4f} over {m['validation_rows']} rows; test P@1 {m['precision_at_1']:.4f}")
PY
    n=$(grep -c "validation after epoch" "$tmp/es.log")
    [[ $n -ge 1 ]] || fail "no validation line in the log"
    ;;
  *) fail "unknown mode $mode" ;;
esac
echo PASS
