#!/usr/bin/env bash
# Tether against ps-lite (dmlc/ps-lite, Li et al. OSDI 2014) on the same
# push/pull request shapes, in the same run, on this machine: one server and
# one worker per side, each a process of its own, over loopback TCP.
#
#   scripts/bench_pslite.sh [--build DIR] [--peers DIR] [--rounds N] [--shapes S]
#                           [--min_reps N] [--max_reps N] [--min_time_s T] [--timeout_s T]
#
#   --build DIR       Tether's build (default build); needs bin/tether-server, bin/tether-bench
#   --peers DIR       the folder holding ps-lite-15b8adf.tar.gz, ps-lite's source at
#                     commit 15b8adf under a top folder ps-lite/ (default $TETHER_PEERS);
#                     without it the script says how to make one and exits 2. To make it:
#                       git clone https://github.com/dmlc/ps-lite && cd ps-lite &&
#                       git archive --prefix=ps-lite/ -o DIR/ps-lite-15b8adf.tar.gz 15b8adf
#   --rounds N        alternated rounds (default 5); each side's figure is the median over rounds
#   --shapes S        KEYSxDIM,... (default the six of docs/PERFORMANCE.md)
#   --min_reps N      timed pushes and pulls per shape and run, at least (default 5)
#   --max_reps N      and at most (default 300)
#   --min_time_s T    each shape's pushes and pulls run for at least 2·T seconds (default 0.3)
#   --timeout_s T     limit for every process of one run, in seconds (default 300)
#   --error_feedback B  the BF16 runs' error feedback, true or false (default true, as a job's --wire=bf16)
#
# ps-lite is built from the unmodified snapshot with CMake against Debian's
# libzmq3-dev and libprotobuf-dev, outside Tether's build, into
# DIR/pslite-15b8adf (kept, so later runs skip the ~30 s build), and so is
# our KV program on its public API, bench/pslite_kv/kv_bench.cc. Its server
# uses an empty handler (a push is dropped, a pull answered from a reused
# zero buffer), as ps-lite's own benchmark does.
#
# Each round runs five jobs one after the other, the order rotating from
# round to round: ps-lite (scheduler, server, worker: three processes,
# DMLC_NODE_HOST=127.0.0.1), Tether with SGD tables, and Tether with NOOP
# tables (tether-server + tether-bench kv: two processes), each of the two
# Tether jobs once in float32 and once with --wire=bf16 (values both ways in
# 16 bits, pushes with error feedback; ps-lite sends float32). NOOP checks every
# push and looks up its rows as SGD does but skips the arithmetic, so the
# difference between the two Tether columns is the optimizer's cost and the
# NOOP column is transport plus checks and lookups. Within a run, each shape
# gets one untimed push and pull, then timed pushes and pulls alternately,
# one request in flight; both sides send the same random sorted uint64 keys.
# A ps-lite launch that fails or hangs before its first request (its
# start-up registration race) is stopped after 60 s
# at most and retried, up to 3 times per run; the retries are reported. Every process runs under `timeout` and
# is reaped; temporary files live in a mktemp -d directory removed on exit.
#
# Output: one Markdown table on stdout (times in ms, medians over rounds;
# ratio = Tether ÷ ps-lite, below 1 means Tether is faster), preceded by the
# run's conditions. Progress goes to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
build=build
peers="${TETHER_PEERS:-}"
rounds=5
shapes="1x1,100000x1,1000000x1,1024x4096,100000x64,100000x256"
min_reps=5
max_reps=300
min_time_s=0.3
timeout_s=300
error_feedback=true
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --peers) peers="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --shapes) shapes="$2"; shift 2 ;;
    --min_reps) min_reps="$2"; shift 2 ;;
    --max_reps) max_reps="$2"; shift 2 ;;
    --min_time_s) min_time_s="$2"; shift 2 ;;
    --timeout_s) timeout_s="$2"; shift 2 ;;
    --error_feedback) error_feedback="$2"; shift 2 ;;
    *) echo "scripts/bench_pslite.sh: unknown argument $1 (--build, --peers, --rounds, --shapes, --min_reps," \
            "--max_reps, --min_time_s, --timeout_s, --error_feedback)" >&2; exit 2 ;;
  esac
done
me=scripts/bench_pslite.sh
tarball_name=ps-lite-15b8adf.tar.gz
if [ -z "$peers" ] || [ ! -f "$peers/$tarball_name" ]; then
  where="${peers:-no folder given}"
  echo "$me: no $tarball_name ($where): pass --peers DIR or set TETHER_PEERS=DIR, DIR holding" \
       "ps-lite's source at commit 15b8adf as $tarball_name; make it with" \
       "'git clone https://github.com/dmlc/ps-lite && cd ps-lite &&" \
       "git archive --prefix=ps-lite/ -o DIR/$tarball_name 15b8adf'" >&2
  exit 2
fi
peers=$(cd "$peers" && pwd)
for bin in tether-server tether-bench; do
  [ -x "$build/bin/$bin" ] || { echo "$me: $build/bin/$bin missing: build first (scripts/build.sh)" >&2; exit 1; }
done
build=$(cd "$build" && pwd)

# The temporary directory, its cleanup and Tether's runs (bench_kv_*).
base_args=(--min_reps="$min_reps" --max_reps="$max_reps" --min_time_s="$min_time_s")
bench_args=("${base_args[@]}")
# shellcheck source=scripts/lib/bench_kv.sh
source "$repo/scripts/lib/bench_kv.sh"
bench_kv_setup bench_pslite

# ---------------------------------------------------------------- build ps-lite
cache="$build/pslite-15b8adf"
if [ ! -f "$cache/ps-lite/b/libpslite.a" ]; then
  echo "$me: building ps-lite from $peers/$tarball_name into $cache (about 30 s)" >&2
  rm -rf "$cache"
  mkdir -p "$cache"
  tar xzf "$peers/$tarball_name" -C "$cache"
  { cmake -S "$cache/ps-lite" -B "$cache/ps-lite/b" -DCMAKE_BUILD_TYPE=Release &&
    cmake --build "$cache/ps-lite/b" -j "$(nproc)" --target pslite; } > "$cache/build.log" 2>&1 ||
    { echo "$me: ps-lite did not build, see $cache/build.log" >&2; exit 1; }
fi
kv_src="$repo/bench/pslite_kv/kv_bench.cc"
kv_bin="$cache/kv_bench"
if [ ! -x "$kv_bin" ] || [ "$kv_src" -nt "$kv_bin" ] || [ "$repo/bench/random_keys.h" -nt "$kv_bin" ]; then
  echo "$me: compiling bench/pslite_kv/kv_bench.cc against ps-lite" >&2
  g++ -std=c++17 -O2 -Wall -I"$cache/ps-lite/include" -I"$repo" "$kv_src" "$cache/ps-lite/b/libpslite.a" \
    -lzmq -lprotobuf -lpthread -o "$kv_bin" 2> "$cache/kv_bench.log" ||
    { echo "$me: kv_bench did not compile, see $cache/kv_bench.log" >&2; exit 1; }
fi

# ---------------------------------------------------------------- one run of each side

free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

pslite_retries=0
# Runs ps-lite once into $work/$1.txt. A launch whose worker does not print
# READY (ps-lite started, before the first request) within 60 s, or exits
# before it, is stopped and retried, at most 3 times; a failure after READY
# ends the script.
run_pslite() {
  local out="$work/$1.txt" attempt
  for attempt in 1 2 3 4; do
    local port
    port=$(free_port)
    local env=(DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1 DMLC_PS_ROOT_URI=127.0.0.1 DMLC_PS_ROOT_PORT="$port"
               DMLC_NODE_HOST=127.0.0.1)
    local args=("$shapes" "$min_reps" "$max_reps" "$min_time_s" 1)
    : > "$out"
    env "${env[@]}" DMLC_ROLE=scheduler timeout -k 5 "$timeout_s" "$kv_bin" "${args[@]}" \
      > /dev/null 2> "$work/$1-scheduler.log" &
    local sched=$!
    env "${env[@]}" DMLC_ROLE=server timeout -k 5 "$timeout_s" "$kv_bin" "${args[@]}" \
      > /dev/null 2> "$work/$1-server.log" &
    local server=$!
    env "${env[@]}" DMLC_ROLE=worker timeout -k 5 "$timeout_s" "$kv_bin" "${args[@]}" \
      > "$out" 2> "$work/$1-worker.log" &
    local worker=$!
    local waited=0
    until grep -q '^READY' "$out" || ! kill -0 "$worker" 2>/dev/null || [ "$waited" -ge 600 ]; do
      sleep 0.1
      waited=$((waited + 1))
    done
    if grep -q '^READY' "$out"; then
      if bench_kv_wait_all "$worker" "$sched" "$server"; then return 0; fi
      # ps-lite's server can still lose its start-up race after the worker's
      # READY (kv_app.h: "Check failed: request_handle_"; on a loaded
      # machine van.cc's "timeout (5 sec) to wait App 0 customer 0 ready"):
      # retried as above. Any other failure ends the script.
      if [ "$attempt" = 4 ] ||
        ! grep -q -e 'Check failed: request_handle_' -e 'to wait App 0 customer 0 ready' "$work/$1-server.log"; then
        echo "$me: ps-lite failed in $1 after it started; its logs:" >&2
        grep -h -m 3 'Check failed' "$work/$1-worker.log" "$work/$1-scheduler.log" "$work/$1-server.log" >&2 || true
        tail -n 5 "$work/$1-worker.log" "$work/$1-scheduler.log" "$work/$1-server.log" >&2
        exit 1
      fi
      pslite_retries=$((pslite_retries + 1))
      echo "$me: ps-lite's server lost its start-up race in $1 (attempt $attempt), retrying" >&2
      continue
    fi
    kill "$worker" "$sched" "$server" 2>/dev/null || true
    wait "$worker" 2>/dev/null || true
    wait "$sched" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    if [ "$attempt" = 4 ]; then
      echo "$me: ps-lite did not start in $1 after 4 attempts; the last worker log:" >&2
      tail -n 10 "$work/$1-worker.log" >&2
      exit 1
    fi
    pslite_retries=$((pslite_retries + 1))
    echo "$me: ps-lite did not start in $1 (attempt $attempt), retrying" >&2
  done
}

commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
start_s=$(date +%s)
sides=(pslite sgd noop sgd16 noop16)
for r in $(seq 1 "$rounds"); do
  for i in 0 1 2 3 4; do
    side=${sides[$(((i + r - 1) % 5))]}
    echo "$me: round $r/$rounds: $side" >&2
    case "$side" in
      pslite) run_pslite "pslite-r$r" ;;
      sgd) bench_args=("${base_args[@]}"); bench_kv_run_tether "sgd-r$r" sgd ;;
      noop) bench_args=("${base_args[@]}"); bench_kv_run_tether "noop-r$r" noop ;;
      sgd16) bench_args=("${base_args[@]}" --wire=bf16 --error_feedback="$error_feedback")
             bench_kv_run_tether "sgd16-r$r" sgd ;;
      noop16) bench_args=("${base_args[@]}" --wire=bf16 --error_feedback="$error_feedback")
              bench_kv_run_tether "noop16-r$r" noop ;;
    esac
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
elapsed_s=$(($(date +%s) - start_s))

# ---------------------------------------------------------------- the table
echo "## Tether against ps-lite: push/pull, one server + one worker, separate processes, loopback TCP"
echo
echo "Commit $commit; ps-lite 15b8adf with an empty server handler; $rounds alternated rounds (medians of each"
echo "run's medians), $(nproc) cores, load average $load_before before and $load_after after, ${elapsed_s} s in all;"
echo "ps-lite launches retried: $pslite_retries. Times in ms for one request in flight, push / pull; ratio = Tether ÷"
echo "ps-lite's fp32. BF16: tether-bench kv --wire=bf16 --error_feedback=$error_feedback (values both ways in 16 bits)."
echo
PYTHONPATH="$repo/scripts/lib" /usr/bin/python3 - "$work" "$rounds" "$shapes" <<'EOF'
import sys
from bench_kv_results import load, ms, shape_of
work, rounds, shapes = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")

def count(n, unit):
    sup = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")
    if n >= 10000 and str(n).rstrip("0") == "1":
        s = "10" + str(len(str(n)) - 1).translate(sup)
    else:
        s = f"{n:,}"
    return f"{s} {unit}{'' if n == 1 else 's'}"

ps, sgd, noop, sgd16, noop16 = (load(work, side, rounds) for side in ("pslite", "sgd", "noop", "sgd16", "noop16"))
print("| request | ps-lite push / pull (fp32) | Tether SGD | Tether no-op apply | Tether BF16 SGD "
      "| Tether BF16 no-op | ratio SGD | ratio no-op | ratio BF16 SGD | ratio BF16 no-op |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
def pair(v):
    return f"{ms(v[0])} / {ms(v[1])}"
def ratio(v, p):
    return f"{v[0] / p[0]:.2f} / {v[1] / p[1]:.2f}"
for shape in shapes:
    n, d = shape_of(shape)
    p = ps[(n, d)]
    cols = [side[(n, d)] for side in (sgd, noop, sgd16, noop16)]
    print(f"| {count(n, 'key')} × {count(d, 'float')} | {pair(p)} | " + " | ".join(pair(c) for c in cols) + " | "
          + " | ".join(ratio(c, p) for c in cols) + " |")
EOF
