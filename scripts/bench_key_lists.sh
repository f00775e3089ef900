#!/usr/bin/env bash
# Key-list caching on and off (core/net/key_list_cache.h), Tether alone, on
# scripts/bench_pslite.sh's request shapes: tether-server + tether-bench kv
# (one server, one worker, separate processes, loopback TCP, random sorted
# uint64 keys, one request in flight), with SGD and with NOOP tables.
#
#   scripts/bench_key_lists.sh [--build DIR] [--rounds N] [--shapes S] [--min_time_s T] [--timeout_s T]
#
# "on": tether-server --key_list_cache_bytes=67108864, the default (the bench's pushes and
# pulls repeat one key list per shape, so after the first request they name
# it); "off": --key_list_cache_bytes=0 (every request carries its keys and is
# looked up). Each round runs the four jobs (SGD on, SGD off, NOOP on, NOOP
# off) one after the other, the order rotating from round to round; a cell
# is the median over the rounds of each run's median. Output: one Markdown
# table on stdout (ms; off ÷ on above 1 means the cache gains), preceded by
# the run's conditions (load average before and after). Every process runs
# under `timeout` and is reaped; temporary files live in a mktemp -d
# directory removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
rounds=3
shapes="1x1,100000x1,1000000x1,1024x4096,100000x64,100000x256"
min_time_s=0.3
timeout_s=300
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --shapes) shapes="$2"; shift 2 ;;
    --min_time_s) min_time_s="$2"; shift 2 ;;
    --timeout_s) timeout_s="$2"; shift 2 ;;
    *) echo "scripts/bench_key_lists.sh: unknown argument $1 (--build, --rounds, --shapes, --min_time_s," \
            "--timeout_s)" >&2; exit 2 ;;
  esac
done
me=scripts/bench_key_lists.sh
for bin in tether-server tether-bench; do
  [ -x "$build/bin/$bin" ] || { echo "$me: $build/bin/$bin missing: build first" >&2; exit 1; }
done
build=$(cd "$build" && pwd)
# The temporary directory, its cleanup and Tether's runs (bench_kv_*).
bench_args=(--min_time_s="$min_time_s")
# shellcheck source=scripts/lib/bench_kv.sh
source scripts/lib/bench_kv.sh
bench_kv_setup bench_key_lists

# Runs one job into $work/$1.txt: optimizer $2, server key-list bytes $3.
run_job() {
  bench_kv_run_tether "$1" "$2" --key_list_cache_bytes="$3"
  grep -h "key lists:" "$work/$1-server.log" | sed 's/.*\] /  /' >&2 || true
}

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
start_s=$(date +%s)
jobs_=(sgd-on sgd-off noop-on noop-off)
for r in $(seq 1 "$rounds"); do
  for i in 0 1 2 3; do
    job=${jobs_[$(((i + r - 1) % 4))]}
    echo "$me: round $r/$rounds: $job" >&2
    opt=${job%-*}
    bytes=0
    [ "${job#*-}" = on ] && bytes=67108864
    run_job "$job-r$r" "$opt" "$bytes"
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
elapsed_s=$(($(date +%s) - start_s))

echo "## Key-list caching on and off: tether-server + tether-bench kv, loopback TCP"
echo
echo "Commit $commit; $rounds alternated rounds (medians of each run's medians), $(nproc) cores, load average"
echo "$load_before before and $load_after after, ${elapsed_s} s in all. Times in ms, push / pull; off ÷ on above 1: the cache gains."
echo
PYTHONPATH=scripts/lib /usr/bin/python3 - "$work" "$rounds" "$shapes" <<'PY'
import sys
from bench_kv_results import load, ms, shape_of
work, rounds, shapes = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(",")
res = {j: load(work, j, rounds) for j in ("sgd-on", "sgd-off", "noop-on", "noop-off")}
print("| request | SGD off | SGD on | SGD off ÷ on | NOOP off | NOOP on | NOOP off ÷ on |")
print("|---|---:|---:|---:|---:|---:|---:|")
for shape in shapes:
    n, d = shape_of(shape)
    cells = []
    for opt in ("sgd", "noop"):
        off, on = res[f"{opt}-off"][(n, d)], res[f"{opt}-on"][(n, d)]
        cells += [f"{ms(off[0])} / {ms(off[1])}", f"{ms(on[0])} / {ms(on[1])}",
                  f"{off[0] / on[0]:.2f} / {off[1] / on[1]:.2f}"]
    print(f"| {n:,} × {d} | " + " | ".join(cells) + " |")
PY
