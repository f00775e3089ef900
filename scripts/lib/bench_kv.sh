# Shared by scripts/bench_pslite.sh and scripts/bench_key_lists.sh (sourced,
# not run): the temporary directory and its cleanup, and one Tether run of
# `tether-bench kv` against a separately started `tether-server` (one server,
# one worker, loopback TCP, random sorted uint64 keys, one request in flight).
#
# The sourcing script sets, before calling these:
#   me         its name, for messages ("scripts/bench_pslite.sh")
#   build      Tether's build directory, absolute, with bin/tether-server and bin/tether-bench
#   shapes     KEYSxDIM,... for tether-bench kv --shapes
#   timeout_s  limit for every process of one run, in seconds
#   bench_args extra tether-bench kv flags, an array (may be empty)
# bench_kv_setup NAME sets `work`, a mktemp -d directory removed on exit;
# every background job of the script still running then is stopped and
# reaped (each is a `timeout`, which passes the signal on to its process).

bench_kv_setup() {  # bench_kv_setup NAME
  work=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  trap bench_kv_cleanup EXIT
  trap 'exit 130' INT TERM
}

bench_kv_cleanup() {
  local p
  for p in $(jobs -p); do kill "$p" 2>/dev/null || true; done
  for p in $(jobs -p); do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}

# Waits for the processes in "$@" (pids) and says whether all exited 0.
bench_kv_wait_all() {
  local rc=0 p
  for p in "$@"; do wait "$p" || rc=1; done
  return $rc
}

# bench_kv_run_tether NAME OPTIMIZER [TETHER-SERVER FLAG...]: one run into
# $work/NAME.txt (tether-bench kv's RESULT lines) with tables of OPTIMIZER
# (sgd, noop, ...); the server's log is $work/NAME-server.log, the worker's
# $work/NAME-worker.log. A failure ends the script naming the run and
# showing the log's tail.
bench_kv_run_tether() {
  local name=$1 optimizer=$2
  shift 2
  local out="$work/$name.txt" port_file="$work/$name.port"
  cat > "$work/$name.pbtxt" <<CFG
name: "tether-bench-kv"
cluster { num_servers: 1 num_workers: 1 startup_timeout_ms: 60000 idle_timeout_ms: ${timeout_s}000
          worker_timeout_ms: ${timeout_s}000 }
consistency { model: ASP staleness: -1 cache: false }
CFG
  timeout -k 5 "$timeout_s" "$build/bin/tether-server" --config="$work/$name.pbtxt" --port_file="$port_file" "$@" \
    > /dev/null 2> "$work/$name-server.log" &
  local server=$!
  # The server writes its endpoint once it listens (or dies trying); wait
  # for either, at most 30 s.
  local waited=0
  until [ -s "$port_file" ]; do
    if ! kill -0 "$server" 2>/dev/null || [ "$waited" -ge 300 ]; then
      echo "$me: tether-server did not start in $name; its log:" >&2
      tail -n 10 "$work/$name-server.log" >&2
      exit 1
    fi
    sleep 0.1
    waited=$((waited + 1))
  done
  timeout -k 5 "$timeout_s" "$build/bin/tether-bench" kv --server="$(cat "$port_file")" --shapes="$shapes" \
    --optimizer="$optimizer" "${bench_args[@]}" > "$out" 2> "$work/$name-worker.log" ||
    { echo "$me: tether-bench kv failed in $name; its log:" >&2; tail -n 10 "$work/$name-worker.log" >&2; exit 1; }
  bench_kv_wait_all "$server" ||
    { echo "$me: tether-server failed in $name; its log:" >&2; tail -n 10 "$work/$name-server.log" >&2; exit 1; }
}
