#!/usr/bin/env bash
# The wire is the only contract: tether-server started from a config with no
# data and no model section serves jobs of different models, all processes
# started by hand. Usage: agnostic_server_test.sh MODE BIN_DIR
#   jobs        the same server config serves Bibtex (XMC MLP), a9a (sparse
#               LR) and MNIST (dense MLP), each unchanged: P@1 >= 0.55,
#               accuracy >= 0.845 with AUC >= 0.89 on a9a's 16,281 test
#               rows, and accuracy >= 0.95 on MNIST's 2,000 hold-out images
#               (the gates of models_test.sh a9a and mnist, whose jobs these
#               are, 2 servers and 2 workers)
#   mismatch    a worker whose tables differ from worker 0's is refused at
#               HELLO naming the table, the field and both values; it exits
#               non-zero without having trained
# Every process runs under `timeout` and is killed on exit; waits poll with
# a bound.
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"
limit_s=300

# Only what a shard reads: the cluster and the consistency sections.
flags=(--config="$tmp/server.pbtxt")
cat > "$tmp/server.pbtxt" <<'CFG'
name: "agnostic"
cluster { num_servers: 2 num_workers: 2 startup_timeout_ms: 60000 }
consistency { staleness: 2 }
CFG
grep -q "data\|model" "$tmp/server.pbtxt" && fail "the server config must hold no data or model section"

# run_job TAG CONFIG: two workers by hand with the job's own config (the
# job id given as a flag, the job otherwise unchanged); both servers must
# exit 0 once the workers leave.
# (The shards of each job log to $tmp/server0.log and server1.log, read
# before the next job starts.)
run_job() {
  local tag=$1 config=$2
  start_servers 2
  timeout -k 5 "$limit_s" "$bin/tether-worker" --config="$config" --job_id=agnostic --rank=1 \
    --server_addresses="$addrs" 2> "$tmp/$tag.w1.log" &
  local w1=$!
  pids+=($w1)
  timeout -k 5 "$limit_s" "$bin/tether-worker" --config="$config" --job_id=agnostic --rank=0 \
    --server_addresses="$addrs" --metrics_out="$tmp/$tag.json" 2> "$tmp/$tag.w0.log" \
    || fail "$tag: worker 0 failed"
  wait "$w1" || fail "$tag: worker 1 failed"
  wait "${server_pids[0]}" || fail "$tag: server 0 exited non-zero"
  wait "${server_pids[1]}" || fail "$tag: server 1 exited non-zero"
  pids=()
}

case "$mode" in
jobs)
  run_job bibtex tests/data/bibtex_fixed.pbtxt
  grep -q "tables from worker 0: w1 (row, dim 256), b1 (dense, 256 floats), w2 (row, dim 257)" "$tmp/server0.log" \
    || fail "bibtex: server 0 did not log the tables worker 0 declared"
  gate "$(metric "$tmp/bibtex.json" precision_at_1)" 0.55 "Bibtex P@1 (XMC MLP) from the server-only config"
  run_job a9a examples/a9a.pbtxt
  grep -q "tables from worker 0: w (row, dim 1), b (dense, 1 floats)" "$tmp/server1.log" || fail "a9a: tables not logged"
  gate "$(metric "$tmp/a9a.json" accuracy)" 0.845 "a9a accuracy (sparse LR) from the server-only config"
  gate "$(metric "$tmp/a9a.json" auc)" 0.89 "a9a AUC (sparse LR) from the server-only config"
  [ "$(metric "$tmp/a9a.json" test_rows)" = 16281 ] || fail "a9a: $(metric "$tmp/a9a.json" test_rows) test rows, want 16281"
  run_job mnist examples/mnist.pbtxt
  grep -q "tables from worker 0: w1 (dense, 401408 floats), b1 (dense, 512 floats), w2 (dense, 5120 floats)" \
    "$tmp/server0.log" || fail "mnist: tables not logged"
  gate "$(metric "$tmp/mnist.json" accuracy)" 0.95 "MNIST accuracy (dense MLP) from the server-only config"
  [ "$(metric "$tmp/mnist.json" test_rows)" = 2000 ] || fail "mnist: $(metric "$tmp/mnist.json" test_rows) test rows, want 2000"
  ;;
mismatch)
  start_servers 2
  timeout -k 5 120 "$bin/tether-worker" --config=tests/data/bibtex_fixed.pbtxt --job_id=agnostic --rank=0 \
    --server_addresses="$addrs" 2> "$tmp/w0.log" &
  pids+=($!)
  rc=0
  out=$(timeout -k 5 120 "$bin/tether-worker" --config=tests/data/bibtex_fixed.pbtxt --job_id=agnostic --rank=1 \
    --hidden=128 --server_addresses="$addrs" 2>&1) || rc=$?
  [ "$rc" -ne 0 ] || fail "a worker with other tables exited 0"
  [ "$rc" -ne 124 ] || fail "a worker with other tables hung"
  grep -qF "tables differ: table 'w1', field dim: worker 1 has 128, the job (from worker 0) has 256" <<<"$out" \
    || fail "refusal does not name the table, the field and both values:"$'\n'"$out"
  ! grep -q "epoch 1/" <<<"$out" || fail "the refused worker trained"
  echo "refused as expected: $(grep -o "tables differ: .*" <<<"$out" | head -1)"
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
