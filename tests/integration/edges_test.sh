#!/usr/bin/env bash
# Tether's edges, each example of its kind through the real binaries.
# Usage: edges_test.sh MODE BIN_DIR
#   preauth     a CURVE job; a raw peer greets as CURVE and announces a 3 GB
#               command frame: cut off, the server's peak memory grows by
#               < 64 MiB, and the listed worker then trains (every exit 0)
#   metrics     a 3 GB POST to a worker's /metrics: refused (405) or cut off,
#               the worker's peak memory grows by < 200 MiB, the job exits 0
#   checkpoints a checkpoint folder with ckpt-99999999999999999999 in it:
#               tether-export, --resume_from and a running job's pruning all
#               go on (exit 0) and warn once, naming it; then the training
#               split changes: tether-export refuses to count labels from it
#               (exit 1, naming the file and the checkpoint), and exports
#               with --label_counts=false
#   model       a model file whose config claims 2,000,000,000 labels:
#               tether-predict refuses it, naming the disagreement (exit 1)
#   rendezvous  two by-hand runs of one config on one rendezvous folder: the
#               second server refuses to start, naming the first's process
#   engine      four mpirun tasks (Open MPI's variables) that also carry
#               leaked SLURM variables: Open MPI's ranks are used, both sets
#               named, and the job trains
#   paused      a worker stopped (SIGSTOP) past cluster.worker_timeout_ms
#               (2 s here) and continued: it exits non-zero naming its
#               removal, the other worker and both servers exit 0
#   paused_default  as paused, with the default cluster.worker_timeout_ms
#               (10 s), six times: the worker stopped 1.5 s after it
#               connected, for 11 s (label slow)
#   limits      ulimit -n 64: every binary refuses to start naming the limit
#               (exit 2); SIGUSR1 to a worker stops it like SIGTERM (138)
# Every process runs under `timeout` and is reaped; waits poll with a bound.
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"
limit_s=240
here=$(cd "$(dirname "$0")" && pwd)
hostile() { timeout -k 5 60 python3 "$here/hostile.py" "$@"; }
sed "s|\"\.\./\.\./data/|\"$PWD/data/|g" tests/data/bibtex_fixed.pbtxt > "$tmp/bibtex.pbtxt"

# Peak resident memory (VmHWM, kB) of the process `timeout` (PID) runs.
hwm_kb() { awk '/^VmHWM:/ { print $2 }' "/proc/$(inner "$1")/status"; }

case "$mode" in
preauth)
  keys="$tmp/keys"
  timeout 30 "$bin/tether-keygen" --out="$keys" --name=server > /dev/null
  timeout 30 "$bin/tether-keygen" --out="$keys" --name=worker > /dev/null
  mkdir "$keys/authorized" && cp "$keys/worker.pub" "$keys/authorized/"
  cat >> "$tmp/bibtex.pbtxt" <<CFG
security { curve {
  server_secret_key_file: "$keys/server.key" server_public_key_file: "$keys/server.pub"
  client_secret_key_file: "$keys/worker.key" authorized_keys: "$keys/authorized" } }
CFG
  flags=(--config="$tmp/bibtex.pbtxt" --num_servers=1 --num_workers=1 --epochs=1)
  start_servers 1
  before=$(hwm_kb "${server_pids[0]}")
  out=$(hostile frame "$(cat "$tmp/s0.port" | sed 's|tcp://||')" --mechanism CURVE --announce 3000000000 \
    --send $((1 << 30)) --seconds 20)
  after=$(hwm_kb "${server_pids[0]}")
  echo "3 GB CURVE command frame before authentication: $out; server VmHWM $before -> $after kB"
  [[ "$out" == cut* ]] || fail "the server kept reading a 3 GB pre-authentication frame: $out"
  [ $((after - before)) -lt $((64 * 1024)) ] || fail "server peak memory grew by $((after - before)) kB"
  start_worker 0 "$tmp/worker0.log" --metrics_out="$tmp/m.json"
  wait_zero "the listed worker and the server" "$started" "${server_pids[0]}"
  gate "$(metric "$tmp/m.json" precision_at_1)" 0.3 "P@1 after the attack"
  ;;
metrics)
  flags=(--config="$tmp/bibtex.pbtxt" --num_servers=1 --num_workers=1 --epochs=3)
  start_servers 1
  start_worker 0 "$tmp/worker0.log" --metrics_port=0 --metrics_port_file="$tmp/w0.metrics" --metrics_linger_s=0 \
    --metrics_out="$tmp/m.json"
  wait_port "$tmp/w0.metrics" "$started" || fail "the worker's /metrics never listened"
  before=$(hwm_kb "$started")
  out=$(hostile post "$(cat "$tmp/w0.metrics")" --announce 3000000000 --send $((512 << 20)) --seconds 20)
  after=$(hwm_kb "$started")
  echo "3 GB POST /metrics: $out; worker VmHWM $before -> $after kB"
  [[ "$out" == "HTTP/1.1 405"* || "$out" == *"cut after"* ]] || fail "POST answered: $out"
  [ $((after - before)) -lt $((200 * 1024)) ] || fail "worker peak memory grew by $((after - before)) kB"
  wait_zero "worker and server after the POST" "$started" "${server_pids[0]}"
  ;;
checkpoints)
  ck="$tmp/ck"
  mkdir -p "$ck/ckpt-99999999999999999999" "$tmp/data"
  cp -r data/bibtex "$tmp/data/"  # a copy: its training split changes below
  sed "s|\"\.\./\.\./data/|\"$tmp/data/|g" tests/data/bibtex_fixed.pbtxt > "$tmp/bibtex.pbtxt"
  timeout -k 5 200 "$bin/tether-launch" --config "$tmp/bibtex.pbtxt" --servers 2 --workers 1 --epochs=2 \
    --checkpoint_dir="$ck" --checkpoint_every_clocks=20 --checkpoint_keep_last=1 > "$tmp/train.log" 2>&1 ||
    fail "a job pruning a folder with a foreign entry failed"
  [ "$(ls -d "$ck"/ckpt-0* | wc -l)" -ge 1 ] || fail "no checkpoint written"
  [ -d "$ck/ckpt-99999999999999999999" ] || fail "the foreign entry was pruned"
  grep -q "ignoring 1 entry that Tether did not write: 'ckpt-99999999999999999999'" "$tmp/train.log" ||
    fail "the job did not name the foreign entry"
  timeout -k 5 60 "$bin/tether-export" --checkpoint="$ck" --out="$tmp/m.safetensors" > "$tmp/export.log" 2>&1 ||
    fail "tether-export failed on the folder"
  [ "$(grep -c "ignoring 1 entry" "$tmp/export.log")" = 1 ] || fail "tether-export did not warn exactly once"
  timeout -k 5 200 "$bin/tether-launch" --config "$tmp/bibtex.pbtxt" --servers 2 --workers 1 --epochs=2 \
    --checkpoint_dir="$tmp/ck2" --resume_from="$ck" > "$tmp/resume.log" 2>&1 || fail "the resume failed"
  echo "prune, export and resume each exit 0 beside ckpt-99999999999999999999"
  echo 1 >> "$tmp/data/bibtex/bibtex_trSplit.txt"
  rc=0
  timeout -k 5 60 "$bin/tether-export" --checkpoint="$ck" --out="$tmp/m2.safetensors" > "$tmp/export2.log" 2>&1 || rc=$?
  [ "$rc" = 1 ] || fail "tether-export exited $rc after the training split changed"
  grep -q "cannot export from $ck/ckpt-[0-9a-z-]*: data file $tmp/data/bibtex/bibtex_trSplit.txt changed: size" \
    "$tmp/export2.log" || fail "the changed split was not named: $(tail -1 "$tmp/export2.log")"
  [ ! -e "$tmp/m2.safetensors" ] || fail "a refused export wrote its file"
  timeout -k 5 60 "$bin/tether-export" --checkpoint="$ck" --out="$tmp/m3.safetensors" --label_counts=false \
    > "$tmp/export3.log" 2>&1 || fail "tether-export --label_counts=false failed after the split changed"
  echo "a changed training split: export refused (exit 1) naming it; --label_counts=false exports"
  ;;
model)
  python3 - tests/data/golden/bibtex_h16/bibtex_h16.safetensors "$tmp/claims.safetensors" <<'PY'
import json, re, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
m = h["__metadata__"]
m["job_config"] = re.sub(r"num_labels: \d+", "num_labels: 2000000000", m["job_config"])
m["num_labels"] = "2000000000"
head = json.dumps(h).encode()
head += b" " * (-len(head) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(head)) + head + raw[8 + n:])
PY
  rc=0
  timeout -k 5 60 "$bin/tether-predict" --model="$tmp/claims.safetensors" --input=data/bibtex/Bibtex_data.txt.gz \
    --format=xmc --index_base=0 --split=data/bibtex/bibtex_tstSplit.txt --output="$tmp/p.tsv" 2> "$tmp/p.log" || rc=$?
  [ "$rc" = 1 ] || fail "tether-predict exited $rc on a model claiming 2e9 labels"
  # The reader finds the claim first in the label counts (one per label);
  # the tables' num_keys disagree too (model_files_test.sh predict).
  grep -q "claims.safetensors: tensor 'label_counts' has 159 counts but the job_config's data.num_labels is 2000000000" "$tmp/p.log" ||
    fail "no disagreement named: $(tail -2 "$tmp/p.log")"
  echo "2e9 labels: exit 1, $(grep -o "tensor 'label_counts' has.*" "$tmp/p.log")"
  ;;
rendezvous)
  common=(--config="$tmp/bibtex.pbtxt" --num_servers=1 --num_workers=1 --rendezvous="file:$tmp/rdzv")
  timeout -k 5 60 "$bin/tether-server" "${common[@]}" --shard=0 > "$tmp/first.log" 2>&1 &
  first=$!
  pids+=($first)
  wait_log "$tmp/first.log" "published" 400
  rc=0
  timeout -k 5 60 "$bin/tether-server" "${common[@]}" --shard=0 > "$tmp/second.log" 2>&1 || rc=$?
  [ "$rc" != 0 ] || fail "the second server started"
  grep -q "entry bibtex/0/server-0 is already held by a live process (pid $(inner "$first") on host " "$tmp/second.log" ||
    fail "the second server did not name the first: $(tail -2 "$tmp/second.log")"
  echo "second server: exit $rc, $(grep -o 'entry bibtex/0/server-0 is already held by a live process ([^)]*)' "$tmp/second.log")"
  ;;
engine)
  rdzv="$tmp/rdzv"
  for r in 0 1 2 3; do
    OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=4 OMPI_MCA_ess_base_jobid=4242 \
    SLURM_STEP_ID=0 SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_JOB_ID=77 \
      timeout -k 5 200 "$bin/tether-launch" --config "$tmp/bibtex.pbtxt" --num_servers 2 --epochs=1 \
      --rendezvous="file:$rdzv" > "$tmp/task$r.log" 2>&1 &
    pids+=($!)
  done
  wait_zero "the four tasks" "${pids[@]}"
  pids=()
  grep -q "both launchers' variables are set: Open MPI's OMPI_COMM_WORLD_RANK=3 OMPI_COMM_WORLD_SIZE=4 used; SLURM's SLURM_PROCID=0" "$tmp/task3.log" ||
    fail "task 3 did not name both launchers"
  echo "four tasks with leaked SLURM variables: every exit 0, Open MPI's ranks used"
  ;;
paused)
  flags=(--config="$tmp/bibtex.pbtxt" --num_servers=2 --num_workers=2 --epochs=3 --data_on_demand=true
         --worker_timeout_ms=2000)
  start_servers 2
  start_worker 0 "$tmp/worker0.log" --metrics_out="$tmp/m.json"
  w0=$started
  start_worker 1 "$tmp/worker1.log"
  w1=$started
  wait_log "$tmp/worker1.log" "connected to" 400
  kill -STOP "$(worker_pid "$w1")"
  wait_log "$tmp/server0.log" "worker 1 silent for" 200
  wait_log "$tmp/server1.log" "worker 1 silent for" 200
  kill -CONT "$(worker_pid "$w1")"
  wait_code "$w1"
  paused_rc=$rc
  [ "$paused_rc" != 0 ] || fail "the paused worker exited 0"
  grep -q "worker 1 removed: silent for" "$tmp/worker1.log" || fail "the paused worker did not name its removal"
  grep -q "job aborted" "$tmp/server0.log" "$tmp/server1.log" && fail "a server took the paused worker's ABORT"
  wait_zero "the other worker and both servers" "$w0" "${server_pids[@]}"
  echo "paused worker: exit $paused_rc, $(grep -o 'worker 1 removed: silent for [^)]*)' "$tmp/worker1.log" | head -1)"
  ;;
paused_default)
  summary=()
  for run in 1 2 3 4 5 6; do
    flags=(--config="$tmp/bibtex.pbtxt" --num_servers=2 --num_workers=2 --epochs=40 --data_on_demand=true)
    start_servers 2
    start_worker 0 "$tmp/r$run-worker0.log" --metrics_out="$tmp/r$run.json"
    w0=$started
    start_worker 1 "$tmp/r$run-worker1.log"
    w1=$started
    wait_log "$tmp/r$run-worker1.log" "connected to" 400
    # The scenario's own times (not waits for an event): stopped 1.5 s
    # after it connected, for 11 s, past the 10 s timeout.
    sleep 1.5
    kill -STOP "$(worker_pid "$w1")"
    sleep 11
    kill -CONT "$(worker_pid "$w1")"
    wait_code "$w1"
    paused_rc=$rc
    [ "$paused_rc" != 0 ] || fail "run $run: the paused worker exited 0"
    grep -q "worker 1 removed: silent for" "$tmp/r$run-worker1.log" ||
      fail "run $run: the paused worker did not name its removal: $(tail -2 "$tmp/r$run-worker1.log")"
    wait_zero "run $run: the other worker and both servers" "$w0" "${server_pids[@]}"
    grep -q "job aborted" "$tmp"/server*.log && fail "run $run: a server took the paused worker's ABORT"
    summary+=("run $run: paused worker exit $paused_rc, the others 0")
    pids=()
  done
  printf '%s\n' "${summary[@]}"
  ;;
limits)
  for cmd in "tether-server --config=$tmp/bibtex.pbtxt" "tether-worker --config=$tmp/bibtex.pbtxt" \
             "tether-data check --format=xmc --index_base=0 data/bibtex/Bibtex_data.txt.gz"; do
    rc=0
    # shellcheck disable=SC2086  # a command and its arguments
    out=$(ulimit -n 64 && timeout -k 5 30 $bin/$cmd 2>&1) || rc=$?
    [ "$rc" = 2 ] || fail "$cmd under ulimit -n 64 exited $rc"
    grep -q "cannot start: the open-file limit (RLIMIT_NOFILE, ulimit -n) is 64" <<< "$out" ||
      fail "$cmd did not name the limit: $out"
  done
  flags=(--config="$tmp/bibtex.pbtxt" --num_servers=1 --num_workers=1 --epochs=50)
  start_servers 1
  start_worker 0 "$tmp/worker0.log"
  wait_log "$tmp/worker0.log" "epoch 1/" 1200
  kill -USR1 "$(worker_pid "$started")"
  expect_exit "$started" 138 30000 "a worker sent SIGUSR1"
  echo "ulimit -n 64: exit 2 naming the limit; SIGUSR1: the worker left gracefully, exit 138 after $took ms"
  ;;
*)
  fail "unknown mode $mode"
  ;;
esac
