#!/usr/bin/env bash
# The wire is the only contract: tether-server started from a config with no
# data and no model section serves jobs of different models, all processes
# started by hand. Usage: agnostic_server_test.sh MODE BIN_DIR
#   jobs        the same server config serves Bibtex (XMC MLP), a9a (sparse
#               LR) and MNIST (dense MLP), each unchanged: P@1 >= 0.55,
#               accuracy >= 0.845 and >= 0.95
#   mismatch    a worker whose tables differ from worker 0's is refused at
#               HELLO naming the table, the field and both values; it exits
#               non-zero without having trained
# Every process runs under `timeout` and is killed on exit; waits poll with
# a bound.
set -euo pipefail
mode=$1
bin=$(cd "$2" && pwd)
tmp=$(mktemp -d)
pids=()
cleanup() {
  # Each pid is a `timeout`: its child (the Tether process) first, then it.
  for p in "${pids[@]:-}"; do [ -n "$p" ] && { pkill -KILL -P "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; } || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

metric() {  # metric FILE KEY
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}
gate() {  # gate VALUE MIN NAME
  python3 -c 'import sys; v,m=float(sys.argv[1]),float(sys.argv[2]); print(f"{sys.argv[3]} = {v:.4f} (gate >= {m})"); sys.exit(0 if v >= m else 1)' "$1" "$2" "$3"
}

# Only what a shard reads: the cluster and the consistency sections.
cat > "$tmp/server.pbtxt" <<'CFG'
name: "agnostic"
cluster { num_servers: 2 num_workers: 2 startup_timeout_ms: 60000 }
consistency { staleness: 2 }
CFG
grep -q "data\|model" "$tmp/server.pbtxt" && fail "the server config must hold no data or model section"

# start_servers TAG: two shards from the server config; sets $addrs.
start_servers() {
  local tag=$1
  for s in 0 1; do
    timeout -k 5 300 "$bin/tether-server" --config="$tmp/server.pbtxt" --shard=$s \
      --listen=tcp://127.0.0.1:0 --port_file="$tmp/$tag.s$s.port" 2> "$tmp/$tag.s$s.log" &
    pids+=($!)
  done
  for _ in $(seq 1 200); do [ -f "$tmp/$tag.s0.port" ] && [ -f "$tmp/$tag.s1.port" ] && break; sleep 0.1; done
  [ -f "$tmp/$tag.s0.port" ] && [ -f "$tmp/$tag.s1.port" ] || fail "$tag: servers did not bind"
  addrs="$(cat "$tmp/$tag.s0.port"),$(cat "$tmp/$tag.s1.port")"
}

# run_job TAG CONFIG: two workers by hand with the job's own config (the
# job id given as a flag, the job otherwise unchanged); both servers must
# exit 0 once the workers leave.
run_job() {
  local tag=$1 config=$2
  start_servers "$tag"
  local s0=${pids[-2]} s1=${pids[-1]}
  timeout -k 5 300 "$bin/tether-worker" --config="$config" --job_id=agnostic --rank=1 \
    --server_addresses="$addrs" 2> "$tmp/$tag.w1.log" &
  local w1=$!
  pids+=($w1)
  timeout -k 5 300 "$bin/tether-worker" --config="$config" --job_id=agnostic --rank=0 \
    --server_addresses="$addrs" --metrics_out="$tmp/$tag.json" 2> "$tmp/$tag.w0.log" \
    || { cat "$tmp/$tag.w0.log"; fail "$tag: worker 0 failed"; }
  wait "$w1" || { cat "$tmp/$tag.w1.log"; fail "$tag: worker 1 failed"; }
  wait "$s0" || { cat "$tmp/$tag.s0.log"; fail "$tag: server 0 exited non-zero"; }
  wait "$s1" || { cat "$tmp/$tag.s1.log"; fail "$tag: server 1 exited non-zero"; }
  pids=()
}

case "$mode" in
jobs)
  run_job bibtex examples/bibtex.pbtxt
  grep -q "tables from worker 0: w1 (row, dim 256), b1 (dense, 256 floats), w2 (row, dim 257)" "$tmp/bibtex.s0.log" \
    || fail "bibtex: server 0 did not log the tables worker 0 declared"
  gate "$(metric "$tmp/bibtex.json" precision_at_1)" 0.55 "Bibtex P@1 (XMC MLP) from the server-only config"
  run_job a9a examples/a9a.pbtxt
  grep -q "tables from worker 0: w (row, dim 1), b (dense, 1 floats)" "$tmp/a9a.s1.log" || fail "a9a: tables not logged"
  gate "$(metric "$tmp/a9a.json" accuracy)" 0.845 "a9a accuracy (sparse LR) from the server-only config"
  run_job mnist examples/mnist.pbtxt
  grep -q "tables from worker 0: w1 (dense, 401408 floats), b1 (dense, 512 floats), w2 (dense, 5120 floats)" \
    "$tmp/mnist.s0.log" || fail "mnist: tables not logged"
  gate "$(metric "$tmp/mnist.json" accuracy)" 0.95 "MNIST accuracy (dense MLP) from the server-only config"
  ;;
mismatch)
  start_servers mismatch
  timeout -k 5 120 "$bin/tether-worker" --config=examples/bibtex.pbtxt --job_id=agnostic --rank=0 \
    --server_addresses="$addrs" 2> "$tmp/w0.log" &
  pids+=($!)
  rc=0
  out=$(timeout -k 5 120 "$bin/tether-worker" --config=examples/bibtex.pbtxt --job_id=agnostic --rank=1 \
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
