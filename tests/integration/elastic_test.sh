#!/usr/bin/env bash
# Elastic membership with real processes, started by hand (docs/OPERATIONS.md,
# "Joining and leaving"). Every process is bounded by `timeout` and reaped.
#   refuse     a rank ≥ cluster.max_workers and a joiner without rows dealt on
#              demand stop at once (exit 2) with an error naming the field;
#              tether-launch refuses bad --elastic_schedule values (exit 2).
#   evaluator  Bibtex, 1 server, 2 workers (static split), s = 2: rank 0 is
#              sent SIGTERM in its third epoch and leaves (BYE, exit 143);
#              rank 1, given the same --metrics_out, is named the evaluator
#              at the barrier and writes the metrics: bound_violations 0,
#              the whole test set evaluated (rank 0's half scored by rank 1
#              itself: eval_parts_for_others 1) with P@1 ≥ 0.55; it and
#              the server exit 1, as the job did not finish (rank 0's rows
#              were not all trained under the static split).
#   grow       Bibtex with rows dealt on demand (train.data_on_demand), 2
#              servers, s = 2, 1 initial worker (cluster.max_workers 2); once
#              rank 0 is past its first epoch, a worker with the new rank 1
#              is started by hand. Asserts: both shards log the join and
#              count it (workers_joined 1), the joiner trained (its
#              samples > 0 in the metrics), every training row was used
#              once per epoch, bound_violations 0, P@1 ≥ 0.56 (one run; the
#              median of 3 is ≥ 0.60, docs/OPERATIONS.md).
#   launch     the documented scenario under tether-launch: 1 worker grown
#              to 3 at epoch 2 and shrunk to 2 at epoch 4
#              (--elastic_schedule=2:+2,4:-1), rows dealt on demand. Exit 0,
#              both steps logged, workers_joined 2 on each shard, every
#              training row once per epoch, bound_violations 0, P@1 ≥ 0.56
#              (one run; the median of 3 is ≥ 0.60, docs/OPERATIONS.md).
# Usage: elastic_test.sh refuse|evaluator|grow|launch BIN_DIR
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"
limit_s=240
fail_lines=15

expect_refusal() {  # name expected_code pattern command...
  local name=$1 code=$2 pattern=$3; shift 3
  local rc=0
  timeout -k 5 60 "$@" > "$tmp/$name.log" 2>&1 || rc=$?
  [ "$rc" = "$code" ] || fail "$name: exit $rc, expected $code"
  grep -q -- "$pattern" "$tmp/$name.log" || fail "$name: no '$pattern' in its output"
  echo "ok: $name (exit $rc): $(grep -m1 -o -- "$pattern.*" "$tmp/$name.log" | cut -c1-150)"
}

if [ "$mode" = refuse ]; then
  cfg=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=1 --num_workers=1 --server_addresses=tcp://127.0.0.1:1)
  expect_refusal rank_past_bound 2 "cluster.max_workers = 3" \
    "$bin/tether-worker" "${cfg[@]}" --max_workers=3 --rank=3
  expect_refusal rank_past_default 2 "i.e. cluster.num_workers" \
    "$bin/tether-worker" "${cfg[@]}" --rank=1
  expect_refusal joiner_without_data 2 "needs train.data_on_demand" \
    "$bin/tether-worker" "${cfg[@]}" --max_workers=3 --rank=2
  expect_refusal max_below_num 2 "cluster.max_workers: is 1: must be ≥ cluster.num_workers = 2" \
    "$bin/tether-worker" "${cfg[@]}" --num_workers=2 --max_workers=1 --rank=0
  expect_refusal schedule_syntax 2 "expected EPOCH:+N" \
    "$bin/tether-launch" --config=tests/data/bibtex_fixed.pbtxt --elastic_schedule=2+2
  expect_refusal schedule_past_bound 2 "beyond cluster.max_workers = 3" \
    "$bin/tether-launch" --config=tests/data/bibtex_fixed.pbtxt --num_workers=1 --max_workers=3 --elastic_schedule=2:+3
  expect_refusal schedule_no_worker_left 2 "at least one must stay" \
    "$bin/tether-launch" --config=tests/data/bibtex_fixed.pbtxt --num_workers=1 --elastic_schedule=2:-1
  expect_refusal schedule_without_data 2 "needs train.data_on_demand" \
    "$bin/tether-launch" --config=tests/data/bibtex_fixed.pbtxt --num_workers=1 --max_workers=3 --elastic_schedule=2:+2
  expect_refusal schedule_inproc 2 "not with --transport=inproc" \
    "$bin/tether-launch" --config=tests/data/bibtex_fixed.pbtxt --num_workers=2 --transport=inproc --elastic_schedule=2:-1
  # --staleness is a bound of SSP/ASP: with AVERAGE it is refused, never dropped.
  expect_refusal average_and_staleness 2 "and --consistency_model=average contradict" \
    "$bin/tether-worker" "${cfg[@]}" --rank=0 --consistency_model=average --staleness=2
  expect_refusal staleness_on_average_config 2 "trains with consistency.model AVERAGE, which has no staleness bound" \
    "$bin/tether-worker" --config=examples/bibtex_average.pbtxt --num_servers=1 --num_workers=1 \
    --server_addresses=tcp://127.0.0.1:1 --rank=0 --staleness=2
  # Workers that disagree on train.data_on_demand (one on its static share,
  # one drawing chunks) would train rows twice: the shard refuses the second
  # HELLO, naming the setting, and the job fails within the start-up bound.
  flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=1 --num_workers=2 --startup_timeout_ms=4000)
  timeout -k 5 60 "$bin/tether-server" "${flags[@]}" --listen=tcp://127.0.0.1:0 --port_file="$tmp/mix.port" \
    > "$tmp/mix_server.log" 2>&1 &
  pids+=($!)
  wait_port "$tmp/mix.port" "$!" || fail "the server wrote no port file"
  timeout -k 5 60 "$bin/tether-worker" "${flags[@]}" --server_addresses="$(cat "$tmp/mix.port")" --rank=1 \
    > "$tmp/mix_w1.log" 2>&1 &
  pids+=($!)
  timeout -k 5 60 "$bin/tether-worker" "${flags[@]}" --server_addresses="$(cat "$tmp/mix.port")" --rank=0 \
    --data_on_demand=true > "$tmp/mix_w0.log" 2>&1 &
  pids+=($!)
  failed=0
  for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
  pids=()
  [ "$failed" -ge 2 ] || fail "mixed data_on_demand: only $failed process(es) failed"
  grep -q "train.data_on_demand differs" "$tmp/mix_server.log" || fail "the server did not name train.data_on_demand"
  echo "ok: mixed data_on_demand refused: $(grep -m1 -o "train.data_on_demand differs.*" "$tmp/mix_server.log" | cut -c1-150)"
  exit 0
fi

check_metrics() {  # metrics.json expected_joins: the gates shared by grow and launch
  python3 - "$1" "$2" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
joins = int(sys.argv[2])
servers = m.get("servers", [])
v = sum(s.get("bound_violations", 0) for s in servers)
joined = [s.get("workers_joined", 0) for s in servers]
workers = m.get("workers", [])
samples = [w.get("samples", 0) for w in workers]
print(f"P@1 {m['precision_at_1']:.4f}, bound violations {v}, workers_joined per shard {joined}, "
      f"samples per rank {samples}")
# SSP timing and when the joiner arrives move Bibtex's P@1 from run to run:
# 11 runs of grow gave 0.574-0.616 (3 below 0.58), so one run is gated
# at 0.56, far above an untrained or broken model; the documented figure
# (≥ 0.60) is the median of 3 runs, docs/OPERATIONS.md "Joining and leaving".
ok = v == 0 and len(servers) == 2 and all(j == joins for j in joined) and m["precision_at_1"] >= 0.56
ok = ok and len(workers) >= 2 and samples[1] > 0  # rank 1 joined and trained
# Every training row once per epoch: 7 epochs of Bibtex's 4880 rows, over
# every worker (those that left included), counted by shard 0's dealer.
epoch_rows = servers[0].get("chunk_epoch_rows") if servers else None
print(f"rows per epoch {epoch_rows}, rows re-dealt {m.get('rows_redealt')}")
ok = ok and epoch_rows == [4880] * 7
# The job's total_samples keeps the rows of the worker that left: every row
# once per epoch, plus those of chunks a leaving worker never completed
# (dealt again, so trained twice).
total = m["total_samples"]
print(f"total_samples {total} (every row once per epoch: {7 * 4880})")
ok = ok and 7 * 4880 <= total <= 7 * 4880 + m.get("rows_redealt", 0)
sys.exit(0 if ok else 1)
PY
}

if [ "$mode" = launch ]; then
  rc=0
  timeout -k 10 280 "$bin/tether-launch" --config=tests/data/bibtex_fixed.pbtxt --num_workers=1 --max_workers=3 \
    --data_on_demand=true --elastic_schedule=2:+2,4:-1 --metrics_out="$tmp/m.json" --timeout_s=240 \
    --slowdown=4 --slowdown_rank=0 \
    > "$tmp/launch.log" 2>&1 || rc=$?
  grep -E "\[launch\] (epoch|worker).*(starting|stopping|left the job)" "$tmp/launch.log" || true
  [ "$rc" = 0 ] || fail "tether-launch exited $rc"
  grep -q "starting 2 worker(s) with new ranks 1..2" "$tmp/launch.log" || fail "the launcher never added 2 workers"
  grep -q "stopping worker 2 " "$tmp/launch.log" || fail "the launcher never stopped worker 2"
  grep -q "worker 2 (pid [0-9]*) left the job as scheduled" "$tmp/launch.log" || fail "worker 2 did not leave"
  check_metrics "$tmp/m.json" 2 || fail "metrics gates"
  exit 0
fi

if [ "$mode" = grow ]; then
  flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=2 --num_workers=1 --max_workers=2 --data_on_demand=true
         --staleness=2 --request_timeout_ms=30000)
  start_servers 2
  start_worker 0 "$tmp/w0.log" --metrics_out="$tmp/m.json"
  wait_log "$tmp/w0.log" "epoch 1/" 1200
  start_worker 1 "$tmp/w1.log" --metrics_out="$tmp/m.json"
  rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  pids=()
  grep -h "joined the running job" "$tmp"/server*.log || true
  [ "$rc" = 0 ] || fail "a process exited with $rc"
  for s in 0 1; do
    grep -q "worker 1 joined the running job at clock" "$tmp/server$s.log" || fail "server $s never logged the join"
  done
  check_metrics "$tmp/m.json" 1 || fail "metrics gates"
  exit 0
fi

[ "$mode" = evaluator ] || { echo "usage: $0 refuse|evaluator|grow|launch BIN_DIR"; exit 2; }
flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=1 --num_workers=2 --staleness=2 --epochs=6
       --minibatch_size=32 --request_timeout_ms=30000)
start_servers 1
start_worker 0 "$tmp/w0.log" --metrics_out="$tmp/m.json"
w0=$started
start_worker 1 "$tmp/w1.log" --metrics_out="$tmp/m.json"
w1=$started
wait_log "$tmp/w0.log" "epoch 2/" 1200
# `timeout` runs the worker as its child: signal the worker itself.
kill -TERM "$(worker_pid "$w0")"
wait_codes "$w0" "$w1" "${server_pids[0]}"
read -r rc0 rc1 rcs <<< "$codes"
pids=()
echo "exit codes: worker 0 $rc0, worker 1 $rc1, server $rcs"
[ "$rc0" = 143 ] || fail "worker 0 exited $rc0 after SIGTERM, expected 143"
[ "$rc1" = 1 ] || fail "worker 1 exited $rc1, expected 1 (the job did not finish under the static split)"
[ "$rcs" = 1 ] || fail "the server exited $rcs, expected 1 (worker 1 told it the job did not finish)"
grep -q "job aborted: worker 1 failed: the job did not finish" "$tmp/server0.log" || fail "the server never logged the abort"
grep -q "worker 0 left" "$tmp/server0.log" || fail "the server never logged worker 0 leaving"
grep -q "rank 0 left the job: this worker evaluates and writes the metrics" "$tmp/w1.log" \
  || fail "worker 1 did not take over the evaluation"
grep -q "did not finish: worker(s) 0 left before the end" "$tmp/w1.log" || fail "worker 1 did not say the job did not finish"
[ -s "$tmp/m.json" ] || fail "no metrics written"
python3 - "$tmp/m.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
v = sum(s.get("bound_violations", 0) for s in m.get("servers", []))
p1, rows, others = m["precision_at_1"], m["test_rows"], m["eval_parts_for_others"]
print(f"evaluator's metrics: P@1 {p1:.4f} over {rows} test rows ({others} part scored for rank 0), "
      f"bound violations {v}")
# All of Bibtex's 2515 test rows: rank 1's half and rank 0's, scored by rank 1.
ok = v == 0 and rows == 2515 and others == 1 and p1 >= 0.55
sys.exit(0 if ok else 1)
PY
