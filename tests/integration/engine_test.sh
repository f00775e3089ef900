#!/usr/bin/env bash
# tether-launch in engine mode under Open MPI's mpirun (no MPI linking: each
# task reads OMPI_COMM_WORLD_RANK/SIZE and execs its role). Modes:
#   mpirun   mpirun -np 4 tether-launch --num_servers 2 trains Bibtex to
#            P@1 >= 0.58, with the rendezvous given and with the default one
#            (a directory under the working directory)
#   kill     a worker SIGKILLed mid-job: mpirun exits non-zero within 30 s
#            and no tether process is left; a SIGTERM to mpirun likewise
# Skips (exit 77) when mpirun is missing. Every process is bounded by
# `timeout` and reaped on exit.
set -euo pipefail
mode=$1
bin=$(cd "$2" && pwd)
repo=$(pwd)
if ! command -v mpirun >/dev/null; then
  echo "SKIP: mpirun not found (Debian package openmpi-bin)"
  exit 77
fi
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  # Anything of this test's job still running is a failure already reported;
  # do not leave it behind either.
  pkill -9 -f -- "--config=$tmp/" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
mpi=(mpirun --allow-run-as-root --oversubscribe)
metric() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
gate() {
  python3 -c 'import sys; v,m=float(sys.argv[1]),float(sys.argv[2]); print(f"{sys.argv[3]} = {v:.4f} (gate >= {m})"); sys.exit(0 if v >= m else 1)' "$1" "$2" "$3"
}
# The job's config with absolute data paths, so tasks may run in $tmp.
sed "s|\"data/|\"$repo/data/|g" examples/bibtex.pbtxt > "$tmp/bibtex.pbtxt"
left_behind() { pgrep -fa -- "--config=$tmp/bibtex.pbtxt" || true; }
wait_gone() {  # no process of this job within 10 s
  for _ in $(seq 1 100); do [ -z "$(left_behind)" ] && return 0; sleep 0.1; done
  echo "FAIL: processes left behind:"; left_behind; return 1
}

case "$mode" in
mpirun)
  timeout -k 5 120 "${mpi[@]}" -np 4 "$bin/tether-launch" --config "$tmp/bibtex.pbtxt" --num_servers 2 \
    --metrics_out "$tmp/m.json" --rendezvous "file:$tmp/rdzv" > "$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
  grep -c "Open MPI task" "$tmp/log" | grep -qx 4 || { echo "FAIL: expected 4 engine tasks"; cat "$tmp/log"; exit 1; }
  grep -q "worker rank 1 of 2" "$tmp/log"
  gate "$(metric "$tmp/m.json" precision_at_1)" 0.58 "P@1 (mpirun -np 4, 2 servers, 2 workers, rendezvous file:DIR)"
  # Default rendezvous: DIR=./tether-rendezvous under the working directory.
  mkdir "$tmp/cwd"
  (cd "$tmp/cwd" && timeout -k 5 120 "${mpi[@]}" -np 3 "$bin/tether-launch" --config "$tmp/bibtex.pbtxt" \
    --num_servers 1 --metrics_out "$tmp/m1.json") > "$tmp/log1" 2>&1 || { cat "$tmp/log1"; exit 1; }
  [ -d "$tmp/cwd/tether-rendezvous" ] || { echo "FAIL: no default rendezvous directory"; exit 1; }
  gate "$(metric "$tmp/m1.json" precision_at_1)" 0.58 "P@1 (mpirun -np 3, 1 server, 2 workers, default rendezvous)"
  wait_gone
  ;;
kill)
  timeout -k 5 120 "${mpi[@]}" -np 4 "$bin/tether-launch" --config "$tmp/bibtex.pbtxt" --num_servers 2 \
    --epochs=1000 --rendezvous "file:$tmp/rdzv" > "$tmp/log" 2>&1 &
  mp=$!; pids+=($mp)
  for _ in $(seq 1 300); do grep -q "servers from the rendezvous" "$tmp/log" 2>/dev/null && break; sleep 0.1; done
  victim=$(pgrep -f -- "tether-worker --config=$tmp/bibtex.pbtxt --rank=1" || true)
  [ -n "$victim" ] || { echo "FAIL: worker 1 never started"; cat "$tmp/log"; exit 1; }
  start=$(date +%s)
  kill -9 "$victim"
  set +e; timeout 30 tail --pid="$mp" -f /dev/null; wait "$mp"; rc=$?; set -e
  echo "mpirun exited $rc, $(( $(date +%s) - start )) s after worker 1 was SIGKILLed"
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { echo "FAIL: expected a non-zero exit before the bound"; cat "$tmp/log"; exit 1; }
  wait_gone
  # SIGTERM to mpirun (what a scheduler's cancel sends) ends every task.
  timeout -k 5 120 "${mpi[@]}" -np 4 "$bin/tether-launch" --config "$tmp/bibtex.pbtxt" --num_servers 2 \
    --epochs=1000 --rendezvous "file:$tmp/rdzv2" > "$tmp/log2" 2>&1 &
  mp=$!; pids+=($mp)
  for _ in $(seq 1 300); do grep -q "servers from the rendezvous" "$tmp/log2" 2>/dev/null && break; sleep 0.1; done
  kill -TERM "$mp"
  set +e; wait "$mp"; rc=$?; set -e
  echo "mpirun exited $rc after SIGTERM"
  [ "$rc" -ne 0 ] || { echo "FAIL: a stopped job exited 0"; exit 1; }
  wait_gone
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
echo PASS
