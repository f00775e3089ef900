#!/usr/bin/env bash
# End-to-end tests on the bundled Bibtex data. Usage: bibtex_test.sh MODE BIN_DIR
#   launch         tether-launch, 2 servers + 2 workers: P@1 >= 0.55
#   by_hand        servers and workers started one by one with flags: P@1 >= 0.55
#   deterministic  1 worker, fixed seed, two runs: identical metrics
#   config_errors  config typo / unknown flag / flag without value refused, exit != 0
# Every process is started under `timeout` and killed on exit.
set -euo pipefail
mode=$1
bin=$(cd "$2" && pwd)
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

metric() {  # metric FILE KEY
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}
gate() {  # gate VALUE MIN NAME
  python3 -c 'import sys; v,m=float(sys.argv[1]),float(sys.argv[2]); print(f"{sys.argv[3]} = {v:.4f} (gate >= {m})"); sys.exit(0 if v >= m else 1)' "$1" "$2" "$3"
}

case "$mode" in
launch)
  timeout -k 5 400 "$bin/tether-launch" --config examples/bibtex.pbtxt --metrics_out "$tmp/m.json"
  gate "$(metric "$tmp/m.json" precision_at_1)" 0.55 "P@1 (tether-launch, 2 servers, 2 workers)"
  ;;
by_hand)
  for s in 0 1; do
    timeout -k 5 400 "$bin/tether-server" --config=examples/bibtex.pbtxt --shard=$s \
      --listen=tcp://127.0.0.1:0 --port_file="$tmp/s$s.port" &
    pids+=($!)
  done
  for _ in $(seq 1 100); do [ -f "$tmp/s0.port" ] && [ -f "$tmp/s1.port" ] && break; sleep 0.1; done
  addrs="$(cat "$tmp/s0.port"),$(cat "$tmp/s1.port")"
  timeout -k 5 400 "$bin/tether-worker" --config=examples/bibtex.pbtxt --rank=1 --server_addresses="$addrs" &
  w1=$!; pids+=($w1)
  timeout -k 5 400 "$bin/tether-worker" --config=examples/bibtex.pbtxt --rank=0 --server_addresses="$addrs" \
    --metrics_out="$tmp/m.json"
  wait "$w1"
  for p in "${pids[@]}"; do wait "$p"; done
  pids=()
  gate "$(metric "$tmp/m.json" precision_at_1)" 0.55 "P@1 (processes started by hand)"
  ;;
deterministic)
  for run in 1 2; do
    timeout -k 5 300 "$bin/tether-launch" --config examples/bibtex.pbtxt --servers 2 --workers 1 \
      --epochs=3 --seed=7 --metrics_out "$tmp/run$run.json"
  done
  for k in precision_at_1 precision_at_3 precision_at_5 ndcg_at_3 ndcg_at_5 final_loss; do
    a=$(metric "$tmp/run1.json" $k); b=$(metric "$tmp/run2.json" $k)
    echo "$k: run1 $a run2 $b"
    [ "$a" = "$b" ] || { echo "FAIL: $k differs between runs"; exit 1; }
  done
  ;;
config_errors)
  # C20: a typo in the config file names file:line and the closest field.
  printf 'name: "typo"\nconsistency { staleness_bond: 3 }\n' > "$tmp/typo.pbtxt"
  if out=$(timeout 20 "$bin/tether-server" --config="$tmp/typo.pbtxt" 2>&1); then
    echo "FAIL: config typo accepted"; exit 1; fi
  echo "$out" | grep -q "typo.pbtxt:2: unknown field 'staleness_bond' (did you mean 'staleness'?)" \
    || { echo "FAIL: message was: $out"; exit 1; }
  # A misspelt flag is refused with a suggestion.
  if out=$(timeout 20 "$bin/tether-worker" --config=examples/bibtex.pbtxt --stalenes=3 2>&1); then
    echo "FAIL: unknown flag accepted"; exit 1; fi
  echo "$out" | grep -q "unknown flag --stalenes (did you mean --staleness?)" || { echo "FAIL: $out"; exit 1; }
  # A flag that needs a value, given none.
  if out=$(timeout 20 "$bin/tether-worker" --config=examples/bibtex.pbtxt --staleness 2>&1); then
    echo "FAIL: flag without value accepted"; exit 1; fi
  echo "$out" | grep -q "flag --staleness is missing its value" || { echo "FAIL: $out"; exit 1; }
  # Missing index base is refused naming the field.
  grep -v index_base examples/bibtex.pbtxt > "$tmp/nobase.pbtxt"
  if out=$(timeout 20 "$bin/tether-server" --config="$tmp/nobase.pbtxt" 2>&1); then
    echo "FAIL: missing index_base accepted"; exit 1; fi
  echo "$out" | grep -q "data.index_base" || { echo "FAIL: $out"; exit 1; }
  echo "config and flag errors refused as expected"
  ;;
*) echo "unknown mode $mode"; exit 2 ;;
esac
