#!/usr/bin/env bash
# A stop signal is honoured within about a second whatever a process waits
# for, and a stopped job with checkpoint.dir writes its stop checkpoint
# (docs/OPERATIONS.md, "A dead server" and "Checkpoints"). Bibtex, by hand
# on 127.0.0.1 unless said otherwise. Usage: stop_signal_test.sh MODE BIN_DIR
#   waiting      checkpoint.dir set, 1 server, worker 1 never started.
#                A fresh worker 0 waiting for worker 1 to join: SIGTERM, exit
#                143 within 3 s; then SIGTERM to its server, still waiting
#                for worker 1: exit 143 within 3 s. The same resumed from a
#                checkpoint (--resume_from). Resumed again, the server
#                signalled first while worker 0 is joined: exit 143 within
#                3 s, and worker 0 exits 1 naming the gone shard. (The stop
#                checkpoint's grace, 60 s on a worker and 20 s on a server,
#                is for a job that trains, not for one waiting to start.)
#   launch_corrupt  tether-launch --resume_from a checkpoint whose
#                worker-1.state is corrupt: worker 1 exits 1 naming the file,
#                the launcher stops the rest, and exits 1 within 5 s of that,
#                with every child reaped.
#   blocked      1 server, 2 workers, BSP, checkpoint.dir set, worker 1 slowed
#                (train.slowdown 40, so worker 0 is blocked in a wait on the
#                staleness bound nearly all the time). SIGTERMs for 0.5 s at
#                worker 0, then one to worker 1, twice over: every time both
#                write the stop checkpoint (its MANIFEST exists, both
#                workers' state in it) and exit 143, and the server exits 0
#                (both said BYE). (A signal inside a receive, which once lost
#                the stop checkpoint, is a narrow race here; message_test
#                provokes it at will.)
#   chunk_wait   data on demand, 1 server, 2 workers, BSP, 2 epochs of 2
#                chunks (3500 and 1380 rows): the worker with the small
#                chunk waits for the other's at each epoch's end. SIGTERM to
#                the waiting worker alone, while it waits in the middle of
#                the job (it trained a chunk before): it asks for the
#                checkpoint itself (shard 0 logs its request), takes it with
#                the other worker and exits 143 within 10 s; the other then
#                stops too (143), the server exits 0. Resumed from the
#                waiter's stop checkpoint, the worker that gets no chunk
#                waits for its first one: SIGTERM to it there, the same.
#                Resumed from that one, the job ends (exit 0) with exactly
#                4880 rows counted in each epoch by shard 0.
#   early        a job stopped just after its start: 1 server, 2 workers,
#                1 epoch, 10 minibatches of 8 rows a clock, worker 1
#                slowed 4 times (clocks about 0.2 s apart), checkpoint.dir set, for K = 0, 1, 2, 3 in turn:
#                once shard 0's /metrics says a worker reached clock K (K =
#                0: once both joined), SIGTERM to the server and both
#                workers (a launcher's stop). Within 15 s every process has
#                exited: each worker 143, after a stop checkpoint whose
#                MANIFEST exists, or saying why it has none; the server 0 or
#                143. The job resumed from the latest complete checkpoint
#                ends (exit 0) with exactly 4880 samples trained.
#   early_on_demand  the same with data on demand in one chunk an epoch:
#                one worker trains it, the other waits for its first chunk
#                all along; the resumed job's shard 0 counts 4880 rows.
#   server_stop  2 servers, 2 workers, 1 epoch, 10 minibatches of 8 rows a
#                clock, staleness 2, worker 1 slowed 20 times, checkpoint.dir set. Once
#                worker 0 reached clock 3, SIGTERM to server 1 alone (a
#                preempted server node): it asks both workers to take a
#                stop checkpoint; they take it and exit 143 within 15 s,
#                server 1 exits 143, server 0 exits 0, and the checkpoint's
#                MANIFEST and both shards' files exist. Resumed from it, the
#                job ends (exit 0) with exactly 4880 samples trained.
#   server_stop_no_dir  the same with --checkpoint_dir given to the workers
#                only: the servers learn the folder from them and serve the
#                stop checkpoint all the same.
# No fixed sleeps wait for an event: every wait polls with a bound.
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"
limit_s=60

# run_to_end SERVERS PREFIX METRICS WHAT: starts SERVERS servers and
# workers 0 and 1 with ${flags[@]} (logs $tmp/PREFIXworker{0,1}.log; worker 0
# writes the metrics file METRICS) and waits for every process; one that
# exits non-zero fails the test: "WHAT: a process exited N".
run_to_end() {
  local servers=$1 prefix=$2 metrics=$3 what=$4 p
  rm -f "$tmp"/s*.port
  start_servers "$servers"
  start_worker 0 "$tmp/${prefix}worker0.log" --metrics_out="$metrics"
  w0=$started
  start_worker 1 "$tmp/${prefix}worker1.log"
  w1=$started
  wait_zero "$what (workers 0, 1, then the servers)" "$w0" "$w1" "${server_pids[@]}"
  pids=()
}

# make_checkpoint: a 1-epoch job of 1 server and 2 workers with a
# checkpoint every 20 clocks; sets flags (the job's) and ckpt (its
# checkpoint at clock 20, which must be complete).
make_checkpoint() {
  flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=1 --num_workers=2 --epochs=1
         --checkpoint_dir="$tmp/ck" --checkpoint_every_clocks=20)
  start_servers 1
  start_worker 1 "$tmp/first-worker1.log"
  w1=$started
  start_worker 0 "$tmp/first-worker0.log"
  w0=$started
  wait_zero "the job making the checkpoint (workers 0, 1, server 0)" "$w0" "$w1" "${server_pids[0]}"
  pids=()
  ckpt="$tmp/ck/ckpt-000000000020"
  [ -f "$ckpt/MANIFEST" ] || fail "no checkpoint at clock 20 in $tmp/ck: $(ls "$tmp/ck")"
}

case "$mode" in
waiting)
  # A checkpoint of a 2-worker job to resume from.
  make_checkpoint

  # A fresh job: worker 0 joined and waits for worker 1.
  flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=1 --num_workers=2 --epochs=1
         --checkpoint_dir="$tmp/ck-fresh")
  rm -f "$tmp/s0.port"
  start_servers 1
  start_worker 0 "$tmp/fresh-worker0.log"
  w0=$started
  wait_log "$tmp/fresh-worker0.log" "connected to 1 server" 400
  stop_within "$w0" "fresh worker 0 (waiting for worker 1)" 3000
  grep -q "stop requested" "$tmp/fresh-worker0.log" || fail "worker 0 did not log the stop"
  wait_log "$tmp/server0.log" "worker 0 left" 100
  stop_within "${server_pids[0]}" "server 0 (waiting for worker 1)" 3000
  pids=()

  # Resumed: worker 0 joined and waits for worker 1; SIGTERM to it, then
  # to its server.
  flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=1 --num_workers=2 --epochs=1
         --checkpoint_dir="$tmp/ck" --resume_from="$ckpt")
  mv "$tmp/server0.log" "$tmp/fresh-server0.log"
  rm -f "$tmp/s0.port"
  start_servers 1
  start_worker 0 "$tmp/resumed-worker0.log"
  w0=$started
  wait_log "$tmp/resumed-worker0.log" "connected to 1 server" 400
  grep -q "resuming from $ckpt" "$tmp/resumed-worker0.log" || fail "worker 0 did not resume from $ckpt"
  stop_within "$w0" "resumed worker 0 (waiting for worker 1)" 3000
  wait_log "$tmp/server0.log" "worker 0 left" 100
  stop_within "${server_pids[0]}" "resumed server 0 (waiting for worker 1)" 3000
  pids=()

  # Resumed again, the server signalled first, with worker 0 joined: it has
  # no stop checkpoint to serve; worker 0 then names the gone shard.
  mv "$tmp/server0.log" "$tmp/resumed-server0.log"
  rm -f "$tmp/s0.port"
  start_servers 1
  start_worker 0 "$tmp/again-worker0.log"
  w0=$started
  wait_log "$tmp/again-worker0.log" "connected to 1 server" 400
  stop_within "${server_pids[0]}" "resumed server 0 (worker 0 joined, waiting for worker 1)" 3000
  grep -q "stop requested before 1 worker(s) joined: nothing to checkpoint" "$tmp/server0.log" \
    || fail "server 0 did not say why it stopped at once"
  exits_within "$w0" 3000 || fail "worker 0 still runs 3 s after its server stopped"
  wait_code "$w0"
  [ "$rc" = 1 ] || fail "worker 0 exited $rc after its server stopped, want 1"
  grep -q "server shard 0 at .* is gone" "$tmp/again-worker0.log" || fail "worker 0 did not name the gone shard"
  echo "worker 0: exit 1 after its server stopped, naming the gone shard"
  # Nothing was trained: no new checkpoint beside the one resumed from.
  [ "$(ls -d "$tmp"/ck/ckpt-* | grep -v final)" = "$tmp/ck/ckpt-000000000020" ] ||
    fail "checkpoints after the stop: $(ls "$tmp/ck")"
  pids=()
  ;;
launch_corrupt)
  make_checkpoint
  [ -f "$ckpt/worker-1.state" ] || fail "no worker-1.state in $ckpt"
  # One byte flipped in the middle: the manifest's XXH3 no longer matches.
  size=$(stat -c %s "$ckpt/worker-1.state")
  printf '\xff' | dd of="$ckpt/worker-1.state" bs=1 seek=$((size / 2)) conv=notrunc status=none
  timeout -k 5 "$limit_s" "$bin/tether-launch" --config=tests/data/bibtex_fixed.pbtxt --servers=1 --workers=2 --epochs=1 \
    --checkpoint_dir="$tmp/ck" --resume_from="$ckpt" > "$tmp/launch.log" 2>&1 &
  launcher=$!
  pids+=($launcher)
  poll 1000 grep -q "\[launch\] worker 1 (pid [0-9]*) exited with code 1" "$tmp/launch.log" \
    || fail "worker 1 did not fail on the corrupt worker-1.state"
  t0=$(now_ms)
  exits_within "$launcher" 5000 || fail "the launcher still runs 5 s after worker 1 failed"
  took=$(($(now_ms) - t0))
  wait_code "$launcher"
  [ "$rc" = 1 ] || fail "the launcher exited $rc, want 1"
  grep -q "worker-1.state" "$tmp/launch.log" || fail "nobody named the corrupt worker-1.state"
  for p in $(sed -n 's/.*\[launch\] started \(server\|worker\) [0-9]* (pid \([0-9]*\)).*/\2/p' "$tmp/launch.log"); do
    [ -r "/proc/$p/status" ] && ! grep -q '^State:[[:space:]]*Z' "/proc/$p/status" && fail "child $p outlived the launcher"
  done
  pids=()
  grep -q "checksum mismatch" "$tmp/launch.log" || fail "worker 1 did not say the file is corrupt"
  echo "launcher: exit 1 ${took} ms after worker 1 refused the corrupt worker-1.state"
  ;;
blocked)
  for round in 1 2; do
    flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=1 --num_workers=2 --epochs=3 --staleness=0
           --checkpoint_dir="$tmp/ck$round" --slowdown=40 --slowdown_rank=1 --progress_every_s=1)
    rm -f "$tmp/s0.port"
    start_servers 1
    start_worker 0 "$tmp/worker0.log"
    w0=$started
    start_worker 1 "$tmp/worker1.log"
    w1=$started
    # Training well under way (clock 3 or later): both workers are past
    # the start, so the stop's checkpoint clock is ahead of both.
    poll 1200 grep -q "%, clock \([3-9]\|[1-9][0-9]\)," "$tmp/worker0.log" \
      || fail "round $round: worker 0 never reached clock 3"
    i0=$(pgrep -P "$w0" || echo "$w0")
    i1=$(pgrep -P "$w1" || echo "$w1")
    # SIGTERMs for 0.5 s at worker 0, blocked on the staleness bound (more
    # within a second of the first are the same stop request): some land
    # inside its receives and sends. Then worker 1.
    t0=$(now_ms)
    while (($(now_ms) - t0 < 500)); do kill -TERM "$i0" 2>/dev/null || break; sleep 0.01; done
    kill -TERM "$i1"
    exits_within "$w0" 20000 || fail "round $round: worker 0 still runs 20 s after SIGTERM"
    exits_within "$w1" 20000 || fail "round $round: worker 1 still runs 20 s after SIGTERM"
    wait_code "$w0"
    rc0=$rc
    wait_code "$w1"
    rc1=$rc
    exits_within "${server_pids[0]}" 5000 || fail "round $round: server 0 still runs after both workers left"
    wait_code "${server_pids[0]}"
    rcs=$rc
    [ "$rc0 $rc1 $rcs" = "143 143 0" ] \
      || fail "round $round: exit codes (worker 0, worker 1, server) $rc0 $rc1 $rcs, want 143 143 0"
    ck=$(ls -d "$tmp/ck$round"/ckpt-* 2>/dev/null | tail -1)
    [ -n "$ck" ] && [ -f "$ck/MANIFEST" ] || fail "round $round: no stop checkpoint in $tmp/ck$round"
    [ -f "$ck/worker-0.state" ] && [ -f "$ck/worker-1.state" ] || fail "round $round: $ck lacks a worker's state"
    for r in 0 1; do
      grep -q "leaving the job after the checkpoint at clock" "$tmp/worker$r.log" \
        || fail "round $round: worker $r left without its stop checkpoint"
    done
    echo "round $round: stop checkpoint $(basename "$ck"); exits 143 143 0"
    for f in worker0 worker1 server0; do mv "$tmp/$f.log" "$tmp/$f.round$round"; done
    pids=()
  done
  ;;
chunk_wait)
  flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=1 --num_workers=2 --epochs=2 --seed=5 --staleness=0
         --data_on_demand=true --chunk_rows=3500 --minibatch_size=8 --checkpoint_dir="$tmp/ck"
         --checkpoint_keep_last=20)
  base=("${flags[@]}")
  # stop_waiter RUN [FLAGS...]: runs the job; the first worker to log that
  # it waits for a chunk gets a SIGTERM (alone); it must leave after a stop
  # checkpoint it asked for, exit 143 within 10 s; then the other worker is
  # stopped (143) and the server exits 0. Sets $stop_ck (the waiter's stop
  # checkpoint).
  stop_waiter() {
    local run=$1 waiter= other r c
    local -a w=()
    shift
    flags=("${base[@]}" "$@")
    rm -f "$tmp/s0.port"
    start_servers 1
    start_worker 0 "$tmp/$run-worker0.log"
    w[0]=$started
    start_worker 1 "$tmp/$run-worker1.log"
    w[1]=$started
    first_waiter() {
      for r in 0 1; do grep -qs "waiting for a chunk at clock" "$tmp/$run-worker$r.log" && { waiter=$r; return 0; }; done
      return 1
    }
    poll 600 first_waiter || fail "$run: no worker waited for a chunk within 30 s"
    other=$((1 - waiter))
    stop_within "${w[$waiter]}" "$run: worker $waiter (waiting for a chunk)" 10000
    c=$(sed -n 's/.*leaving the job after the checkpoint at clock \([0-9]*\).*/\1/p' "$tmp/$run-worker$waiter.log")
    [ -n "$c" ] || fail "$run: worker $waiter left without its stop checkpoint"
    grep -q "worker $waiter asked for a checkpoint: every worker takes it at clock $c" "$tmp/server0.log" \
      || fail "$run: shard 0 did not take worker $waiter's request for the checkpoint at clock $c"
    stop_ck=$(sed -n "s/.*checkpoint at clock $c\( written\)\?: \([^ ]*\) (.*/\2/p" "$tmp/$run-worker$waiter.log" | tail -1)
    [ -n "$stop_ck" ] || fail "$run: worker $waiter did not log its stop checkpoint's folder"
    for f in MANIFEST worker-0.state worker-1.state chunks.state shard-0.tables; do
      [ -f "$stop_ck/$f" ] || fail "$run: the stop checkpoint $stop_ck has no $f"
    done
    stop_within "${w[$other]}" "$run: worker $other (training)" 10000
    exits_within "${server_pids[0]}" 5000 || fail "$run: server 0 still runs after both workers left"
    wait_code "${server_pids[0]}"
    [ "$rc" = 0 ] || fail "$run: server 0 exited $rc after both workers left, want 0"
    echo "$run: worker $waiter stopped while waiting for a chunk: stop checkpoint $(basename "$stop_ck"), exit 143"
    mv "$tmp/server0.log" "$tmp/$run-server0.log"
    pids=()
  }
  # In the middle of epoch 1 (the waiter trained its chunk).
  stop_waiter first
  # Resumed: the chunk held at the cut is dealt again, to one worker; the
  # other waits for its first chunk.
  stop_waiter resumed --resume_from="$stop_ck"
  # Resumed again, to the end.
  flags=("${base[@]}" --resume_from="$stop_ck")
  run_to_end 1 last- "$tmp/m.json" "the job resumed to its end"
  python3 - "$tmp/m.json" <<'PY' || fail "the resumed job's counts"
import json, sys
m = json.load(open(sys.argv[1]))
counted = m["servers"][0]["chunk_epoch_rows"]
print("rows shard 0 counted per epoch across two stops and resumes:", counted,
      "; re-dealt:", m["chunks_redealt"], "chunks,", m["rows_redealt"], "rows")
assert counted == [4880, 4880], counted
PY
  ;;
early|early_on_demand)
  job=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=1 --num_workers=2 --epochs=1 --minibatch_size=8
       --minibatches_per_clock=10)
  # On demand, one chunk an epoch: one worker trains it, the other waits
  # for its first chunk from the start.
  [ "$mode" = early_on_demand ] && job+=(--data_on_demand=true --chunk_rows=4880)
  # clock_at_least K: a worker's clock on shard 0's /metrics is K or more.
  clock_at_least() {
    curl -sf "http://$(cat "$tmp/s0.metrics")/metrics" 2>/dev/null |
      awk -v k="$1" '/^tether_server_worker_clock/ && $2 >= k { found = 1 } END { exit !found }'
  }
  for k in 0 1 2 3; do
    ck="$tmp/ck$k"
    # Worker 1 four times slower: the clocks come about 0.2 s apart, so a
    # stop lands within a clock of K.
    flags=("${job[@]}" --checkpoint_dir="$ck" --slowdown=4 --slowdown_rank=1)
    rm -f "$tmp/s0.port" "$tmp/s0.metrics"
    timeout -k 5 "$limit_s" "$bin/tether-server" "${flags[@]}" --shard=0 --listen=tcp://127.0.0.1:0 \
      --port_file="$tmp/s0.port" --metrics_port=0 --metrics_port_file="$tmp/s0.metrics" --metrics_linger_s=0 \
      > "$tmp/server0.log" 2>&1 &
    s0=$!
    pids+=($s0)
    poll 200 test -s "$tmp/s0.port" || fail "K=$k: server 0 wrote no port file"
    poll 200 test -s "$tmp/s0.metrics" || fail "K=$k: server 0 wrote no metrics port file"
    addrs=$(cat "$tmp/s0.port")
    start_worker 0 "$tmp/worker0.log"
    w0=$started
    start_worker 1 "$tmp/worker1.log"
    w1=$started
    wait_log "$tmp/server0.log" "worker 0 joined" 600
    wait_log "$tmp/server0.log" "worker 1 joined" 600
    if [ "$k" -gt 0 ]; then poll 600 clock_at_least "$k" || fail "K=$k: no worker reached clock $k"; fi
    t0=$(now_ms)
    for p in "$s0" "$w0" "$w1"; do kill -TERM "$(pgrep -P "$p" || echo "$p")" 2>/dev/null || true; done
    for p in "$w0" "$w1" "$s0"; do
      exits_within "$p" 15000 || fail "K=$k: a process still runs 15 s after the stop (a stuck stop checkpoint?)"
    done
    took=$(($(now_ms) - t0))
    wait_code "$w0"; rc0=$rc
    wait_code "$w1"; rc1=$rc
    wait_code "$s0"; rcs=$rc
    pids=()
    [ "$rc0 $rc1" = "143 143" ] || fail "K=$k: workers exited $rc0 $rc1, want 143 143"
    [ "$rcs" = 0 ] || [ "$rcs" = 143 ] || fail "K=$k: server 0 exited $rcs, want 0 or 143"
    outcome=
    for r in 0 1; do
      c=$(sed -n 's/.*leaving the job after the checkpoint at clock \([0-9]*\).*/\1/p' "$tmp/worker$r.log")
      if [ -n "$c" ]; then
        d=$(sed -n "s/.*checkpoint at clock $c\( written\)\?: \([^ ]*\) (.*/\2/p" "$tmp/worker$r.log" | tail -1)
        [ -n "$d" ] && [ -f "$d/MANIFEST" ] || fail "K=$k: worker $r left after the checkpoint at clock $c, which is not complete"
        outcome="$outcome worker $r: stop checkpoint at clock $c;"
      else
        grep -q "without a stop checkpoint" "$tmp/worker$r.log" || fail "K=$k: worker $r left without a stop checkpoint and without saying why"
        outcome="$outcome worker $r: no stop checkpoint (said why);"
      fi
    done
    echo "K=$k: every process exited within $took ms;$outcome server $rcs"
    for f in worker0 worker1 server0; do mv "$tmp/$f.log" "$tmp/stop$k-$f.log"; done
    # Resumable: the job resumed from the latest complete checkpoint ends.
    if ls "$ck"/ckpt-*/MANIFEST > /dev/null 2>&1; then
      flags=("${job[@]}" --checkpoint_dir="$ck" --resume_from="$ck")
      run_to_end 1 "" "$tmp/m$k.json" "K=$k: the job resumed from $(ls -d "$ck"/ckpt-* | tail -1)"
      if [ "$mode" = early_on_demand ]; then
        samples=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["servers"][0]["chunk_epoch_rows"])' "$tmp/m$k.json")
        [ "$samples" = "[4880]" ] || fail "K=$k: shard 0 counted $samples rows per epoch across the stop, want [4880]"
      else
        samples=$(metric "$tmp/m$k.json" total_samples)
        [ "$samples" = 4880 ] || fail "K=$k: the resumed job trained $samples samples in all, want 4880"
      fi
      echo "K=$k: resumed from $(grep -o "resuming from [^ ]*" "$tmp/worker0.log" | head -1 | sed 's#.*/##') to the end:" \
        "$([ "$mode" = early_on_demand ] && echo "rows per epoch $samples" || echo "$samples samples")"
      for f in worker0 worker1 server0; do mv "$tmp/$f.log" "$tmp/resume$k-$f.log"; done
    fi
  done
  ;;
server_stop|server_stop_no_dir)
  job=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=2 --num_workers=2 --epochs=1 --minibatch_size=8
       --minibatches_per_clock=10)
  # server_stop_no_dir: only the workers are given the folder; the servers
  # learn it from them.
  worker_dir=()
  if [ "$mode" = server_stop ]; then job+=(--checkpoint_dir="$tmp/ck"); else worker_dir=(--checkpoint_dir="$tmp/ck"); fi
  flags=("${job[@]}" --staleness=2 --slowdown=200 --slowdown_rank=1 --progress_every_s=1)
  start_servers 2
  start_worker 0 "$tmp/worker0.log" "${worker_dir[@]}"
  w0=$started
  start_worker 1 "$tmp/worker1.log" "${worker_dir[@]}"
  w1=$started
  poll 600 grep -q "%, clock \([3-9]\|[1-9][0-9]\)," "$tmp/worker0.log" || fail "worker 0 never reached clock 3"
  s1=${server_pids[1]}
  t0=$(now_ms)
  kill -TERM "$(pgrep -P "$s1" || echo "$s1")"
  for p in "$w0" "$w1" "$s1" "${server_pids[0]}"; do
    exits_within "$p" 15000 || fail "a process still runs 15 s after SIGTERM to server 1"
  done
  took=$(($(now_ms) - t0))
  wait_code "$w0"; rc0=$rc
  wait_code "$w1"; rc1=$rc
  wait_code "$s1"; rcs1=$rc
  wait_code "${server_pids[0]}"; rcs0=$rc
  pids=()
  [ "$rc0 $rc1 $rcs1 $rcs0" = "143 143 143 0" ] \
    || fail "exit codes (worker 0, worker 1, server 1, server 0) $rc0 $rc1 $rcs1 $rcs0, want 143 143 143 0"
  grep -q "stop requested: asking 2 worker(s) to take a stop checkpoint" "$tmp/server1.log" \
    || fail "server 1 did not ask the workers for a stop checkpoint"
  grep -q "every worker has left after the stop checkpoint at clock" "$tmp/server1.log" \
    || fail "server 1 does not say the workers left after the stop checkpoint"
  c=
  for r in 0 1; do
    grep -q "server shard 1 was told to stop at clock" "$tmp/worker$r.log" || fail "worker $r did not log server 1's stop"
    cr=$(sed -n 's/.*leaving the job after the checkpoint at clock \([0-9]*\).*/\1/p' "$tmp/worker$r.log")
    [ -n "$cr" ] || fail "worker $r left without the stop checkpoint"
    [ -z "$c" ] || [ "$c" = "$cr" ] || fail "the workers left after checkpoints at clocks $c and $cr"
    c=$cr
    grep -q "server shard 1 was told to stop); resume with --resume_from=$tmp/ck: exit 143" "$tmp/worker$r.log" \
      || fail "worker $r gave no resume hint"
  done
  ck=$(printf "%s/ckpt-%012d" "$tmp/ck" "$c")
  [ -f "$ck/MANIFEST" ] || fail "the stop checkpoint $ck is not complete: $(ls "$ck" 2>&1)"
  [ "$(ls "$ck" | grep -c '^shard-[01]')" -ge 2 ] || fail "$ck lacks a shard's files: $(ls "$ck")"
  echo "SIGTERM to server 1 at clock 3 or later: stop checkpoint at clock $c, exits 143 143 143 0 within $took ms"
  for f in worker0 worker1 server0 server1; do mv "$tmp/$f.log" "$tmp/stop-$f.log"; done
  flags=("${job[@]}" --resume_from="$tmp/ck")
  run_to_end 2 "" "$tmp/m.json" "the job resumed from $ck"
  samples=$(metric "$tmp/m.json" total_samples)
  [ "$samples" = 4880 ] || fail "the resumed job trained $samples samples in all, want 4880"
  echo "resumed from $(basename "$ck") to the end: $samples samples"
  ;;
*)
  fail "unknown mode $mode"
  ;;
esac
