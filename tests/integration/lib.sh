# Shared by the shell tests of tests/integration/ (sourced, not run): the
# temporary directory, the processes a test starts and their cleanup, the
# servers started by hand, and reading the metrics JSON.
#
#   source "$(dirname "$0")/lib.sh"
#
# sets `tmp` (a mktemp -d directory, removed on exit unless KEEP_TMP is set:
# then its path is printed) and `pids` (an array: append the pid of every
# background process the test starts); on exit each pid in `pids` still
# running is killed (SIGKILL) and reaped. A test that needs more at exit
# defines `lib_on_exit`, called first. Tests run with `set -euo pipefail`.

tmp=$(mktemp -d)
pids=()
lib_cleanup() {
  if declare -F lib_on_exit > /dev/null; then lib_on_exit || true; fi
  local p
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "${KEEP_TMP:-}" ]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap lib_cleanup EXIT

# wait_for_files SECONDS FILE...: polls (every 0.1 s) until every FILE
# exists; after SECONDS fails the test naming those still missing.
wait_for_files() {
  local limit=$(($1 * 10)) i f missing
  shift
  for ((i = 0; i <= limit; i++)); do
    missing=()
    for f in "$@"; do [ -e "$f" ] || missing+=("$f"); done
    [ ${#missing[@]} = 0 ] && return 0
    sleep 0.1
  done
  echo "FAIL: not written within $((limit / 10)) s: ${missing[*]}"
  return 1
}

# start_servers N TIMEOUT_S FLAG...: starts shards 0..N-1 of tether-server
# ($bin) by hand with FLAG... on 127.0.0.1, port 0, each bounded by
# `timeout` TIMEOUT_S, logs in $tmp/serverS.log, endpoints in $tmp/sS.port;
# appends their pids to `pids` and waits (10 s at most) for every port file;
# sets `addrs` (the endpoints, comma-separated, in shard order) and
# `server_pids`. A server that does not start fails the test with the logs.
start_servers() {
  local n=$1 limit=$2 s ports=()
  shift 2
  server_pids=()
  for ((s = 0; s < n; s++)); do
    timeout -k 5 "$limit" "$bin/tether-server" "$@" --shard=$s --listen=tcp://127.0.0.1:0 \
      --port_file="$tmp/s$s.port" > "$tmp/server$s.log" 2>&1 &
    pids+=($!)
    server_pids+=($!)
    ports+=("$tmp/s$s.port")
  done
  wait_for_files 10 "${ports[@]}" || { tail -n 20 "$tmp"/server*.log; exit 1; }
  addrs=""
  for ((s = 0; s < n; s++)); do addrs+="${addrs:+,}$(cat "$tmp/s$s.port")"; done
}

# metric FILE KEY: the top-level KEY of the metrics JSON FILE, as Python prints it.
metric() {
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

# gate VALUE MIN NAME: prints "NAME = VALUE (gate >= MIN)"; fails unless VALUE >= MIN.
gate() {
  python3 -c 'import sys; v,m=float(sys.argv[1]),float(sys.argv[2]); print(f"{sys.argv[3]} = {v:.4f} (gate >= {m})"); sys.exit(0 if v >= m else 1)' "$1" "$2" "$3"
}
