# Set-up shared by the by-hand integration tests (processes started one by
# one with flags): sourced, never run. Bash only.
#
#   tether_test_init MODE BIN_DIR
#       sets $mode, $bin (absolute), $tmp (a fresh mktemp -d: everything a
#       test writes goes there), pids=() and an EXIT trap that kills every
#       process in $pids, with the one `timeout` runs under it, reaps them
#       and removes $tmp (KEEP_TMP=1 keeps it and says where).
#   fail MESSAGE...
#       prints "FAIL: MESSAGE" and the last $fail_lines (8) lines of every
#       log under $tmp, then exits 1.
#   poll TRIES COMMAND...
#       runs COMMAND every 0.05 s until it succeeds, at most TRIES times;
#       returns its last status (the bounded wait of a test, never a fixed
#       sleep).
#   start_servers COUNT
#       starts shards 0..COUNT-1 of tether-server with ${flags[@]} on
#       ephemeral ports, each bounded by `timeout -k 5 $limit_s` (100 s
#       unless the test sets limit_s), logging to $tmp/serverS.log; waits
#       (bounded: 10 s) for their port files and sets $addrs (the
#       --server_addresses value) and server_pids=(...). A missing port
#       file fails the test, naming the shard.
#   start_worker RANK LOGFILE [EXTRA FLAGS...]
#       starts tether-worker --rank=RANK with ${flags[@]} and $addrs, bounded
#       like the servers; sets $started to the pid (`timeout`'s).
#   worker_pid PID
#       the tether-worker that `timeout` (PID) runs, to signal the worker
#       itself (a SIGKILL to `timeout` would leave it running).
#   metric FILE KEY
#       the top-level KEY of the metrics JSON FILE, as Python prints it.
#   gate VALUE MIN NAME
#       prints "NAME = VALUE (gate >= MIN)"; fails unless VALUE >= MIN.
#   wait_codes PIDS...
#       waits for each (children of this shell) and sets $codes to their exit
#       codes, space-separated, in the order given.
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

tether_test_cleanup() {
  local p
  for p in "${pids[@]:-}"; do
    [ -n "$p" ] || continue
    pkill -9 -P "$p" 2>/dev/null || true  # the process `timeout` runs
    kill -9 "$p" 2>/dev/null || true
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

start_servers() {
  local count=$1 s
  server_pids=()
  for ((s = 0; s < count; ++s)); do
    timeout -k 5 "$limit_s" "$bin/tether-server" "${flags[@]}" --shard=$s --listen=tcp://127.0.0.1:0 \
      --port_file="$tmp/s$s.port" > "$tmp/server$s.log" 2>&1 &
    pids+=($!)
    server_pids+=($!)
  done
  addrs=
  for ((s = 0; s < count; ++s)); do
    poll 200 test -s "$tmp/s$s.port" || fail "server $s wrote no port file ($tmp/s$s.port) within 10 s"
    addrs="$addrs${addrs:+,}$(cat "$tmp/s$s.port")"
  done
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
