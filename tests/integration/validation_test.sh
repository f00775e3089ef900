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
#               and 1 worker sets aside the same rows as 2; one worker
#               (BSP) whose patience runs out with its last epoch trained
#               every epoch and did not stop early; a metric the model
#               does not report (auc on XMC_MLP) is refused by
#               tether-launch at start-up with exit 2, naming its keys, and
#               so is it by tether-server alone, with the same message
#   best_model  the best epoch's model is the one scored and exported: one
#               worker (BSP) stopping two epochs past its best epoch B
#               scores the test split exactly as a run of B epochs that
#               keeps its last model, and --model_out holds the same
#               tensors (in-process); processes by hand (2 servers, 2
#               workers) score epoch B, every shard puts it back, and a
#               resume from the final checkpoint scores the same hits
#   uneven      Pendigits on 2 workers whose epochs take different numbers
#               of clocks (their partitions keep different row counts):
#               under BSP and SSP every epoch's round completes
#   uneven_average  the same under model averaging, with rounds of 1 and
#               of 4 minibatches: every epoch's round completes, and every
#               worker's delta of every round is merged, none discarded
#   split_file  the rows a file names (data.validation_split) on Pendigits,
#               2 workers: exactly those rows validated every epoch (the
#               validation line, the validation_* keys), the others trained;
#               by hand, a worker given another split file is refused at
#               HELLO naming the field
# Usage: validation_test.sh test_last|early_stop|best_model|uneven|uneven_average|split_file BIN_DIR
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
    # A metric the model does not report is refused with the config (exit 2).
    sed 's/metric: "precision_at_1"/metric: "auc"/' "$tmp/es.pbtxt" > "$tmp/auc.pbtxt"
    rc=0
    timeout -k 5 60 "$bin/tether-launch" --config "$tmp/auc.pbtxt" > "$tmp/auc.log" 2>&1 || rc=$?
    [[ $rc == 2 ]] || { cat "$tmp/auc.log"; fail "a metric of binary models on XMC_MLP: exit $rc, not 2"; }
    want="config field train.early_stopping.metric: 'auc' is not a metric of multi-label models: use "
    want+="precision_at_1, precision_at_3, precision_at_5, ndcg_at_1, ndcg_at_3 or ndcg_at_5"
    grep -qF "$want" "$tmp/auc.log" || { cat "$tmp/auc.log"; fail "the metric was not named with the model's keys"; }
    # tether-server alone refuses it too, with the same message, before it
    # listens; both name the config file's line of the metric (write_config's
    # train line).
    line=14
    [ "$(grep -n 'metric: "auc"' "$tmp/auc.pbtxt" | cut -d: -f1)" = "$line" ] || fail "auc.pbtxt changed shape"
    grep -qF "[launch] InvalidArgument: $tmp/auc.pbtxt:$line: $want" "$tmp/auc.log" ||
      { cat "$tmp/auc.log"; fail "the launcher did not name line $line of auc.pbtxt"; }
    rc=0
    timeout -k 5 60 "$bin/tether-server" --config "$tmp/auc.pbtxt" --shard=0 > "$tmp/auc_server.log" 2>&1 || rc=$?
    [[ $rc == 2 ]] || { cat "$tmp/auc_server.log"; fail "tether-server with the metric auc on XMC_MLP: exit $rc, not 2"; }
    grep -qF "[server 0] $tmp/auc.pbtxt:$line: $want" "$tmp/auc_server.log" ||
      { cat "$tmp/auc_server.log"; fail "tether-server did not name the metric at line $line"; }
    grep -q "listening on" "$tmp/auc_server.log" && fail "tether-server listened before refusing the metric"
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
assert m["scored_epoch"] == m["best_epoch"], (m["scored_epoch"], m["best_epoch"])
assert 0 < m["validation_precision_at_1"] <= 1
print(f"best epoch {m['best_epoch']} of {m['epochs_trained']} trained; validation P@1 "
      f"{m['validation_precision_at_1']:.4f} over {m['validation_rows']} rows; test P@1 {m['precision_at_1']:.4f}")
PY
    n=$(grep -c "validation after epoch" "$tmp/es.log")
    [[ $n -ge 1 ]] || fail "no validation line in the log"
    # One worker under BSP trains the same epochs every run: the run of 12
    # stops when patience runs out, at epoch T; a run of exactly T epochs
    # trains them all and did not stop early.
    for epochs in 12 T; do
      [ "$epochs" = T ] && epochs=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["epochs_trained"])' \
        "$tmp/bsp12.json")
      timeout -k 5 250 "$bin/tether-launch" --config "$tmp/es.pbtxt" --workers=1 --staleness=0 --epochs="$epochs" \
        --metrics_out "$tmp/bsp$epochs.json" > "$tmp/bsp$epochs.log" 2>&1 || fail "the BSP job of $epochs epochs exited $?"
      [ -f "$tmp/bsp12.json" ] || fail "no metrics from the BSP job of 12 epochs"
    done
    python3 - "$tmp/bsp12.json" "$tmp/bsp$epochs.json" <<'PY' || fail "stopped_early at the last epoch"
import json, sys
full, exact = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert full["stopped_early"] and full["epochs_trained"] < 12, (full["stopped_early"], full["epochs_trained"])
assert exact["epochs_trained"] == full["epochs_trained"] and not exact["stopped_early"], exact
assert exact["best_epoch"] == full["best_epoch"], (exact["best_epoch"], full["best_epoch"])
print(f"BSP: patience ran out at epoch {full['epochs_trained']} of 12 (stopped early); a run of "
      f"{exact['epochs_trained']} epochs trained them all: stopped_early false")
PY
    ;;
  best_model)
    tests="test_file: \"$data/Bibtex_data.txt.gz\" test_split: \"$data/bibtex_tstSplit.txt\""
    write_config "$tmp/es.pbtxt" 12 "$tests" \
      "validation_fraction: 0.2 early_stopping { metric: \"precision_at_1\" patience: 2 }"
    sed -i 's/learning_rate: 0.002/learning_rate: 0.02/' "$tmp/es.pbtxt"
    sed 's/num_servers: 2 num_workers: 2/num_servers: 1 num_workers: 1/' "$tmp/es.pbtxt" > "$tmp/one.pbtxt"
    timeout -k 5 100 "$bin/tether-launch" --config "$tmp/one.pbtxt" --transport=inproc \
      --metrics_out "$tmp/one.json" --model_out "$tmp/one.safetensors" > "$tmp/one.log" 2>&1 \
      || fail "the one-worker early-stopping job exited $?"
    best=$(metric "$tmp/one.json" best_epoch)
    # The same job for exactly `best` epochs, keeping its last model.
    sed -e "s/epochs: 12/epochs: $best/" -e 's/early_stopping { metric: "precision_at_1" patience: 2 }/keep_best_model: false/' \
      "$tmp/one.pbtxt" > "$tmp/ref.pbtxt"
    timeout -k 5 100 "$bin/tether-launch" --config "$tmp/ref.pbtxt" --transport=inproc \
      --metrics_out "$tmp/ref.json" --model_out "$tmp/ref.safetensors" > "$tmp/ref.log" 2>&1 \
      || fail "the $best-epoch job exited $?"
    python3 - "$tmp" <<'PY' || fail "the best epoch's model is not the one scored and exported"
import json, struct, sys
t = sys.argv[1]
m, ref = json.load(open(f"{t}/one.json")), json.load(open(f"{t}/ref.json"))
assert m["stopped_early"] and m["epochs_trained"] == m["best_epoch"] + 2, (m["epochs_trained"], m["best_epoch"])
assert m["scored_epoch"] == m["best_epoch"], (m["scored_epoch"], m["best_epoch"])
assert ref["epochs_trained"] == ref["scored_epoch"] == m["best_epoch"], (ref["epochs_trained"], ref["scored_epoch"])
keys = [k for k in m if k.startswith(("precision_", "ndcg_", "psp_", "psndcg_"))]
assert len(keys) >= 12, keys
for k in keys + ["test_rows"]:
    assert m[k] == ref[k], f"{k}: {m[k]} after the best epoch put back, {ref[k]} after {m['best_epoch']} epochs"
def tensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    head = json.loads(b[8:8 + n])
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in head.items()
            if k != "__metadata__"}
a, r = tensors(f"{t}/one.safetensors"), tensors(f"{t}/ref.safetensors")
assert sorted(a) == sorted(r) and "w1" in a, (sorted(a), sorted(r))
for k in a:
    assert a[k] == r[k], f"tensor {k} of the exported model differs from the {m['best_epoch']}-epoch run's"
print(f"best epoch {m['best_epoch']} of {m['epochs_trained']}: test P@1 {m['precision_at_1']:.4f} = the "
      f"{m['best_epoch']}-epoch run's, and the same {len(a)} tensors exported")
PY
    grep -q "the model of epoch $best (best precision_at_1 on the validation split) put back on the servers in place of epoch $((best + 2))'s" \
      "$tmp/one.log" || fail "worker 0 does not say it put epoch $best back"
    # Processes by hand, 2 servers and 2 workers, with a final checkpoint.
    start_job hand 2 2 --config="$tmp/es.pbtxt" --checkpoint_dir="$tmp/ck"
    wait_job "the job by hand"
    best=$(metric "$tmp/hand.json" best_epoch)
    [[ $(metric "$tmp/hand.json" scored_epoch) == "$best" ]] || fail "by hand: scored_epoch is not best_epoch $best"
    for s in 0 1; do
      grep -q "kept the weights at the end of epoch $best " "$tmp/hand-server$s.log" \
        || fail "server $s kept no copy of epoch $best"
      grep -q "put back the weights kept at the end of epoch $best for the final evaluation" "$tmp/hand-server$s.log" \
        || fail "server $s did not put epoch $best back"
    done
    # The final checkpoint holds the model scored.
    start_job resumed 2 2 --config="$tmp/es.pbtxt" --checkpoint_dir="$tmp/ck" --resume_from="$tmp/ck"
    wait_job "the resume from the final checkpoint"
    for k in precision_hits_at_1 precision_hits_at_3 precision_hits_at_5; do
      [[ $(metric "$tmp/resumed.json" $k) == $(metric "$tmp/hand.json" $k) ]] \
        || fail "$k: $(metric "$tmp/resumed.json" $k) resumed from the final checkpoint, $(metric "$tmp/hand.json" $k) scored"
    done
    echo "by hand: epoch $best scored and put back on both shards; the final checkpoint scores the same hits"
    ;;
  uneven)
    # Pendigits' two partitions keep different numbers of training rows
    # after the validation split, so their epochs end at different clocks.
    # A worker waiting at the round must not hold the other's staleness
    # bound, or the other never reaches the round: BSP and SSP 2 both
    # finish, every epoch validated.
    sed 's#"\.\./data/#"'"$PWD"'/data/#; s/^  epochs: [0-9]*/  epochs: 4\n  validation_fraction: 0.2/' \
      examples/pendigits.pbtxt > "$tmp/p.pbtxt"
    for s in 0 2; do
      timeout -k 5 200 "$bin/tether-launch" --config "$tmp/p.pbtxt" --staleness=$s --timeout_s=180 \
        --metrics_out "$tmp/p$s.json" > "$tmp/p$s.log" 2>&1 || fail "staleness $s: exit $? ($(tail -2 "$tmp/p$s.log"))"
      grep -q "validation after epoch 4 " "$tmp/p$s.log" || fail "staleness $s: no validation after epoch 4"
      ends=$(sed -nE 's/.*\[worker ([01])\] epoch 4\/4 clock ([0-9]+).*/\1:\2/p' "$tmp/p$s.log" | sort | tr '\n' ' ')
      [[ $ends =~ ^0:([0-9]+)\ 1:([0-9]+)\ $ ]] || fail "staleness $s: no end-of-epoch-4 line from each worker: $ends"
      (( BASH_REMATCH[1] != BASH_REMATCH[2] )) || fail "staleness $s: both workers ended epoch 4 at one clock ($ends)"
      echo "staleness $s: epoch 4 ended at clocks $ends(worker:clock), every epoch validated, exit 0"
    done
    ;;
  split_file)
    # Every fifth of Pendigits' 7494 rows from the last, in falling order:
    # 1499 validation rows, 5995 to train on.
    seq 7494 -5 1 > "$tmp/val.split"
    sed -e 's#"\.\./data/#"'"$PWD"'/data/#' -e 's/^  epochs: [0-9]*/  epochs: 2/' \
      -e 's#^  index_base: 1 *$#  index_base: 1\n  validation_split: "'"$tmp"'/val.split"#' \
      examples/pendigits.pbtxt > "$tmp/p.pbtxt"
    grep -q "validation_split:" "$tmp/p.pbtxt" && grep -q "^  epochs: 2$" "$tmp/p.pbtxt" \
      || fail "no validation_split or no 2 epochs in the derived config"
    timeout -k 5 100 "$bin/tether-launch" --config "$tmp/p.pbtxt" --timeout_s=80 --metrics_out "$tmp/p.json" \
      > "$tmp/p.log" 2>&1 || fail "exit $? ($(tail -2 "$tmp/p.log"))"
    for e in 1 2; do
      grep -q "validation after epoch $e (1499 rows)" "$tmp/p.log" || fail "no validation line of 1499 rows after epoch $e"
    done
    trained=$(sed -nE 's/.*\[worker [01]\] read ([0-9]+) training rows.*/\1/p' "$tmp/p.log" | awk '{s += $1} END {print s}')
    [[ $trained == 5995 ]] || fail "the workers train on $trained rows, not 7494 - 1499 = 5995"
    python3 - "$tmp/p.json" <<'PY' || fail "metrics JSON"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["validation_rows"] == 1499, m["validation_rows"]
assert m["epochs_trained"] == 2 and 1 <= m["best_epoch"] <= 2, (m["epochs_trained"], m["best_epoch"])
assert m["validation_metric"] == "accuracy", m["validation_metric"]
assert 0.5 < m["validation_accuracy"] <= 1, m["validation_accuracy"]
print(f"validation accuracy {m['validation_accuracy']:.4f} over {m['validation_rows']} rows; "
      f"test accuracy {m['accuracy']:.4f}")
PY
    echo "data.validation_split: 1499 rows validated after each epoch, 5995 trained on, exit 0"
    # A validation split that takes every training row: refused naming the
    # field; "fewer workers" is offered only where there are several.
    seq 1 7494 > "$tmp/all.split"
    sed "s#$tmp/val.split#$tmp/all.split#" "$tmp/p.pbtxt" > "$tmp/all.pbtxt"
    for w in 1 2; do
      rc=0
      timeout -k 5 100 "$bin/tether-launch" --config "$tmp/all.pbtxt" --workers=$w --timeout_s=80 \
        > "$tmp/all$w.log" 2>&1 || rc=$?
      [ "$rc" = 1 ] || fail "$w worker(s), every row a validation row: exit $rc, not 1"
      grep -q "once the validation split (data.validation_split) took its rows: leave more rows to train on" \
        "$tmp/all$w.log" || fail "$w worker(s): the empty partition was not named ($(grep -m1 ' E' "$tmp/all$w.log"))"
      fewer=$(grep -c "leave more rows to train on, or use fewer workers" "$tmp/all$w.log" || true)
      if [ $w = 1 ] && [ "$fewer" != 0 ]; then fail "1 worker was told to use fewer workers"; fi
      if [ $w = 2 ] && [ "$fewer" = 0 ]; then fail "2 workers were not told they may use fewer"; fi
    done
    echo "every row a validation row: exit 1 naming data.validation_split (fewer workers offered only to 2)"
    # By hand, worker 1 given another validation split than worker 0: the
    # servers refuse its HELLO naming the field (it would validate rows
    # worker 0 trains on).
    seq 7493 -5 1 > "$tmp/other.split"
    sed "s#$tmp/val.split#$tmp/other.split#" "$tmp/p.pbtxt" > "$tmp/other.pbtxt"
    limit_s=60
    flags=(--config="$tmp/p.pbtxt")
    start_servers 2
    start_worker 0 "$tmp/hand0.log"
    w0=$started
    start_worker 1 "$tmp/hand1.log" --config="$tmp/other.pbtxt"
    wait_code "$started"
    [ "$rc" != 0 ] || fail "worker 1 with another validation split exited 0"
    grep -q "the data differs: worker 1's 'data.validation_split' files are not the job's (worker 0's" \
      "$tmp/hand1.log" || fail "worker 1's refusal does not name the field ($(grep -m1 ' E' "$tmp/hand1.log"))"
    kill_tree "$w0"
    for pid in "${server_pids[@]}"; do kill_tree "$pid"; done
    echo "by hand: worker 1 with another validation split refused (exit $rc) naming data.validation_split"
    ;;
  uneven_average)
    # Worker 0's epochs take 48 minibatches, worker 1's 47. With a round of
    # 1 minibatch worker 0 is one more round ahead at each epoch's end, so
    # it trains past worker 1 parked at the round; with 4, worker 1 waits
    # there partway into a round, whose delta it sends after the round.
    sed 's#"\.\./data/#"'"$PWD"'/data/#; s/^  epochs: [0-9]*/  epochs: 6\n  validation_fraction: 0.2/' \
      examples/pendigits.pbtxt > "$tmp/p.pbtxt"
    for rows in 64 256; do
      sed "s/staleness: 2/model: AVERAGE period_rows: $rows/" "$tmp/p.pbtxt" > "$tmp/a$rows.pbtxt"
      timeout -k 5 60 "$bin/tether-launch" --config "$tmp/a$rows.pbtxt" --timeout_s=40 \
        --metrics_out "$tmp/a$rows.json" > "$tmp/a$rows.log" 2>&1 \
        || fail "period_rows $rows: exit $? ($(tail -2 "$tmp/a$rows.log"))"
      n=$(grep -c "validation after epoch" "$tmp/a$rows.log")
      [[ $n == 6 ]] || fail "period_rows $rows: $n validation rounds, not 6"
      ends=$(sed -nE 's/.*\[worker ([01])\] epoch 6\/6 clock ([0-9]+).*/\1:\2/p' "$tmp/a$rows.log" | sort | tr '\n' ' ')
      python3 - "$tmp/a$rows.json" "$rows" <<'PY' || fail "period_rows $rows: metrics JSON"
import json, sys
m, rows = json.load(open(sys.argv[1])), int(sys.argv[2])
assert m["epochs_trained"] == 6 and m["validation_rows"] == 1475, (m["epochs_trained"], m["validation_rows"])
# Worker 0: 288 minibatches, worker 1: 282; a round of `rows` rows is rows/64 minibatches.
per = rows // 64
want = -(-288 // per) + -(-282 // per)
for s in m["servers"]:
    assert s["average_deltas_discarded"] == 0 and s["average_rows_discarded"] == 0, s
    assert s["average_deltas_merged"] == want, (s["average_deltas_merged"], want)
assert m["validation_accuracy"] > 0.9, m["validation_accuracy"]
PY
      echo "period_rows $rows: epoch 6 ended at clocks $ends(worker:clock), 6 rounds validated, every delta merged, exit 0"
    done
    ;;
  *) fail "unknown mode $mode" ;;
esac
echo PASS
