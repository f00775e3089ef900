#!/usr/bin/env bash
# Two builds of Tether side by side: samples/s of the same training job run
# with build A's binaries and build B's, alternated A B A B ... so that drift
# on a shared machine hits both alike. Prints a Markdown table of medians
# (and the range) per transport, and B's median over A's.
#
#   scripts/bench_ab.sh A_BIN_DIR B_BIN_DIR [--rounds N] [--config FILE]
#                       [--transports "tcp inproc"] [-- EXTRA LAUNCH FLAGS]
#
# Defaults: 5 rounds, tests/data/bibtex_fixed.pbtxt (2 servers, 2 workers), tcp and
# inproc. Each run is bounded by --timeout_s and must exit 0. Run it from
# the repository root of either build (the config's data paths are relative).
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,13p' "$0" >&2; exit 2; }
a=$(cd "$1" && pwd)
b=$(cd "$2" && pwd)
shift 2
rounds=5
config=tests/data/bibtex_fixed.pbtxt
transports="tcp inproc"
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    --transports) transports=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "scripts/bench_ab.sh: unknown argument $1 (--rounds, --config, --transports, --)" >&2; exit 2 ;;
  esac
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {  # run BIN TRANSPORT OUT
  timeout -k 5 600 "$1/tether-launch" --config "$config" --transport="$2" --timeout_s=550 \
    --metrics_out "$3" "${extra[@]}" > "$3.log" 2>&1 || { echo "run failed: $1 $2 (log below)" >&2; tail -20 "$3.log" >&2; exit 1; }
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples_per_second"])' "$3"
}
for t in $transports; do
  for ((i = 0; i < rounds; ++i)); do
    run "$a" "$t" "$tmp/a.json" >> "$tmp/a-$t"
    run "$b" "$t" "$tmp/b.json" >> "$tmp/b-$t"
  done
done
echo "| transport | A samples/s (median, range) | B samples/s (median, range) | B / A |"
echo "|---|---|---|---|"
for t in $transports; do
  python3 - "$tmp/a-$t" "$tmp/b-$t" "$t" <<'PY'
import statistics, sys
a = [float(x) for x in open(sys.argv[1])]
b = [float(x) for x in open(sys.argv[2])]
ma, mb = statistics.median(a), statistics.median(b)
print(f"| {sys.argv[3]} | {ma:,.0f} ({min(a):,.0f}–{max(a):,.0f}) | {mb:,.0f} ({min(b):,.0f}–{max(b):,.0f}) | {mb / ma:.3f} |")
PY
done
echo
echo "A: $a; B: $b; $rounds alternated rounds of $config ${extra[*]:-}; load $(cut -d' ' -f1-3 /proc/loadavg)"
