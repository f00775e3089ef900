#!/usr/bin/env bash
# A server shard killed and started again by hand on the same address while
# its workers still run (docs/OPERATIONS.md "A server restarted by hand").
# The new process holds none of the job's tables and knows no worker: the
# workers must not go on with it ("unknown table id 0", "before its
# HELLO"), but say that the shard restarted and how to go on, and every
# process must exit non-zero within a bound. Bibtex, 2 servers, 2 workers
# (cluster.num_workers 2), processes on 127.0.0.1.
#   idle     Only worker 0 is started: it joins both shards, then waits on
#            shard 0 for worker 1 (the first evaluation exchange), so it has
#            nothing in flight to shard 1 (the case the old code kept: a
#            connection that drops with requests in flight already failed).
#            Server 1 is SIGKILLed and started again with the same flags and
#            --listen address. Worker 0 exits 1 within 10 s naming shard 1,
#            its address and both processes' start ids (as the two server
#            logs print them), with "resume the job from a checkpoint";
#            server 0 (told by worker 0's ABORT) and the new server 1 (the
#            ABORT names the process it replaced) exit 1 within the same
#            bound, and no process logs "unknown table id".
#   resume   The same with checkpoints, following the message: a 1-epoch
#            job with a checkpoint every 20 clocks runs to the end; worker 0
#            alone resumes from the one at clock 20 and waits for worker 1;
#            server 1 is SIGKILLed and started again with
#            --resume_from=that checkpoint. The new process still holds
#            nothing (a shard loads its rows at worker 0's HELLO, which came
#            before it), so worker 0, server 0 and the new server 1 exit 1 as
#            above. Then the whole job, resumed from the same checkpoint on
#            fresh processes, exits 0 and has trained exactly 4880 rows over
#            the job, as the uninterrupted run did.
# Usage: server_restart_test.sh idle|resume BIN_DIR   (from the repository root)
source "$(dirname "$0")/lib.sh"
tether_test_init "$@"
fail_lines=12
limit_s=60

# start_id LOG: the process start id a server logged when it started listening.
start_id() { sed -nE 's/.*listening on .*; process start id ([0-9a-f]{16})$/\1/p' "$1" | head -1; }

# restart_shard_1 [EXTRA SERVER FLAGS...]: worker 0 (alone, $w0, flags
# ${flags[@]} plus whatever the caller gave it) has joined both shards and
# waits for worker 1. SIGKILLs server 1, starts it again on its address
# ($s1) with the same flags and the extra ones, and checks that worker 0,
# server 0 and the new server 1 all exit 1 within 10 s, saying why.
restart_shard_1() {
  poll 600 grep -q "connected to 2 server(s)" "$tmp/w0.log" || fail "worker 0 did not join both shards within 30 s"
  local old new
  old=$(start_id "$tmp/server1.log")
  [ -n "$old" ] || fail "server 1 logged no process start id"
  kill -9 "$(pgrep -P "${server_pids[1]}" tether-server)"
  wait "${server_pids[1]}" 2>/dev/null || true
  timeout -k 5 "$limit_s" "$bin/tether-server" "${flags[@]}" --shard=1 --listen="$s1" "$@" \
    > "$tmp/server1b.log" 2>&1 &
  local s1b=$!
  pids+=($s1b)
  local t0
  t0=$(now_ms)
  poll 200 grep -q "listening on $s1" "$tmp/server1b.log" || fail "the new server 1 did not listen on $s1 within 10 s"
  new=$(start_id "$tmp/server1b.log")
  local all_gone
  all_gone() { gone "$w0" && gone "${server_pids[0]}" && gone "$s1b"; }
  poll 200 all_gone || fail "worker 0, server 0 or the new server 1 still runs 10 s after server 1 was started again"
  local took=$(($(now_ms) - t0))
  wait_codes "$w0" "${server_pids[0]}" "$s1b"
  echo "server 1 restarted (start id $old, then $new): exit codes (w0 s0 new s1) $codes within ${took} ms"
  [ "$codes" = "1 1 1" ] || fail "exit codes (w0 s0 new s1) $codes, expected 1 1 1"
  local why="server shard 1 at $s1 restarted (new process, start id $new; this worker joined $old) and holds none \
of the job's tables; resume the job from a checkpoint (start every server and worker again, the workers with \
--resume_from=CHECKPOINT_DIR; a job without checkpoint.dir starts over)"
  grep -qF -- "[worker 0] $why" "$tmp/w0.log" || fail "worker 0 does not say: $why"
  grep -qF -- "[server 0] job aborted: worker 0 failed: $why" "$tmp/server0.log" \
    || fail "server 0 was not told why"
  grep -qF -- "[server 1] job aborted: worker 0 failed: $why (this server, process start id $new, \
replaced the one worker 0 had joined, start id $old)" "$tmp/server1b.log" || fail "the new server 1 did not end naming the process it replaced"
  ! grep -q "unknown table id" "$tmp"/*.log || fail "a process logged 'unknown table id'"
  grep -h "restarted (new process" "$tmp/w0.log" | head -1 | sed -E 's/^[IWE][0-9]+ [0-9:.]+ //'
}

flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=2 --num_workers=2 --epochs=1 --seed=5)
case "$mode" in
  idle)
    start_servers 2
    s1=$(cat "$tmp/s1.port")
    start_worker 0 "$tmp/w0.log"; w0=$started
    restart_shard_1
    echo "PASS"
    ;;
  resume)
    flags+=(--checkpoint_dir="$tmp/ck" --checkpoint_every_clocks=20 --checkpoint_keep_last=100)
    start_servers 2
    start_worker 0 "$tmp/first.w0.log" --metrics_out="$tmp/first.json"; w0=$started
    start_worker 1 "$tmp/first.w1.log"; w1=$started
    wait_codes "$w0" "$w1" "${server_pids[@]}"
    [ "$codes" = "0 0 0 0" ] || fail "the first run exited $codes"
    c=$tmp/ck/ckpt-000000000020
    [ -f "$c/MANIFEST" ] || fail "no complete checkpoint at clock 20"
    for s in 0 1; do mv "$tmp/server$s.log" "$tmp/first.server$s.log"; done
    pids=()
    rm -f "$tmp"/s*.port
    start_servers 2
    s1=$(cat "$tmp/s1.port")
    start_worker 0 "$tmp/w0.log" --resume_from="$c"; w0=$started
    restart_shard_1 --resume_from="$c"
    # What the message says: the whole job again, resumed from the checkpoint.
    pids=()
    rm -f "$tmp"/s*.port
    for f in "$tmp"/server*.log "$tmp/w0.log"; do mv "$f" "${f%/*}/restart.${f##*/}"; done
    start_servers 2
    start_worker 0 "$tmp/r0.log" --resume_from="$c" --metrics_out="$tmp/resumed.json"; w0=$started
    start_worker 1 "$tmp/r1.log" --resume_from="$c"; w1=$started
    wait_codes "$w0" "$w1" "${server_pids[@]}"
    echo "the job resumed from $(basename "$c") on fresh processes: exit codes (w0 w1 s0 s1) $codes"
    [ "$codes" = "0 0 0 0" ] || fail "the resumed job exited $codes"
    first=$(metric "$tmp/first.json" total_samples)
    total=$(metric "$tmp/resumed.json" total_samples)
    echo "rows trained over the job: uninterrupted $first, resumed $total"
    [ "$first" = 4880 ] && [ "$total" = 4880 ] || fail "expected 4880 rows over each job, got $first and $total"
    echo "PASS"
    ;;
  *)
    echo "usage: $0 idle|resume BIN_DIR"
    exit 2
    ;;
esac
