# Set-up shared by the by-hand integration tests (processes started one by
# one with flags): sourced, never run. Bash only.
#
# Every process a test starts is bounded in time (run under `timeout`) and
# reaped, also when the test fails; no test sleeps a fixed time to wait for
# an event: it polls with a bound (poll, wait_port, wait_log, exits_within).
#
#   tether_test_init MODE BIN_DIR
#       sets $mode, $bin (absolute), $tmp (a fresh mktemp -d: everything a
#       test writes goes there), pids=() and an EXIT trap that kills every
#       process in $pids that is still this shell's child, with all its
#       descendants (kill_tree: the process `timeout` runs, and the jobs a
#       launcher started), reaps them and removes $tmp (KEEP_TMP=1 keeps it
#       and says where). Scripts without a mode pass one of their own name.
#   kill_tree PID
#       SIGKILL to PID and every descendant, all at once (the tree is read
#       first, so no parent can start another child in between).
#   fail MESSAGE...
#       prints "FAIL: MESSAGE" and the last $fail_lines (8) lines of every
#       log under $tmp, then exits 1.
#   poll TRIES COMMAND...
#       runs COMMAND every 0.05 s until it succeeds, at most TRIES times;
#       returns its last status (the bounded wait of a test, never a fixed
#       sleep).
#   wait_port FILE [PID]
#       polls (20 s) until FILE (a --port_file) is non-empty; fails early,
#       returning 1, once PID (the process that writes it) has exited.
#   wait_until SECONDS WHAT COMMAND...
#       polls COMMAND (every 0.05 s) until it succeeds; after SECONDS prints
#       "FAIL: no WHAT within SECONDS s" and returns 1.
#   wait_log FILE PATTERN TRIES
#       polls (TRIES × 0.05 s) until FILE has a line matching PATTERN (grep);
#       fails the test naming both otherwise.
#   start_servers COUNT [FLAGS...]
#       starts shards 0..COUNT-1 of tether-server with ${flags[@]} and FLAGS
#       on ephemeral ports, each bounded by `timeout -k 5 $limit_s` (100 s
#       unless the test sets limit_s), logging to $tmp/serverS.log; waits
#       (bounded: 20 s) for their port files ($tmp/sS.port, removed first)
#       and sets $addrs (the --server_addresses value) and
#       server_pids=(...). A missing port file fails the test, naming the
#       shard.
#   start_job NAME SERVERS WORKERS FLAGS...
#       a job by hand: SERVERS tether-servers, then WORKERS tether-workers,
#       each with FLAGS, --num_servers/--num_workers and its --shard/--rank,
#       bounded like start_servers; logs $tmp/NAME-serverS.log and
#       $tmp/NAME-workerR.log, worker 0's metrics in $tmp/NAME.json; sets
#       server_pids=(...) and worker_pids=(...). A server that writes no
#       port file within 20 s fails the test.
#   wait_job WHAT
#       waits for every process of the last start_job and fails the test
#       ("WHAT exited ...") unless each exited 0; pids=().
#   wait_zero WHAT PIDS...
#       waits for each (children of this shell) and fails the test ("WHAT
#       exited ...") unless each exited 0.
#   start_worker RANK LOGFILE [EXTRA FLAGS...]
#       starts tether-worker --rank=RANK with ${flags[@]} and $addrs, bounded
#       like the servers; sets $started to the pid (`timeout`'s).
#   worker_pid PID
#       the tether-worker that `timeout` (PID) runs, to signal the worker
#       itself (a SIGKILL to `timeout` would leave it running).
#   inner PID
#       the process `timeout` (PID) runs, whatever it is (PID where none).
#   metric FILE KEY
#       the top-level KEY of the metrics JSON FILE, as Python prints it.
#   gate VALUE MIN NAME
#       prints "NAME = VALUE (gate >= MIN)"; fails unless VALUE >= MIN.
#   wait_codes PIDS...
#       waits for each (children of this shell) and sets $codes to their exit
#       codes, space-separated, in the order given.
#   wait_code PID
#       waits for PID (a child of this shell) and sets $rc to its exit code.
#   now_ms
#       the wall clock in milliseconds.
#   exited PID
#       true once PID (a child of this shell) has exited (a zombie not yet
#       waited for counts).
#   gone PID
#       true once no process PID exists (any process; a zombie still counts
#       as one).
#   exits_within PID BOUND_MS
#       polls (50 ms a try) until PID has exited; false after BOUND_MS.
#   expect_exit PID CODE BOUND_MS WHAT
#       PID (a child of this shell) must exit with CODE within BOUND_MS from
#       now, or the test fails naming WHAT; sets $took (ms) and $rc.
#   stop_within PID WHAT BOUND_MS
#       SIGTERM to the process `timeout` (PID) runs; it must exit 143 within
#       BOUND_MS, or the test fails naming WHAT.
#   start_fifo_reader FIFO OUT
#       starts a reader (bounded: 60 s) that opens FIFO without waiting and
#       copies what comes through it to OUT until its writer closes it;
#       returns once the reader has the FIFO open, so a writer that opens
#       the FIFO without waiting (O_NONBLOCK) finds it. Sets $reader and
#       adds it to $pids.
#   bibtex_parts DIR
#       Bibtex's splits as XMC files (run from the repository root): the
#       rows in DIR/train.rows and DIR/test.rows (no header), and under
#       DIR/data: train.txt, test.txt and the training rows cut into
#       part-0.txt (rows 1-2000), part-1.txt.gz (2001-3500, gzip) and
#       part-2.txt (3501-4880). Fails unless the train split has 4880 rows.
limit_s=100
fail_lines=8

tether_test_init() {
  set -euo pipefail
  mode=$1
  bin=$(cd "$2" && pwd)
  tmp=$(mktemp -d)
  pids=()
  trap tether_test_cleanup EXIT
}

descendants() {
  local c
  for c in $(pgrep -P "$1"); do
    echo "$c"
    descendants "$c"
  done
}

kill_tree() {
  local tree
  tree="$1 $(descendants "$1")"
  # shellcheck disable=SC2086  # a list of pids
  kill -9 $tree 2>/dev/null || true
}

tether_test_cleanup() {
  local p
  for p in "${pids[@]:-}"; do
    [ -n "$p" ] || continue
    # Only a process that is still this shell's child: a pid already reaped
    # may belong to someone else by now (pids are reused quickly).
    [ "$(ps -o ppid= -p "$p" 2>/dev/null | tr -d ' ')" = "$$" ] || continue
    kill_tree "$p"
  done
  wait 2>/dev/null || true
  if [ -n "${KEEP_TMP:-}" ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}

fail() {
  echo "FAIL: $*"
  local f
  for f in "$tmp"/*.log; do [ -f "$f" ] && { echo "== $f"; tail -n "$fail_lines" "$f"; }; done
  exit 1
}

poll() {
  local tries=$1 i
  shift
  for ((i = 0; i < tries; ++i)); do
    "$@" && return 0
    sleep 0.05
  done
  "$@"
}

wait_port() {
  local file=$1 pid=${2:-} i
  for ((i = 0; i < 400; ++i)); do
    [ -s "$file" ] && return 0
    [ -z "$pid" ] || kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  [ -s "$file" ]
}

wait_until() {
  local seconds=$1 what=$2
  shift 2
  poll $((seconds * 20)) "$@" && return 0
  echo "FAIL: no $what within $seconds s"
  return 1
}

wait_log() {
  poll "$3" grep -qs -- "$2" "$1" || fail "no '$2' in $1"
}

start_servers() {
  local count=$1 s
  shift
  server_pids=()
  for ((s = 0; s < count; ++s)); do
    rm -f "$tmp/s$s.port"
    timeout -k 5 "$limit_s" "$bin/tether-server" "${flags[@]}" "$@" --shard=$s --listen=tcp://127.0.0.1:0 \
      --port_file="$tmp/s$s.port" > "$tmp/server$s.log" 2>&1 &
    pids+=($!)
    server_pids+=($!)
  done
  addrs=
  for ((s = 0; s < count; ++s)); do
    wait_port "$tmp/s$s.port" || fail "server $s wrote no port file ($tmp/s$s.port) within 20 s"
    addrs="$addrs${addrs:+,}$(cat "$tmp/s$s.port")"
  done
}

start_job() {
  local name=$1 ns=$2 nw=$3 s r job_addrs=
  shift 3
  server_pids=()
  worker_pids=()
  for ((s = 0; s < ns; ++s)); do
    timeout -k 5 "$limit_s" "$bin/tether-server" "$@" --num_servers="$ns" --num_workers="$nw" --shard="$s" \
      --listen=tcp://127.0.0.1:0 --port_file="$tmp/$name-s$s.port" > "$tmp/$name-server$s.log" 2>&1 &
    server_pids+=($!)
    pids+=($!)
  done
  for ((s = 0; s < ns; ++s)); do
    wait_port "$tmp/$name-s$s.port" || fail "server $s of $name never listened"
    job_addrs="$job_addrs${job_addrs:+,}$(cat "$tmp/$name-s$s.port")"
  done
  for ((r = 0; r < nw; ++r)); do
    local extra=()
    [ "$r" = 0 ] && extra=(--metrics_out="$tmp/$name.json")
    timeout -k 5 "$limit_s" "$bin/tether-worker" "$@" --num_servers="$ns" --num_workers="$nw" --rank="$r" \
      --server_addresses="$job_addrs" "${extra[@]}" > "$tmp/$name-worker$r.log" 2>&1 &
    worker_pids+=($!)
    pids+=($!)
  done
}

wait_zero() {
  local what=$1
  shift
  wait_codes "$@"
  [[ "$codes" =~ ^0( 0)*$ ]] || fail "$what exited $codes"
}

wait_job() {
  wait_zero "$1 (workers, then servers)" "${worker_pids[@]}" "${server_pids[@]}"
  pids=()
}

started=
start_worker() {
  local r=$1 log=$2
  shift 2
  timeout -k 5 "$limit_s" "$bin/tether-worker" "${flags[@]}" --rank="$r" --server_addresses="$addrs" "$@" \
    > "$log" 2>&1 &
  started=$!
  pids+=($started)
}

worker_pid() {
  pgrep -P "$1" tether-worker || echo "$1"
}

inner() {
  pgrep -P "$1" || echo "$1"
}

metric() {
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

gate() {
  python3 -c 'import sys; v,m=float(sys.argv[1]),float(sys.argv[2]); print(f"{sys.argv[3]} = {v:.4f} (gate >= {m})"); sys.exit(0 if v >= m else 1)' "$1" "$2" "$3"
}

wait_codes() {
  local list=() p rc
  for p in "$@"; do
    rc=0
    wait "$p" || rc=$?
    list+=("$rc")
  done
  codes="${list[*]}"
}

wait_code() {
  rc=0
  wait "$1" 2>/dev/null || rc=$?
}

now_ms() { date +%s%3N; }

exited() { ! [ -r "/proc/$1/status" ] || grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null; }

gone() { ! kill -0 "$1" 2>/dev/null; }

# launched_children_reaped LOG [ROLES]: every child tether-launch started
# (LOG's "[launch] started ROLE N (pid P)" lines, ROLE matching the sed
# alternation ROLES, default server\|worker\|replacement) has exited, and
# the launcher never gave up reaping one.
launched_children_reaped() {
  local log=$1 roles=${2:-'server\|worker\|replacement'} p
  grep -q "giving up on it" "$log" && fail "a child could not be reaped"
  for p in $(sed -n "s/.*\[launch\] started \($roles\) [0-9]* (pid \([0-9]*\)).*/\2/p" "$log"); do
    exited "$p" || fail "child $p outlived the launcher"
  done
}

exits_within() { poll $(($2 / 50)) exited "$1"; }

expect_exit() {
  local pid=$1 code=$2 bound=$3 what=$4 t0
  t0=$(now_ms)
  exits_within "$pid" "$bound" || fail "$what still runs after $bound ms"
  took=$(($(now_ms) - t0))
  wait_code "$pid"
  [ "$rc" = "$code" ] || fail "$what exited $rc, want $code"
}

stop_within() {
  local pid=$1 what=$2 bound=$3
  kill -TERM "$(inner "$pid")" 2>/dev/null || true
  expect_exit "$pid" 143 "$bound" "$what (SIGTERM)"
  echo "$what: exit 143 ${took} ms after SIGTERM"
}

bibtex_parts() {
  local d=$1
  mkdir -p "$d/data"
  # The split lists 0-based data rows; the data file's line 1 is its header.
  local split
  for split in tr tst; do
    awk 'NR==FNR { want[$1 + 1] = 1; next } FNR in want' "data/bibtex/bibtex_${split}Split.txt" \
      <(zcat data/bibtex/Bibtex_data.txt.gz) > "$d/$([ $split = tr ] && echo train || echo test).rows"
  done
  [ "$(wc -l < "$d/train.rows")" = 4880 ] || fail "train split has $(wc -l < "$d/train.rows") rows"
  with_header() { echo "$(wc -l < "$1") 1836 159"; cat "$1"; }
  with_header "$d/train.rows" > "$d/data/train.txt"
  with_header "$d/test.rows" > "$d/data/test.txt"
  sed -n '1,2000p' "$d/train.rows" > "$d/p0"
  sed -n '2001,3500p' "$d/train.rows" > "$d/p1"
  sed -n '3501,$p' "$d/train.rows" > "$d/p2"
  with_header "$d/p0" > "$d/data/part-0.txt"
  with_header "$d/p1" | gzip -c > "$d/data/part-1.txt.gz"
  with_header "$d/p2" > "$d/data/part-2.txt"
}

start_fifo_reader() {
  local ready="$2.ready"
  # poll() reports the FIFO only once a writer came: a read before that
  # would see no writer and end at once.
  timeout -k 5 60 python3 -c '
import os, select, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
open(sys.argv[2], "w").close()
p = select.poll()
p.register(fd, select.POLLIN)
data = b""
while True:
    p.poll(60000)
    try:
        b = os.read(fd, 1 << 16)
    except BlockingIOError:
        continue
    if not b:
        break
    data += b
open(sys.argv[3], "wb").write(data)
' "$1" "$ready" "$2" &
  reader=$!
  pids+=("$reader")
  wait_until 20 "reader of $1" test -e "$ready" || fail "the reader of $1 did not start"
}
