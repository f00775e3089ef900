#!/usr/bin/env bash
# Replicated shards (cluster.replicas): a server process dies or stalls and
# the job goes on, with real processes started by hand on 127.0.0.1 (the
# servers find each other in a rendezvous folder) and the bundled Bibtex
# data. Usage: failover_test.sh MODE BIN_DIR
#   kill   3 servers with --replicas=1, 2 workers, 8 epochs; SIGKILL shard 0's
#          process (which also hosts the job coordinator) after worker 0 logs
#          epoch 3: server 1 claims shard 0, no worker restarts, every
#          process left exits 0, total_samples is exactly 8 × 4,880 and
#          P@1 ≥ 0.58.
#   pause  the same job over 5 epochs (as ondemand, early and
#          launch_kill_two: no P@1 gate); SIGSTOP shard 0's process for
#          twice the liveness timeout, then SIGCONT: server 1 claims the
#          shard, the stopped process steps down when it wakes (exit 1,
#          naming its replica), the others exit 0, total_samples is exact.
#   bsp    1 worker, BSP, SGD, 2 servers with --replicas=1, 4 epochs with a
#          final checkpoint: undisturbed, then shard 0's process SIGKILLed
#          after epoch 2, then shard 1's: the final metrics (time, rates,
#          failover counts and reads served aside) and the model
#          tether-export writes from the final checkpoint are bit-identical
#          to the undisturbed run's.
#   checkpoints  the kill mode's job with a checkpoint every 10 clocks:
#          it finishes with exit 0 and exact samples, and every checkpoint
#          with a MANIFEST (before, across and after the failover) exports.
#   curve  the kill run under security.curve (keys from tether-keygen): each
#          copy follows its primary holding the servers' key pair, the
#          workers move to the claimed copy with their own keys, and no
#          server refuses a connection.
#   launch_kill  the kill mode's job run by tether-launch (3 servers, 2 workers,
#          --replicas=1); SIGKILL the server process of shard 0 after a
#          worker logs epoch 3: the launcher names the dead process, its
#          shard and server 1 serving it, goes on, and exits 0 within
#          15 s of the workers' end (it stops a replacement still joining
#          then); total_samples is exactly 5 × 4,880 and the metrics count
#          shard 0's failover.
#   launch_kill_two  the same launched job without replacements
#          (--max_replacements=0); SIGKILL server 1, then, once the
#          launcher logged that shard 1 lives on, server 0: shard 0's one
#          replica (in server 1) is gone with it, so the launcher exits 1
#          naming the lost shard, with every child reaped.
#   launch_stop_two  the same launched job without replacements
#          (--max_replacements=0); SIGSTOP servers 1 and 2 after a worker
#          logs epoch 3, never SIGCONT: shard 1's two holders are stopped,
#          the workers give it up and the job fails (server 0 exits on its
#          abort, and server 0 claims shard 2 first or not); the launcher
#          exits 1 within 30 s, its final line naming shard 1 as lost with
#          its holders stopped, no line calling shard 0 or 2 lost, and
#          every child reaped.
#   launch_replace  the same launched job; SIGKILL server 0 after a worker
#          logs epoch 2: the launcher starts replacements joining shards 0
#          and 2 (left without a replica); once shard 2's replacement caught
#          up, SIGKILL server 2: the replacement claims shard 2, the
#          launcher exits 0 and total_samples is exactly 8 × 4,880.
#   launch_chain  4 servers with --replicas=2 (chains of three) under
#          tether-launch, 2 workers, 10 epochs; SIGKILL server 0 after a
#          worker logs epoch 2: the launcher names shards 0, 2 and 3 each a
#          replica short and starts exactly 3 replacements (--shard=0, 2,
#          3; shard 0's waits its turn while server 2 joins the claim
#          again); each shard's primary logs its chain back at three
#          processes, the launcher exits 0 and total_samples is exactly
#          20 × 4,880 (20 epochs: the job outlasts the replacements
#          catching up).
#   launch_stop  the launch_kill job over 20 epochs; SIGSTOP server 0's
#          process after a worker logs epoch 2, never SIGCONT: server 1
#          claims shard 0 and publishes its port in the rendezvous; the
#          launcher finds the entry moved while server 0 still runs, kills it
#          (SIGKILL), judges it as a death (shard 0 served by server 1's
#          replica) and starts replacements for shards 0 and 2, which catch
#          up; it exits 0,
#          total_samples is exactly 20 × 4,880 and no child is left.
#   ondemand  the kill mode's job with data on demand (shard 0's job
#          coordinator deals the chunks): after the failover no chunk is
#          dealt twice or lost: total_samples is exact.
#   early  shard 0's process SIGKILLed once its replica joined, before any
#          worker starts: the claiming copy publishes itself in the
#          rendezvous, the workers find it there, the job finishes with
#          exact samples.
#   declined  shard 0's replica's process is stopped when shard 0's
#          process is killed, then continued: it declines the claim (its
#          copy may be behind) and closes the copy's port, and every
#          process exits non-zero within 30 s, the workers naming shard 0.
#   join   the kill mode's job over 20 epochs: after shard 0's process is
#          SIGKILLed, two processes started with --join_as_replica copy the
#          shards left without a replica (shard 0, now on server 1, and
#          shard 2, whose copy lived on server 0) and log that they caught
#          up; then server 1 is SIGKILLed too and the replacement claims
#          shard 0 again: every process left exits 0 and total_samples is
#          exact.
#   chain  4 servers with --replicas=2 (each shard on a chain of three),
#          2 workers, 10 epochs; SIGKILL server 0 after worker 0 logs
#          epoch 2: server 1 claims shard 0 and server 2, its other
#          replica, joins that claim again as a learner; once it caught up,
#          a process started with --join_as_replica (no --shard) copies
#          shard 0, the first shard with fewer than 2 replicas, and once it
#          caught up shard 0 is a chain of three again (1 → 4 → 5, server
#          1 logs it, the workers are told both replicas); then SIGKILL
#          server 1: server 2 claims shard 0 (from its new copy) and the
#          replacement joins that claim again, server 2 claims shard 1 (as
#          the first of its chain left) and server 3 joins shard 1's claim;
#          no worker restarts, the workers, servers 2 and 3 and the
#          replacement exit 0, total_samples is exactly 10 × 4,880 and
#          P@1 ≥ 0.58.
#   chain_curve  the chain run under security.curve: a copy later in the
#          chain asks the one before it over CURVE with the servers' key
#          pair and joins its claim.
#   chain_adjacent  the chain job with cluster.liveness_timeout_ms=10000;
#          SIGKILL servers 0 and 1 in one command after worker 0 logs
#          epoch 2 (a host running two adjacent shards dies): server 2
#          finds server 1's port refusing and claims shard 0 within 3 s
#          of the kill, not after the liveness timeout; the workers, whose
#          next server of shard 0's chain refuses too, pass it over for
#          server 2; server 2 claims shard 1 as well; the workers and
#          servers 2 and 3 exit 0 and total_samples is exactly 10 × 4,880.
#   chain_rejoin  3 servers with --replicas=2 (chains of three), 2 workers,
#          6 epochs, cluster.liveness_timeout_ms=10000; after worker 0 logs
#          epoch 2 both workers are stopped (SIGSTOP), so that neither hears
#          from shard 0's first claimant; SIGKILL server 0: server 1 claims
#          shard 0 and server 2 drops its copy and joins that claim again
#          as a learner, on a new port; once it caught up, SIGKILL server 1:
#          server 2 claims shards 0 and 1 and publishes shard 0's new port;
#          the workers, continued, find both ports of shard 0's chain they
#          know refusing, read the shard's rendezvous entry and follow it to
#          server 2's claim; the workers and server 2 exit 0 and
#          total_samples is exactly 6 × 4,880.
# No fixed sleeps: every wait polls with a bound; every process runs under
# `timeout` and is killed on exit.
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"
limit_s=240
fail_lines=25

# 8 epochs where P@1 is gated (kill, curve) or where 20 checkpoints are
# (checkpoints); 20 where the job must outlast the launcher's replacements
# catching up (launch_replace: one for each chain server 0's death left
# short) and for join's two copies; 5 where only the exact sample count is (the
# kill comes after epoch 3, and the workers wait for the claim), also
# launch_kill, whose replacements may still be joining when the job ends
# (the launcher stops them then), and launch_stop, where the replacements
# start once the stopped server's shard was claimed. (declined
# fails the job: 8 or 5 take the same time.)
epochs=8
case "$mode" in
  pause | ondemand | early | launch_kill | launch_kill_two | launch_stop_two) epochs=5 ;;
  join | launch_replace | launch_stop) epochs=20 ;;
  chain | chain_curve | chain_adjacent) epochs=10 ;;
  chain_rejoin) epochs=6 ;;
  launch_chain) epochs=20 ;;
esac
servers=3
replicas=1
case "$mode" in chain | chain_curve | chain_adjacent | launch_chain) servers=4 replicas=2 ;; esac
[ "$mode" = chain_rejoin ] && replicas=2
# chain_adjacent: long enough that a claim waiting for it is told from one
# that does not; chain_rejoin: that a worker following the rendezvous is
# told from one giving the shard up, and that the workers stopped meanwhile
# are not given up by the servers' heartbeats.
liveness_ms=2000
case "$mode" in chain_adjacent | chain_rejoin) liveness_ms=10000 ;; esac
flags=(--config=tests/data/bibtex_fixed.pbtxt --epochs=$epochs --staleness=2 --num_servers=$servers --num_workers=2
       --replicas=$replicas --rendezvous="file:$tmp/rdzv" --liveness_timeout_ms=$liveness_ms)
mkdir -p "$tmp/rdzv"
if [ "$mode" = curve ] || [ "$mode" = chain_curve ]; then
  keys="$tmp/keys"
  timeout 30 "$bin/tether-keygen" --out="$keys" --name=server > /dev/null || fail "tether-keygen server"
  timeout 30 "$bin/tether-keygen" --out="$keys" --name=worker > /dev/null || fail "tether-keygen worker"
  flags+=(--server_secret_key_file="$keys/server.key" --server_public_key_file="$keys/server.pub"
          --client_secret_key_file="$keys/worker.key" --authorized_keys="$keys/worker.pub")
fi

start_all() {
  start_servers
  start_workers2
}

start_servers() {
  local s
  server_pids=()
  for ((s = 0; s < servers; ++s)); do
    timeout -k 5 "$limit_s" "$bin/tether-server" "${flags[@]}" --shard=$s --listen=tcp://127.0.0.1:0 \
      > "$tmp/server$s.log" 2>&1 &
    pids+=($!)
    server_pids+=($!)
  done
}

start_workers2() {
  local r
  for ((r = 0; r < 2; ++r)); do
    local extra=()
    [ "$r" = 0 ] && extra=(--metrics_out="$tmp/metrics.json")
    timeout -k 5 "$limit_s" "$bin/tether-worker" "${flags[@]}" --rank=$r "${extra[@]}" > "$tmp/worker$r.log" 2>&1 &
    pids+=($!)
    wpid[$r]=$!
  done
}

exact_samples() {  # sets $total: the metrics' total_samples, which must be epochs × 4,880
  total=$(metric "$tmp/metrics.json" total_samples)
  [ "$total" = $((epochs * 4880)) ] || fail "total_samples $total, want $((epochs * 4880))"
}

launcher_exit_zero() {  # WHAT: the launcher exits (within the test's limit) with 0 after WHAT
  exits_within "$launcher" $((limit_s * 1000)) || fail "the launcher still runs"
  wait_code "$launcher"
  pids=()
  [ "$rc" = 0 ] || fail "the launcher exited $rc after $1, want 0"
}

check_finished() {  # the workers and servers 1, 2 exit 0; the samples are exact
  wait_zero "workers and servers 1, 2" "${wpid[0]}" "${wpid[1]}" "${server_pids[1]}" "${server_pids[2]}"
  exact_samples
  grep -q "claimed shard 0" "$tmp/server1.log" || fail "server 1 did not log its claim of shard 0"
  echo "total_samples $total"
}

run_bsp() {  # NAME VICTIM(-1: none): one BSP run, its checkpoint exported
  local name=$1 victim=$2 s
  local f=(--config=tests/data/bibtex_fixed.pbtxt --epochs=4 --staleness=0 --optimizer=SGD --learning_rate=0.05
           --num_servers=2 --num_workers=1 --replicas=1 --rendezvous="file:$tmp/rdzv" --liveness_timeout_ms=2000
           --checkpoint_dir="$tmp/ck")
  # The same paths every run: the model file carries the job's config.
  rm -rf "$tmp/rdzv" "$tmp/ck"
  mkdir -p "$tmp/rdzv"
  local sp=()
  for ((s = 0; s < 2; ++s)); do
    timeout -k 5 "$limit_s" "$bin/tether-server" "${f[@]}" --shard=$s --listen=tcp://127.0.0.1:0 \
      > "$tmp/$name-server$s.log" 2>&1 &
    pids+=($!)
    sp+=($!)
  done
  timeout -k 5 "$limit_s" "$bin/tether-worker" "${f[@]}" --rank=0 --metrics_out="$tmp/$name.json" \
    > "$tmp/$name-worker0.log" 2>&1 &
  pids+=($!)
  local w=$!
  if ((victim >= 0)); then
    wait_log "$tmp/$name-worker0.log" "epoch 2/4" 2400
    kill -9 "$(inner "${sp[$victim]}")"
    wait_code "${sp[$victim]}"
    wait_zero "$name: the worker and the other server" "$w" "${sp[$((1 - victim))]}"
  else
    wait_zero "$name: the worker and the servers" "$w" "${sp[@]}"
  fi
  pids=()
  timeout 120 "$bin/tether-export" --checkpoint="$tmp/ck" --out="$tmp/$name.safetensors" \
    > "$tmp/$name-export.log" 2>&1 || fail "$name: tether-export failed"
}

# Equal but for time, rates, failover counts and the count of reads served:
# the claiming copy serves again the pulls the worker sent again (a read
# answered by a primary that died is answered anew).
same_metrics() {  # A.json B.json
  python3 - "$1" "$2" <<'PY' || fail "$1 and $2 differ"
import json, sys
sys.path.insert(0, "tests/integration")
from golden_compare import pinned, differences
def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items()
                if "failover" not in k and k not in ("pulls", "rows_pulled", "key_lists_used", "deferred_pulls")}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v
a, b = (strip(pinned(json.load(open(p)))) for p in sys.argv[1:3])
diff = list(differences(a, b))
print("\n".join(diff[:20]))
sys.exit(1 if diff else 0)
PY
}

start_launcher() {  # EPOCH [FLAGS...]: the job under tether-launch, logging to $tmp/launch.log; waits for EPOCH
  local epoch=$1
  shift
  timeout -k 5 "$limit_s" "$bin/tether-launch" --config=tests/data/bibtex_fixed.pbtxt --servers $servers --workers 2 \
    --replicas=$replicas --epochs=$epochs --staleness=2 --liveness_timeout_ms=2000 --metrics_out="$tmp/metrics.json" \
    "$@" > "$tmp/launch.log" 2>&1 &
  launcher=$!
  pids+=($launcher)
  wait_log "$tmp/launch.log" "epoch $epoch/$epochs" 2400
}

workers_left() {  # both workers logged "leaving:" (their last line) in the launcher's log
  [ "$(grep -c '\[worker [01]\] leaving: ' "$tmp/launch.log")" -ge 2 ]
}

launched_server() {  # S: sets $spid, the pid of the launcher's server S
  spid=$(sed -n "s/.*\[launch\] started server $1 (pid \([0-9]*\)).*/\1/p" "$tmp/launch.log")
  [ -n "$spid" ] || fail "no pid for server $1 in the launcher's log"
}

case "$mode" in
early)
  start_servers
  wait_log "$tmp/server0.log" "replica of shard 0 joined" 600
  kill -9 "$(inner "${server_pids[0]}")"
  wait_code "${server_pids[0]}"
  wait_log "$tmp/server1.log" "claimed shard 0" 600
  start_workers2
  check_finished
  grep -q "published .* as shard 0 in rendezvous" "$tmp/server1.log" || fail "the claimed shard was not published"
  ;;
declined)
  start_all
  wait_log "$tmp/worker0.log" "epoch 3/$epochs" 2400
  p1=$(inner "${server_pids[1]}")
  kill -STOP "$p1"
  # The replica's process must be stopped before its primary dies: one
  # that saw the death first claims the shard, as it should.
  poll 100 grep -q '^State:[[:space:]]*T' "/proc/$p1/status" || fail "server 1 did not stop"
  kill -9 "$(inner "${server_pids[0]}")"
  wait_code "${server_pids[0]}"
  # Stopped until a worker gave the stopped copy up (liveness timeout,
  # 2 s: past half of it, so the copy finds its own stall when it wakes).
  wait_log "$tmp/worker0.log" "server shard 0 .*is gone" 400
  kill -CONT "$p1"
  end=$(($(now_ms) + 30000))
  for p in "${wpid[0]}" "${wpid[1]}" "${server_pids[1]}" "${server_pids[2]}"; do
    left=$((end - $(now_ms)))
    ((left > 0)) && exits_within "$p" "$left" || fail "process $p still runs 30 s after the kill"
  done
  for p in "${wpid[0]}" "${wpid[1]}"; do
    wait_code "$p"
    [ "$rc" != 0 ] || fail "a worker exited 0 though shard 0 was lost"
  done
  grep -q "does not claim shard 0" "$tmp/server1.log" || fail "server 1 did not say it declines the claim"
  grep -q "server shard 0 .*is gone\|shard 0.*never answered" "$tmp"/worker*.log || fail "no worker named shard 0"
  pids=()
  echo "shard 0 lost with its replica stopped: every process exited non-zero"
  ;;
ondemand)
  flags+=(--data_on_demand=true)
  start_all
  wait_log "$tmp/worker0.log" "epoch 3/$epochs" 2400
  kill -9 "$(inner "${server_pids[0]}")"
  wait_code "${server_pids[0]}"
  check_finished
  ;;
checkpoints)
  flags+=(--checkpoint_dir="$tmp/ck" --checkpoint_every_clocks=10 --checkpoint_keep_last=100)
  start_all
  wait_log "$tmp/worker0.log" "epoch 3/$epochs" 2400
  kill -9 "$(inner "${server_pids[0]}")"
  wait_code "${server_pids[0]}"
  check_finished
  n=0
  for d in "$tmp"/ck/ckpt-*; do
    [ -f "$d/MANIFEST" ] || continue
    timeout 120 "$bin/tether-export" --checkpoint="$d" --out="$tmp/m.safetensors" > "$tmp/export.log" 2>&1 \
      || fail "checkpoint $d has a MANIFEST but does not export: $(tail -2 "$tmp/export.log")"
    n=$((n + 1))
  done
  ((n >= 20)) || fail "only $n checkpoints with a MANIFEST"
  echo "$n checkpoints with a MANIFEST, each exported"
  ;;
bsp)
  run_bsp ref -1
  for v in 0 1; do
    run_bsp "kill$v" "$v"
    grep -q "claimed shard $v" "$tmp/kill$v-server$(((v + 1) % 2)).log" || fail "shard $v was not claimed"
    same_metrics "$tmp/ref.json" "$tmp/kill$v.json"
    cmp "$tmp/ref.safetensors" "$tmp/kill$v.safetensors" || fail "the model exported after shard $v's failover differs"
    echo "shard $v killed: metrics and exported model bit-identical to the undisturbed run"
  done
  ;;
join)
  start_all
  wait_log "$tmp/worker0.log" "epoch 3/$epochs" 2400
  kill -9 "$(inner "${server_pids[0]}")"
  wait_code "${server_pids[0]}"
  joined=()
  for r in a b; do
    timeout -k 5 "$limit_s" "$bin/tether-server" "${flags[@]}" --join_as_replica --listen=tcp://127.0.0.1:0 \
      > "$tmp/join$r.log" 2>&1 &
    pids+=($!)
    joined+=($!)
    wait_log "$tmp/join$r.log" "caught up with shard" 600
  done
  grep -q "caught up with shard 0's primary" "$tmp/joina.log" || fail "the first replacement did not copy shard 0"
  grep -q "caught up with shard 2's primary" "$tmp/joinb.log" || fail "the second replacement did not copy shard 2"
  # Both workers told of shard 0's new replica (with their next reply from shard 0).
  wait_log "$tmp/worker0.log" "server shard 0's replicas" 600
  wait_log "$tmp/worker1.log" "server shard 0's replicas" 600
  kill -9 "$(inner "${server_pids[1]}")"
  wait_code "${server_pids[1]}"
  wait_zero "workers, server 2 and the replacements" "${wpid[0]}" "${wpid[1]}" "${server_pids[2]}" "${joined[@]}"
  exact_samples
  grep -q "claimed shard 0" "$tmp/joina.log" || fail "the replacement did not claim shard 0"
  grep -q "claimed shard 1" "$tmp/server2.log" || fail "server 2 did not claim shard 1"
  echo "total_samples $total; shard 0 failed over twice, the second time onto a replacement"
  ;;
chain | chain_curve)
  start_all
  wait_log "$tmp/worker0.log" "epoch 2/$epochs" 2400
  kill -9 "$(inner "${server_pids[0]}")"
  wait_code "${server_pids[0]}"
  wait_log "$tmp/server2.log" "caught up with shard 0's primary" 1200
  # Both workers told of shard 0's new replica (with their next reply from shard 0).
  wait_log "$tmp/worker0.log" "server shard 0's replicas" 600
  wait_log "$tmp/worker1.log" "server shard 0's replicas" 600
  # Shard 0 is a chain of two (1 → 4): a replacement grows it back to three.
  timeout -k 5 "$limit_s" "$bin/tether-server" "${flags[@]}" --join_as_replica --listen=tcp://127.0.0.1:0 \
    > "$tmp/join.log" 2>&1 &
  pids+=($!)
  joined=$!
  wait_log "$tmp/join.log" "caught up with shard 0's primary" 1200
  wait_log "$tmp/server1.log" "joined shard 0 at .* caught up at entry [0-9]*: replies wait for it from now on; generation [0-9]*: 1 → 4 → 5$" 600
  # Both workers told of both replicas (with their next reply from shard 0).
  wait_log "$tmp/worker0.log" "server shard 0's replicas (chain generation [0-9]*): tcp://[^,]*, tcp://" 600
  wait_log "$tmp/worker1.log" "server shard 0's replicas (chain generation [0-9]*): tcp://[^,]*, tcp://" 600
  kill -9 "$(inner "${server_pids[1]}")"
  wait_code "${server_pids[1]}"
  wait_zero "workers, servers 2, 3 and the replacement" "${wpid[0]}" "${wpid[1]}" "${server_pids[2]}" \
    "${server_pids[3]}" "$joined"
  exact_samples
  grep -q "asks shard 0's primary" "$tmp/join.log" || fail "the replacement did not ask shard 0 first"
  ! grep -q "asking the next shard" "$tmp/join.log" || fail "shard 0, a chain of two, refused the replacement"
  grep -q "claimed shard 0" "$tmp/server1.log" || fail "server 1 did not claim shard 0"
  grep -q "claimed shard 0" "$tmp/server2.log" || fail "server 2 did not claim shard 0 after server 1"
  grep -q "claimed shard 1" "$tmp/server2.log" || fail "server 2 did not claim shard 1"
  grep -q "caught up with shard 1's primary" "$tmp/server3.log" || fail "server 3 did not join shard 1's claim"
  gate "$(metric "$tmp/metrics.json" precision_at_1)" 0.58 "P@1"
  echo "total_samples $total; shards 0 and 1 failed over along their chains of three"
  ;;
chain_adjacent)
  start_all
  wait_log "$tmp/worker0.log" "epoch 2/$epochs" 2400
  t0=$(now_ms)
  kill -9 "$(inner "${server_pids[0]}")" "$(inner "${server_pids[1]}")"
  wait_log "$tmp/server2.log" "claimed shard 0" 1200
  claim_ms=$(($(now_ms) - t0))
  [ "$claim_ms" -lt 3000 ] || fail "server 2 claimed shard 0 $claim_ms ms after the kill, want < 3000"
  wait_codes "${server_pids[0]}" "${server_pids[1]}"
  wait_zero "workers and servers 2, 3" "${wpid[0]}" "${wpid[1]}" "${server_pids[2]}" "${server_pids[3]}"
  exact_samples
  grep -q "replica at .* (before this one in its chain) refused the connection" "$tmp/server2.log" ||
    fail "server 2 did not find server 1's port refusing"
  grep -q "claimed shard 1" "$tmp/server2.log" || fail "server 2 did not claim shard 1"
  for r in 0 1; do
    grep -q "server shard 0: the next server of its chain at .* refused the connection" "$tmp/worker$r.log" ||
      fail "worker $r did not pass over server 1 for shard 0"
  done
  echo "total_samples $total; server 2 claimed shard 0 $claim_ms ms after servers 0 and 1 died together"
  ;;
chain_rejoin)
  start_all
  wait_log "$tmp/worker0.log" "epoch 2/$epochs" 2400
  w0=$(inner "${wpid[0]}") w1=$(inner "${wpid[1]}")
  kill -STOP "$w0" "$w1"
  for p in "$w0" "$w1"; do
    poll 100 grep -q '^State:[[:space:]]*T' "/proc/$p/status" || fail "worker process $p did not stop"
  done
  kill -9 "$(inner "${server_pids[0]}")"
  wait_code "${server_pids[0]}"
  wait_log "$tmp/server1.log" "claimed shard 0" 600
  t0=$(now_ms)
  wait_log "$tmp/server2.log" "joins it as a learner" 600
  wait_log "$tmp/server2.log" "caught up with shard 0's primary" 1200
  kill -9 "$(inner "${server_pids[1]}")"
  kill_ms=$(($(now_ms) - t0))
  wait_code "${server_pids[1]}"
  poll 1200 grep -q "claimed shard 0" "$tmp/server2.log" || fail "server 2 did not claim shard 0"
  poll 1200 grep -q "claimed shard 1" "$tmp/server2.log" || fail "server 2 did not claim shard 1"
  kill -CONT "$w0" "$w1"
  t1=$(now_ms)
  wait_zero "workers and server 2" "${wpid[0]}" "${wpid[1]}" "${server_pids[2]}"
  exact_samples
  for r in 0 1; do
    grep -q "server shard 0: its chain as this worker knows it ends at .*; its entry in rendezvous file:.* names tcp://.*, a process that claimed the shard since: following it there" "$tmp/worker$r.log" ||
      fail "worker $r did not follow shard 0's rendezvous entry"
  done
  echo "total_samples $total; server 1 killed $kill_ms ms after its claim, once server 2 caught up; the job ended $(($(now_ms) - t1)) ms after the workers were continued"
  ;;
kill | curve)
  start_all
  wait_log "$tmp/worker0.log" "epoch 3/$epochs" 2400
  kill -9 "$(inner "${server_pids[0]}")"
  t0=$(now_ms)
  wait_code "${server_pids[0]}"
  check_finished
  gate "$(metric "$tmp/metrics.json" precision_at_1)" 0.58 "P@1"
  grep -h "following\|claimed shard\|serving shard" "$tmp"/*.log | head -5
  if [ "$mode" = curve ]; then
    grep -q "CURVE on" "$tmp/server1.log" || fail "server 1 did not turn CURVE on"
    ! grep -h "refused a connection\|replication refused" "$tmp"/server[12].log || fail "a server refused a connection"
  fi
  ;;
pause)
  start_all
  wait_log "$tmp/worker0.log" "epoch 3/$epochs" 2400
  kill -STOP "$(inner "${server_pids[0]}")"
  wait_log "$tmp/server1.log" "claimed shard 0" 200
  kill -CONT "$(inner "${server_pids[0]}")"
  expect_exit "${server_pids[0]}" 1 20000 "server 0 (stopped, then continued)"
  grep -q "stops serving it" "$tmp/server0.log" || fail "server 0 did not say it steps down"
  check_finished
  ;;
launch_kill)
  start_launcher 3
  launched_server 0
  victim=$spid
  kill -9 "$victim"
  # The replacements joining shards 0 and 2 may not have caught up when
  # the job ends: the launcher stops them then rather than wait for them.
  poll $((limit_s * 20)) workers_left || fail "the workers did not both log that they leave"
  exits_within "$launcher" 15000 || fail "the launcher still runs 15 s after every worker left"
  launcher_exit_zero "server 0 was killed"
  grep "\[launch\] stopping replacement" "$tmp/launch.log" | sed 's/^.*\] //' || true
  if grep -q "\[launch\] stopping replacement" "$tmp/launch.log"; then
    grep -q "as stopped at the job's end; it joined shard [02] as its replica and never served it" "$tmp/launch.log" \
      || fail "the launcher did not log the end of a replacement it stopped"
  fi
  grep -q "server 0 (pid $victim) was killed by signal 9.*shard 0 at tcp://.*shard 0 is served by server 1's replica now" \
    "$tmp/launch.log" || fail "the launcher did not name the dead process, its shard and the replica serving it"
  grep -q "claimed shard 0" "$tmp/launch.log" || fail "server 1 did not log its claim of shard 0"
  exact_samples
  failovers=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1])).get("servers", []); print(s[0].get("failovers", "-") if s else "-")' "$tmp/metrics.json")
  [ "$failovers" = "-" ] || [ "$failovers" -ge 1 ] || fail "shard 0 counts $failovers failovers, want ≥ 1"
  echo "total_samples $total, shard 0 failovers $failovers"
  grep -h "shard 0 is served by\|job finished" "$tmp/launch.log" | head -3
  ;;
launch_kill_two)
  start_launcher 3 --max_replacements=0
  launched_server 1
  first=$spid
  launched_server 0
  victim=$spid
  kill -9 "$first"
  wait_log "$tmp/launch.log" "shard 1 is served by server 2's replica now" 600
  kill -9 "$victim"
  exits_within "$launcher" 30000 || fail "the launcher still runs 30 s after servers 1 and 0 were killed"
  wait_code "$launcher"
  [ "$rc" = 1 ] || fail "the launcher exited $rc after shard 0 lost both its holders, want 1"
  grep -q "server 0 (pid $victim) was killed by signal 9.*shard 0 at tcp://" "$tmp/launch.log" \
    || fail "the launcher did not name the second dead process"
  grep -q "shard 0 is lost: every server process that held it (0, 1) is dead" "$tmp/launch.log" \
    || fail "the launcher did not name the lost shard"
  launched_children_reaped "$tmp/launch.log" 'server\|worker'
  pids=()
  grep -h "shard 0 is lost" "$tmp/launch.log" | head -1
  ;;
launch_stop_two)
  start_launcher 3 --max_replacements=0
  launched_server 1
  s1=$spid
  launched_server 2
  s2=$spid
  # A stopped process outlives its parent: whatever happens, it is killed.
  trap 'for p in "$s1" "$s2"; do if [ "$(ps -o comm= -p "$p" 2>/dev/null)" = tether-server ]; then kill -9 "$p"; fi; done; tether_test_cleanup' EXIT
  kill -STOP "$s1" "$s2"
  for p in "$s1" "$s2"; do
    poll 100 grep -q '^State:[[:space:]]*T' "/proc/$p/status" || fail "server process $p did not stop"
  done
  exits_within "$launcher" 30000 || fail "the launcher still runs 30 s after servers 1 and 2 were stopped"
  wait_code "$launcher"
  [ "$rc" = 1 ] || fail "the launcher exited $rc after shard 1's holders were stopped, want 1"
  final=$(grep "\[launch\] job failed after" "$tmp/launch.log" | tail -1)
  grep -q "(exit code 1): shard 1 is lost: every server process left that holds it (1\(, 2\)\?) is stopped$" <<<"$final" \
    || fail "the launcher's final line does not name shard 1: $final"
  ! grep -q "shard [02] is lost" "$tmp/launch.log" || fail "the launcher called shard 0 or 2 lost: $(grep "shard [02] is lost" "$tmp/launch.log")"
  launched_children_reaped "$tmp/launch.log" 'server\|worker'
  pids=()
  echo "${final#*\] }"
  ;;
launch_chain)
  start_launcher 2
  launched_server 0
  victim=$spid
  kill -9 "$victim"
  wait_log "$tmp/launch.log" "server 0 (pid $victim) was killed by signal 9.*shard 0 is served by server 1's replica now; shard 0 has 1 of 2 replicas left; shard 2 has 1 of 2 replicas left; shard 3 has 1 of 2 replicas left" 600
  # Each chain is back at three processes: its primary logs the chain once
  # the replacement caught up (shard 0: server 2 joined server 1's claim
  # again first).
  for s in 0 2 3; do
    wait_log "$tmp/launch.log" "started a replacement for server process 0: joins shard $s as its replica" 600
    wait_log "$tmp/launch.log" "the replica that joined shard $s at .* caught up at entry [0-9]*: replies wait for it from now on; generation [0-9]*: [0-9]* → [0-9]* → [0-9]*$" 2400
  done
  launcher_exit_zero "server 0 was killed and three replacements joined"
  n=$(grep -c "\[launch\] started a replacement" "$tmp/launch.log")
  [ "$n" = 3 ] || fail "$n replacements started, want 3"
  grep -q "replies wait for it from now on; generation [0-9]*: 1 → [0-9]* → [0-9]*$" "$tmp/launch.log" \
    || fail "shard 0's chain (served by server 1) is not back at three"
  grep -q "exited with code 5" "$tmp/launch.log" && fail "a replacement was refused as not needed"
  launched_children_reaped "$tmp/launch.log"
  exact_samples
  echo "total_samples $total; 3 replacements, every chain back at three"
  grep -h "replies wait for it from now on" "$tmp/launch.log" | sed 's/^.*\] \[/[/' | head -6
  ;;
launch_stop)
  start_launcher 2
  launched_server 0
  victim=$spid
  # A stopped process outlives its parent: whatever happens, it is killed.
  trap 'if [ "$(ps -o comm= -p "$victim" 2>/dev/null)" = tether-server ]; then kill -9 "$victim"; fi; tether_test_cleanup' EXIT
  kill -STOP "$victim"
  poll 100 grep -q '^State:[[:space:]]*T' "/proc/$victim/status" || fail "server 0 did not stop"
  wait_log "$tmp/launch.log" "server 0 (pid $victim) still runs, but shard 0's rendezvous entry moved from its tcp://[0-9.:]* to tcp://[0-9.:]*: another process claimed the shard .*killing it (SIGKILL)" 600
  wait_log "$tmp/launch.log" "server 0 (pid $victim) was killed by signal 9.*shard 0 is served by server 1's replica now" 200
  for s in 0 2; do
    wait_log "$tmp/launch.log" "started a replacement for server process 0: joins shard $s as its replica" 200
    wait_log "$tmp/launch.log" "caught up with shard $s's primary" 1200
  done
  launcher_exit_zero "server 0 was stopped for good"
  grep -q "claimed shard 0" "$tmp/launch.log" || fail "server 1 did not log its claim of shard 0"
  ! grep -q "still running .* after the last worker finished" "$tmp/launch.log" || fail "the launcher waited for server 0"
  exited "$victim" || fail "server 0 outlived the launcher"
  launched_children_reaped "$tmp/launch.log"
  exact_samples
  echo "total_samples $total"
  grep -h "still runs, but shard\|shard 0 is served by\|started a replacement" "$tmp/launch.log" | sed 's/^.*\] \[/[/' | head -4
  ;;
launch_replace)
  start_launcher 2
  launched_server 0
  first=$spid
  launched_server 2
  victim=$spid
  kill -9 "$first"
  wait_log "$tmp/launch.log" "started a replacement for server process 0: joins shard 2 as its replica" 600
  wait_log "$tmp/launch.log" "caught up with shard 2's primary" 1200
  # Both workers told of the new replica (with their next reply from shard 2).
  wait_log "$tmp/launch.log" "worker 0\] server shard 2's replicas" 600
  wait_log "$tmp/launch.log" "worker 1\] server shard 2's replicas" 600
  kill -9 "$victim"
  launcher_exit_zero "servers 0 and 2 were killed, a replacement holding shard 2"
  grep -q "server 2 (pid $victim) was killed by signal 9.*shard 2 is served by replacement [0-9]* now" \
    "$tmp/launch.log" || fail "the launcher did not name the replacement serving shard 2"
  launched_children_reaped "$tmp/launch.log"
  exact_samples
  echo "total_samples $total"
  grep -h "started a replacement\|shard 2 is served by" "$tmp/launch.log" | head -4
  ;;
*)
  fail "unknown mode $mode"
  ;;
esac
