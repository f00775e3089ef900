#!/usr/bin/env bash
# Hostile clients on every port while a job trains (ctest label soak).
# Usage: soak_test.sh BIN_DIR
# Bibtex by hand, 2 servers and 1 worker at BSP (one worker: deterministic),
# 12 epochs, seed 7, every process serving /metrics. First a clean run; then
# the same job while tests/integration/hostile.py (soak) hammers both server
# ports and all three /metrics ports for the whole run: 3 GB frames announced
# before any handshake, random bytes, connections that stay idle, 3 GB POSTs,
# slow request heads and 200-header requests. The hostile run must:
#   - give the clean run's metrics bit for bit (P@k, nDCG@k, loss, samples);
#   - keep each server's and the worker's peak memory (VmHWM) within 96 MiB
#     of the clean run's;
#   - exit 0 everywhere, within twice the clean run's time plus 60 s;
#   - count the dropped peers (tether_peers_dropped_total on a server's page).
# Every process runs under `timeout` and is reaped; waits poll with a bound.
source "$(dirname "$0")/lib.sh"
tether_test_init soak "$1"
limit_s=400
here=$(cd "$(dirname "$0")" && pwd)
sed "s|\"\.\./\.\./data/|\"$PWD/data/|g" tests/data/bibtex_fixed.pbtxt > "$tmp/bibtex.pbtxt"
common=(--config="$tmp/bibtex.pbtxt" --num_servers=2 --num_workers=1 --epochs=12 --seed=7 --staleness=0
        --metrics_port=0 --metrics_linger_s=0)

hwm_kb() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }

# run NAME [HOSTILE]: the job; sets took_ms and peak_kb=(server0 server1 worker).
run() {
  local name=$1 hostile=${2:-} s t0 soak_pid= inner_pids=() i
  t0=$(now_ms)
  server_pids=()
  for s in 0 1; do
    timeout -k 5 "$limit_s" "$bin/tether-server" "${common[@]}" --shard=$s --listen=tcp://127.0.0.1:0 \
      --port_file="$tmp/$name-s$s.port" --metrics_port_file="$tmp/$name-s$s.metrics" > "$tmp/$name-server$s.log" 2>&1 &
    server_pids+=($!)
    pids+=($!)
  done
  for s in 0 1; do wait_port "$tmp/$name-s$s.port" || fail "$name: server $s never listened"; done
  for s in 0 1; do wait_port "$tmp/$name-s$s.metrics" || fail "$name: server $s's /metrics never listened"; done
  timeout -k 5 "$limit_s" "$bin/tether-worker" "${common[@]}" --rank=0 \
    --server_addresses="$(cat "$tmp/$name-s0.port"),$(cat "$tmp/$name-s1.port")" \
    --metrics_port_file="$tmp/$name-w0.metrics" --metrics_out="$tmp/$name.json" > "$tmp/$name-worker0.log" 2>&1 &
  worker=$!
  pids+=($worker)
  wait_port "$tmp/$name-w0.metrics" "$worker" || fail "$name: the worker's /metrics never listened"
  if [ -n "$hostile" ]; then
    timeout -k 5 "$limit_s" python3 "$here/hostile.py" soak \
      "$(sed 's|tcp://||' "$tmp/$name-s0.port"),$(sed 's|tcp://||' "$tmp/$name-s1.port")" \
      --http "$(cat "$tmp/$name-s0.metrics"),$(cat "$tmp/$name-s1.metrics"),$(cat "$tmp/$name-w0.metrics")" \
      --seconds 300 > "$tmp/$name-hostile.log" 2>&1 &
    soak_pid=$!
    pids+=($soak_pid)
  fi
  for p in "${server_pids[@]}" "$worker"; do inner_pids+=("$(inner "$p")"); done
  peak_kb=(0 0 0)
  local n=0
  # Sample the peaks while the worker trains (a process's VmHWM only grows),
  # and, under attack, server 0's page every second: the last one read while
  # the job still ran shows the drops counted. The scraper connects from
  # 127.0.0.2: the hostile clients fill the 8 connections 127.0.0.1 may hold,
  # and a scraper at another address must still get its page.
  while ! exited "$worker"; do
    for i in 0 1 2; do
      local v
      v=$(hwm_kb "${inner_pids[$i]}")
      [ -n "$v" ] && [ "$v" -gt "${peak_kb[$i]}" ] && peak_kb[$i]=$v
    done
    if [ -n "$soak_pid" ] && [ $((++n % 5)) = 0 ]; then
      python3 -c 'import http.client, sys; h, p = sys.argv[1].rsplit(":", 1); c = http.client.HTTPConnection(h, int(p), timeout=5, source_address=("127.0.0.2", 0)); c.request("GET", "/metrics"); r = c.getresponse(); assert r.status == 200; print(r.read().decode())' \
        "$(cat "$tmp/$name-s0.metrics")" > "$tmp/$name-page.next" 2>/dev/null && mv "$tmp/$name-page.next" "$tmp/$name-page.txt"
    fi
    sleep 0.2  # a sampling period, not a wait for an event
  done
  wait_zero "$name: worker and servers" "$worker" "${server_pids[@]}"
  took_ms=$(($(now_ms) - t0))
  if [ -n "$soak_pid" ]; then
    kill "$(inner "$soak_pid")" 2>/dev/null || true
    wait "$soak_pid" 2>/dev/null || true
    [ -s "$tmp/$name-hostile.log" ] || fail "the hostile clients reported nothing"
  fi
  pids=()
}

run clean
clean_ms=$took_ms
clean_peak=("${peak_kb[@]}")
echo "clean: ${clean_ms} ms, VmHWM server0 ${clean_peak[0]} kB, server1 ${clean_peak[1]} kB, worker ${clean_peak[2]} kB"
run hostile yes
echo "hostile: ${took_ms} ms, VmHWM server0 ${peak_kb[0]} kB, server1 ${peak_kb[1]} kB, worker ${peak_kb[2]} kB"
echo "hostile clients: $(tail -1 "$tmp/hostile-hostile.log" 2>/dev/null)"
for k in precision_at_1 precision_at_3 precision_at_5 ndcg_at_3 ndcg_at_5 final_loss total_samples; do
  a=$(metric "$tmp/clean.json" $k); b=$(metric "$tmp/hostile.json" $k)
  echo "$k: clean $a hostile $b"
  [ "$a" = "$b" ] || fail "$k differs under hostile clients"
done
for i in 0 1 2; do
  [ $((peak_kb[i] - clean_peak[i])) -lt $((96 * 1024)) ] ||
    fail "process $i's peak memory grew by $((peak_kb[i] - clean_peak[i])) kB under hostile clients"
done
[ "$took_ms" -lt $((2 * clean_ms + 60000)) ] || fail "the hostile run took $took_ms ms (clean: $clean_ms ms)"
[ -s "$tmp/hostile-page.txt" ] || fail "server 0's page was never read while the job ran"
grep -q '^tether_peers_dropped_total{.*listener="server"' "$tmp/hostile-page.txt" ||
  fail "server 0's page counts no dropped peer: $(grep tether_peers "$tmp/hostile-page.txt" | head -5)"
grep '^tether_peers_dropped_total' "$tmp/hostile-page.txt" | head -20
echo "soak: same metrics, memory within 96 MiB, ${took_ms} ms against ${clean_ms} ms"
