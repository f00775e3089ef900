#!/usr/bin/env bash
# End-to-end tests on the bundled Bibtex data. Usage: bibtex_test.sh MODE BIN_DIR
#   launch         tether-launch, 2 servers + 2 workers: P@1 >= 0.55
#   by_hand        servers and workers started one by one with flags: P@1 >= 0.55
#   deterministic  1 worker, fixed seed, two runs: identical metrics
#   transports     1 worker over tcp, ipc and inproc (one process): identical
#                  metrics; 2 workers inproc: P@1 >= 0.55; a failing
#                  in-process worker (all of them, or only one) ends the
#                  job at once, naming it (a bad line: exit 6, bad input
#                  never restarted); SIGTERM ends it cleanly
#   transports_by_hand
#                  1 worker + 1 server started one by one with flags, under
#                  the example's SSP bound (staleness 2), over tcp, ipc and
#                  in one process (tether-worker --in_process): the same
#                  loss at every clock, P@1/P@3/P@5/nDCG and final loss, bit
#                  for bit (what any prefetching or batching on the tcp
#                  path must keep); and in one process
#                  with train.pipeline off (--pipeline=false): the same bits
#                  as pipelined
#   config_errors  config typo / unknown flag / flag without value refused, exit != 0;
#                  a value the checks refuse named by the config file's line
#                  of its field, or by the flag that set it
# Every process is started under `timeout` and killed on exit.
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"
limit_s=400

case "$mode" in
launch)
  timeout -k 5 400 "$bin/tether-launch" --config examples/bibtex.pbtxt --metrics_out "$tmp/m.json"
  gate "$(metric "$tmp/m.json" precision_at_1)" 0.55 "P@1 (tether-launch, 2 servers, 2 workers)"
  ;;
by_hand)
  flags=(--config=examples/bibtex.pbtxt)
  start_servers 2
  timeout -k 5 400 "$bin/tether-worker" --config=examples/bibtex.pbtxt --rank=1 --server_addresses="$addrs" &
  w1=$!; pids+=($w1)
  timeout -k 5 400 "$bin/tether-worker" --config=examples/bibtex.pbtxt --rank=0 --server_addresses="$addrs" \
    --metrics_out="$tmp/m.json"
  wait "$w1"
  for p in "${pids[@]}"; do wait "$p"; done
  pids=()
  gate "$(metric "$tmp/m.json" precision_at_1)" 0.55 "P@1 (processes started by hand)"
  ;;
deterministic)
  for run in 1 2; do
    timeout -k 5 300 "$bin/tether-launch" --config tests/data/bibtex_fixed.pbtxt --servers 2 --workers 1 \
      --epochs=3 --seed=7 --metrics_out "$tmp/run$run.json"
  done
  for k in precision_at_1 precision_at_3 precision_at_5 ndcg_at_3 ndcg_at_5 final_loss; do
    a=$(metric "$tmp/run1.json" $k); b=$(metric "$tmp/run2.json" $k)
    echo "$k: run1 $a run2 $b"
    [ "$a" = "$b" ] || { echo "FAIL: $k differs between runs"; exit 1; }
  done
  ;;
transports)
  for t in tcp ipc inproc; do
    timeout -k 5 300 "$bin/tether-launch" --config tests/data/bibtex_fixed.pbtxt --servers 2 --workers 1 \
      --transport $t --epochs=3 --seed=7 --metrics_out "$tmp/$t.json"
  done
  for k in precision_at_1 precision_at_3 precision_at_5 ndcg_at_3 ndcg_at_5 final_loss total_samples; do
    a=$(metric "$tmp/tcp.json" $k); b=$(metric "$tmp/ipc.json" $k); c=$(metric "$tmp/inproc.json" $k)
    echo "$k: tcp $a ipc $b inproc $c"
    [ "$a" = "$b" ] && [ "$a" = "$c" ] || { echo "FAIL: $k differs between transports"; exit 1; }
  done
  [ "$(metric "$tmp/inproc.json" total_samples)" = 14640 ] || { echo "FAIL: expected 3 x 4880 samples"; exit 1; }
  timeout -k 5 300 "$bin/tether-launch" --config tests/data/bibtex_fixed.pbtxt --transport inproc \
    --metrics_dir="$tmp/mdir" --metrics_out "$tmp/inproc2.json"
  gate "$(metric "$tmp/inproc2.json" precision_at_1)" 0.55 "P@1 (inproc, 2 servers, 2 workers)"
  for f in worker-0 worker-1 server-0 server-1; do
    [ -s "$tmp/mdir/$f.jsonl" ] || { echo "FAIL: no metrics rows in $f.jsonl"; exit 1; }
  done
  # A missing split file is refused by the launcher before anything starts
  # (exit 2, the full path tried).
  # (The copies in $tmp name the bundled files by absolute path: a config's
  # relative paths are taken against its own folder.)
  sed -e "s#\"\.\./\.\./data/#\"$PWD/data/#" -e 's#bibtex_trSplit.txt#no_such_split.txt#' tests/data/bibtex_fixed.pbtxt > "$tmp/missing.pbtxt"
  rc=0
  out=$(timeout -k 5 60 "$bin/tether-launch" --config "$tmp/missing.pbtxt" --transport inproc 2>&1) || rc=$?
  [ "$rc" = 2 ] || { echo "FAIL: a job whose split file is missing: exit $rc (expected 2): $out"; exit 1; }
  grep -qF "config field data.train_split: '$PWD/data/bibtex/no_such_split.txt' does not exist" <<< "$out" ||
    { echo "FAIL: message was: $out"; exit 1; }
  # A worker that cannot read its data must end the in-process job at once,
  # not leave the shards waiting for it (a split file that holds no rows).
  : > "$tmp/no_rows_split.txt"
  sed -e "s#\"\.\./\.\./data/bibtex/bibtex_trSplit.txt#\"$tmp/no_rows_split.txt#" -e "s#\"\.\./\.\./data/#\"$PWD/data/#" \
    tests/data/bibtex_fixed.pbtxt > "$tmp/bad.pbtxt"
  start=$(date +%s)
  if out=$(timeout -k 5 120 "$bin/tether-launch" --config "$tmp/bad.pbtxt" --transport inproc 2>&1); then
    echo "FAIL: a job whose split file holds no rows succeeded"; exit 1; fi
  grep -q "worker [01]: .*no_rows_split.txt: no row indices found" <<< "$out" || { echo "FAIL: message was: $out"; exit 1; }
  elapsed=$(( $(date +%s) - start ))
  [ "$elapsed" -lt 30 ] || { echo "FAIL: the failed in-process job took $elapsed s to end"; exit 1; }
  # Only worker 1's half of the data is bad (a9a line 30000): worker 0 must
  # not wait out its request timeout; the error names worker 1's file:line,
  # and the job exits 6 (bad input), not restarted.
  zcat data/a9a/a9a.gz | awk 'NR==30000 {print "+1 3:1 xx:zz"; next} {print}' > "$tmp/a9a_bad.txt"
  start=$(date +%s)
  rc=0
  out=$(timeout -k 5 120 "$bin/tether-launch" --config examples/a9a.pbtxt --transport inproc \
    --train_file="$tmp/a9a_bad.txt" 2>&1) || rc=$?
  [ "$rc" = 6 ] || { echo "FAIL: a job with a bad line in worker 1's data exited $rc, expected 6"; exit 1; }
  grep -q "worker 1: .*a9a_bad.txt:30000: invalid feature index" <<< "$out" || { echo "FAIL: message was: $out"; exit 1; }
  grep -q "refused its input data (exit 6: .*not restarted" <<< "$out" || { echo "FAIL: restarted? $out"; exit 1; }
  elapsed=$(( $(date +%s) - start ))
  [ "$elapsed" -lt 30 ] || { echo "FAIL: one failing in-process worker took $elapsed s to end the job"; exit 1; }
  # SIGTERM to the launcher: the in-process workers leave gracefully (BYE),
  # the shards exit, the launcher exits 143 and leaves no process behind.
  timeout -k 5 120 "$bin/tether-launch" --config tests/data/bibtex_fixed.pbtxt --transport inproc --epochs=200 \
    > "$tmp/term.log" 2>&1 &
  lp=$!; pids+=($lp)
  wait_log "$tmp/term.log" "epoch 1/200" 200
  # Signal the launcher itself: signalling `timeout` would also signal its
  # process group, and a second stop signal makes the launcher SIGKILL.
  launcher=$(pgrep -P "$lp" -f tether-launch)
  kill -TERM "$launcher"
  rc=0; wait "$lp" || rc=$?
  [ "$rc" = 143 ] || { echo "FAIL: launcher exited $rc after SIGTERM, expected 143"; cat "$tmp/term.log"; exit 1; }
  grep -q "stop requested at clock" "$tmp/term.log" || { echo "FAIL: workers did not leave gracefully"; tail -20 "$tmp/term.log"; exit 1; }
  if pgrep -f "tether-worker --config=tests/data/bibtex_fixed.pbtxt --in_process" > /dev/null; then
    echo "FAIL: the in-process job outlived the launcher"; exit 1; fi
  echo "transports agree; a failing in-process worker ended the job in $elapsed s; SIGTERM ended it cleanly"
  ;;
transports_by_hand)
  # One worker: every read sees every earlier push of its own (read-my-
  # writes) and nothing else changes the rows, so the transport must not
  # change a single bit. Two epochs: 154 clocks of one minibatch each.
  common=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=1 --num_workers=1 --epochs=2 --seed=7 --progress_every_s=0)
  by_hand() {  # by_hand NAME LISTEN: one tether-server, then one tether-worker
    local name=$1 listen=$2
    timeout -k 5 200 "$bin/tether-server" "${common[@]}" --shard=0 --listen="$listen" \
      --port_file="$tmp/$name.port" > "$tmp/$name-server.log" 2>&1 &
    local sp=$!; pids+=($sp)
    wait_port "$tmp/$name.port" "$sp" || fail "the $name server wrote no port file"
    timeout -k 5 200 "$bin/tether-worker" "${common[@]}" --rank=0 --server_addresses="$(cat "$tmp/$name.port")" \
      --metrics_dir="$tmp/$name" --metrics_out="$tmp/$name.json" > "$tmp/$name-worker.log" 2>&1 ||
      { echo "FAIL: the $name worker failed"; tail -20 "$tmp/$name-worker.log"; exit 1; }
    wait "$sp" || { echo "FAIL: the $name server exited non-zero"; tail -20 "$tmp/$name-server.log"; exit 1; }
  }
  by_hand tcp tcp://127.0.0.1:0
  by_hand ipc "ipc://$tmp/shard0.sock"
  timeout -k 5 200 "$bin/tether-worker" "${common[@]}" --in_process --metrics_dir="$tmp/inproc" \
    --metrics_out="$tmp/inproc.json" > "$tmp/inproc.log" 2>&1 ||
    { echo "FAIL: the in-process job failed"; tail -20 "$tmp/inproc.log"; exit 1; }
  timeout -k 5 200 "$bin/tether-worker" "${common[@]}" --in_process --pipeline=false --metrics_dir="$tmp/inproc_off" \
    --metrics_out="$tmp/inproc_off.json" > "$tmp/inproc_off.log" 2>&1 ||
    { echo "FAIL: the in-process job with --pipeline=false failed"; tail -20 "$tmp/inproc_off.log"; exit 1; }
  grep -q "minibatches pipelined" "$tmp/inproc.log" || { echo "FAIL: the pipelined run did not pipeline"; exit 1; }
  grep -q "minibatches one after the other" "$tmp/inproc_off.log" ||
    { echo "FAIL: --pipeline=false still pipelined"; exit 1; }
  # Every metric, and the loss of every clock and evaluation (repr: all 17
  # digits), in one Python run (a start of python3 can take seconds on a
  # loaded machine).
  python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
def series(name):
    out = []
    for line in open(f"{tmp}/{name}/worker-0.jsonl"):
        r = json.loads(line)
        if r.get("kind") == "clock": out.append(("clock", r["clock"], repr(r["loss"])))
        elif r.get("kind") == "eval": out.append(("eval", repr(r.get("precision_at_1")), repr(r.get("loss"))))
    return out
m = {t: json.load(open(f"{tmp}/{t}.json")) for t in ("tcp", "ipc", "inproc", "inproc_off")}
for k in ("precision_at_1", "precision_at_3", "precision_at_5", "ndcg_at_3", "ndcg_at_5", "final_loss", "total_samples"):
    print(f"{k}: tcp {m['tcp'][k]!r} ipc {m['ipc'][k]!r} inproc {m['inproc'][k]!r} inproc, pipeline off {m['inproc_off'][k]!r}")
    if not m["tcp"][k] == m["ipc"][k] == m["inproc"][k] == m["inproc_off"][k]:
        sys.exit(f"FAIL: {k} differs between transports or pipeline settings")
if m["tcp"]["total_samples"] != 9760: sys.exit("FAIL: expected 2 x 4880 samples")
s = {t: series(t) for t in m}
clocks = sum(1 for x in s["tcp"] if x[0] == "clock")
if clocks != 154: sys.exit(f"FAIL: expected 154 clocks (2 x 77 minibatches of 64), got {clocks}")
for t in ("ipc", "inproc", "inproc_off"):
    diff = [(a, b) for a, b in zip(s["tcp"], s[t]) if a != b]
    if diff or len(s["tcp"]) != len(s[t]):
        sys.exit(f"FAIL: per-clock losses differ, tcp against {t}: first {diff[:1]}, {len(s['tcp'])} against {len(s[t])} rows")
print(f"{clocks} clock losses and {len(s['tcp']) - clocks} evaluations identical")
PY
  echo "1 worker, 1 server, staleness 2, by hand: tcp, ipc and in-process (pipelined or not) agree bit for bit"
  ;;
config_errors)
  # C20: a typo in the config file names file:line and the closest field.
  printf 'name: "typo"\nconsistency { staleness_bond: 3 }\n' > "$tmp/typo.pbtxt"
  if out=$(timeout 20 "$bin/tether-server" --config="$tmp/typo.pbtxt" 2>&1); then
    echo "FAIL: config typo accepted"; exit 1; fi
  grep -q "typo.pbtxt:2: unknown field 'staleness_bond' (did you mean 'staleness'?)" <<< "$out" \
    || { echo "FAIL: message was: $out"; exit 1; }
  # A misspelt flag is refused with a suggestion.
  if out=$(timeout 20 "$bin/tether-worker" --config=tests/data/bibtex_fixed.pbtxt --stalenes=3 2>&1); then
    echo "FAIL: unknown flag accepted"; exit 1; fi
  grep -q "unknown flag --stalenes (did you mean --staleness?)" <<< "$out" || { echo "FAIL: $out"; exit 1; }
  # A flag that needs a value, given none.
  if out=$(timeout 20 "$bin/tether-worker" --config=tests/data/bibtex_fixed.pbtxt --staleness 2>&1); then
    echo "FAIL: flag without value accepted"; exit 1; fi
  grep -q "flag --staleness is missing its value" <<< "$out" || { echo "FAIL: $out"; exit 1; }
  # Missing index base is refused naming the field, by the worker (the
  # server reads no data section) before it connects anywhere.
  grep -v index_base tests/data/bibtex_fixed.pbtxt > "$tmp/nobase.pbtxt"
  if out=$(timeout 20 "$bin/tether-worker" --config="$tmp/nobase.pbtxt" --rank=0 \
      --server_addresses=tcp://127.0.0.1:9,tcp://127.0.0.1:10 2>&1); then
    echo "FAIL: missing index_base accepted"; exit 1; fi
  grep -q "data.index_base" <<< "$out" || { echo "FAIL: $out"; exit 1; }
  if grep -q "connected to" <<< "$out"; then echo "FAIL: connected before refusing: $out"; exit 1; fi
  # A straggler outside the job, and a metrics file that cannot be written,
  # are refused before any training.
  if out=$(timeout 20 "$bin/tether-launch" --config=tests/data/bibtex_fixed.pbtxt --slowdown=2 --slowdown_rank=7 2>&1); then
    echo "FAIL: slowdown_rank 7 of 2 workers accepted"; exit 1; fi
  grep -q "train.slowdown_rank: must name a worker in \[0, cluster.num_workers = 2)" <<< "$out" \
    || { echo "FAIL: $out"; exit 1; }
  if out=$(timeout 60 "$bin/tether-launch" --config=tests/data/bibtex_fixed.pbtxt --transport=inproc \
      --metrics_out=/nonexistent-dir/m.json 2>&1); then
    echo "FAIL: unwritable metrics path accepted"; exit 1; fi
  grep -q "flag --metrics_out=/nonexistent-dir/m.json: its folder /nonexistent-dir does not exist" <<< "$out" ||
    { echo "FAIL: $out"; exit 1; }
  if grep -q "epoch 1/" <<< "$out"; then echo "FAIL: trained before refusing the metrics path"; exit 1; fi
  # Flags the job in force would ignore are refused, naming the flag and
  # the setting it needs (core/config.h CheckOverridesApply), by every binary.
  expect_refused() {  # expect_refused MESSAGE COMMAND...
    local want=$1; shift
    if out=$(timeout 20 "$@" 2>&1); then echo "FAIL: accepted: $*"; exit 1; fi
    grep -qF "$want" <<< "$out" || { echo "FAIL: $*: $out"; exit 1; }
  }
  expect_refused "flag --chunk_rows=64 is only read with train.data_on_demand true, which this job does not set: add --data_on_demand=true, or drop --chunk_rows" \
    "$bin/tether-launch" --config=tests/data/bibtex_fixed.pbtxt --chunk_rows=64
  expect_refused "flag --adaptive_batch_min=16 is only read with train.adaptive_batch.enabled true" \
    "$bin/tether-worker" --config=tests/data/bibtex_fixed.pbtxt --adaptive_batch_min=16 --server_addresses=tcp://127.0.0.1:9,tcp://127.0.0.1:10
  expect_refused "flag --period_rows=64 is only read with consistency.model AVERAGE, which this job does not set: add --consistency_model=average" \
    "$bin/tether-server" --config=tests/data/bibtex_fixed.pbtxt --period_rows=64
  expect_refused "flag --model_momentum=0.5 is only read with consistency.model AVERAGE" \
    "$bin/tether-launch" --config=examples/bibtex_average.pbtxt --consistency_model=ssp --model_momentum=0.5
  expect_refused "flag --slowdown_rank=1 is only read with train.slowdown > 1" \
    "$bin/tether-launch" --config=tests/data/bibtex_fixed.pbtxt --slowdown_rank=1
  # A negative byte count names the flag and its range.
  expect_refused "error: --key_list_cache_bytes=-1: must be a number of bytes >= 0" \
    "$bin/tether-server" --config=tests/data/bibtex_fixed.pbtxt --key_list_cache_bytes=-1
  # A value the checks refuse names the config file's line of the field, as
  # a syntax error does; a field a flag set names the flag instead. Exact
  # messages: the job's checks (tether-launch), a server's (a table named
  # by its name), the model's (tether-worker, before it connects).
  said() {  # said WANT COMMAND...: COMMAND exits 2 and its last error line is exactly WANT
    local want=$1 rc=0 got; shift
    out=$(timeout 20 "$@" 2>&1) || rc=$?
    [ "$rc" = 2 ] || { echo "FAIL: $* exited $rc: $out"; exit 1; }
    got=$(sed -n 's/^E[0-9]* [0-9:.]* //p' <<<"$out" | tail -n 1)
    [ "$got" = "$want" ] || { echo "FAIL: $*: said '$got', expected '$want'"; exit 1; }
    echo "exit 2: $got"
  }
  printf '%s\n' 'name: "lr"' 'data {' '  format: XMC' "  train_file: \"$PWD/data/bibtex/Bibtex_data.txt.gz\"" \
    '  index_base: 0' '  num_features: 1836' '  num_labels: 159' '}' '# the step' 'optimizer {' '  type: ADAM' '' \
    '  learning_rate: -0.5' '}' >"$tmp/lr.pbtxt"
  said "[launch] InvalidArgument: $tmp/lr.pbtxt:13: config field optimizer.learning_rate: must be a finite number > 0" \
    "$bin/tether-launch" --config="$tmp/lr.pbtxt" --check_config
  said "[launch] InvalidArgument: config field optimizer.learning_rate: must be a finite number > 0 (set by flag --learning_rate=-2)" \
    "$bin/tether-launch" --config="$tmp/lr.pbtxt" --check_config --learning_rate=-2
  printf '%s\n' 'table {' '  name: "w1"' '}' 'table {' '  name: "b1"' '  consistency {' '    staleness: -3' '  }' '}' \
    >"$tmp/t.pbtxt"
  said "[server 0] $tmp/t.pbtxt:7: config field table[b1].consistency.staleness: must be ≥ 0, or -1 (inf) for ASP" \
    "$bin/tether-server" --config="$tmp/t.pbtxt" --shard=0
  { printf '%s\n' 'model {' '  sampled_labels: 500' '}'; sed 's#learning_rate: -0.5#learning_rate: 0.5#' "$tmp/lr.pbtxt"; } \
    >"$tmp/sampled.pbtxt"
  said "[worker 0] $tmp/sampled.pbtxt:2: config field model.sampled_labels: 500 is above data.num_labels (159), the rows a minibatch can sample from: use at most 159, or 0 for the full softmax" \
    "$bin/tether-worker" --config="$tmp/sampled.pbtxt" --rank=0 --server_addresses=tcp://127.0.0.1:9
  echo "config and flag errors refused as expected"
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
