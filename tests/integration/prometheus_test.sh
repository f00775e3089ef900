#!/usr/bin/env bash
# A real Prometheus scrapes a running Tether job. Usage: prometheus_test.sh MODE BIN_DIR
#   launch   the job under tether-launch --metrics_port=0 --metrics_sd_dir
#   by_hand  2 tether-server and 2 tether-worker processes started one by one,
#            each with --metrics_port=0 --metrics_sd_file
#   failed_job  (no Prometheus needed) a worker whose loss diverges under
#            --fail_on_divergence=true serves its final values for
#            --metrics_linger_s, then exits 3, never 0. Its --metrics_sd_file
#            is a link into another folder: the link's target gets the
#            target list and, at the end, "[]"; the link stays. A server
#            given a FIFO as --metrics_sd_file exits 2 naming it, before it
#            listens, and the FIFO stays.
#
# Starts Debian's `prometheus` (no systemd: a plain process on a free port,
# its TSDB under $TMPDIR) with a 1 s scrape interval and a file_sd_configs
# entry; runs the Bibtex job (2 servers, 2 workers, tcp on 127.0.0.1), every
# process serving /metrics on a free port and writing its file_sd target
# file; then, through Prometheus's HTTP API:
#  - the applied-update count (sum over shards of
#    tether_server_updates_applied_total) EQUALS the metrics JSON's (the sum
#    of servers[].updates_applied), and each shard's equals its own entry;
#  - every PromQL expression of docs/grafana/tether.json returns data over
#    the job's span;
#  - a stop signal during the linger ends every process at once with the
#    job's own exit code (0), and the target files are removed.
# Skips (exit 77) when prometheus is not installed. Every process runs under
# `timeout` and is killed on exit; waits are polls with bounds.
if [ "$1" != failed_job ] && ! command -v prometheus >/dev/null 2>&1; then
  echo "SKIP: prometheus not installed (Debian package prometheus; scripts/setup_cluster.sh)"
  exit 77
fi
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"
if [ "$mode" = failed_job ]; then
  flags=(--config=tests/data/bibtex_fixed.pbtxt --num_servers=1 --num_workers=1 --epochs=1 --job_id="diverge-$$")
  timeout -k 5 100 "$bin/tether-server" "${flags[@]}" --port_file="$tmp/s0.port" 2>"$tmp/server.err" &
  pids+=($!)
  wait_port "$tmp/s0.port" "$!" || fail "the server did not start"
  mkfifo "$tmp/pipe"
  rc=0
  timeout -k 5 30 "$bin/tether-server" "${flags[@]}" --shard=0 --listen=tcp://127.0.0.1:0 --metrics_port=0 \
    --metrics_sd_file="$tmp/pipe" 2>"$tmp/refused.err" || rc=$?
  [ "$rc" = 2 ] || { echo "FAIL: a server with a FIFO as --metrics_sd_file exited $rc, want 2"; exit 1; }
  grep -q "flag --metrics_sd_file=$tmp/pipe: is a FIFO (named pipe), not a regular file" "$tmp/refused.err" \
    || { echo "FAIL: the refusal does not name the flag and the FIFO:"; tail -3 "$tmp/refused.err"; exit 1; }
  [ -p "$tmp/pipe" ] || { echo "FAIL: the FIFO was replaced"; exit 1; }
  mkdir "$tmp/sd" "$tmp/real"
  ln -s ../real/w0.json "$tmp/sd/w0.json"
  timeout -k 5 100 "$bin/tether-worker" "${flags[@]}" --rank=0 --server_addresses="$(cat "$tmp/s0.port")" \
    --optimizer=sgd --learning_rate=100 --fail_on_divergence=true --metrics_sd_file="$tmp/sd/w0.json" \
    --metrics_port=0 --metrics_port_file="$tmp/w0.metrics" --metrics_linger_s=4 2>"$tmp/worker.err" &
  worker=$!
  pids+=($worker)
  # The endpoint answers during training and keeps the final values after.
  python3 - "$tmp/w0.metrics" "$tmp/real/w0.json" <<'EOF2'
import json, re, sys, time, urllib.request
deadline = time.time() + 60
page = ""
while time.time() < deadline:
    try:
        hostport = open(sys.argv[1]).read().strip()
        page = urllib.request.urlopen(f"http://{hostport}/metrics", timeout=2).read().decode()
    except (OSError, ValueError):
        time.sleep(0.1)
        continue
    if re.search(r'^tether_training_active\{[^}]*\} 0$', page, re.M) and "tether_worker_epoch_loss" in page:
        m = re.search(r'^tether_worker_epoch_loss\{[^}]*\} (\S+)$', page, re.M)
        if m and m.group(1) != "NaN":
            print(f"final values served after training: epoch loss {m.group(1)}")
            sd = json.load(open(sys.argv[2]))  # written through the --metrics_sd_file link
            if sd[0]["targets"] != [hostport] or sd[0]["labels"]["role"] != "worker":
                sys.exit(f"FAIL: the --metrics_sd_file link's target holds {sd}, want {hostport}")
            sys.exit(0)
    time.sleep(0.1)
sys.exit(f"FAIL: no final values on /metrics within 60 s; last page:\n{page}")
EOF2
  rc=0
  wait "$worker" || rc=$?
  echo "diverged worker exited $rc after lingering"
  [ "$rc" = 3 ] || { echo "FAIL: expected exit 3"; tail -5 "$tmp/worker.err"; exit 1; }
  grep -q "training over: serving the final metrics" "$tmp/worker.err" || { echo "FAIL: no linger"; exit 1; }
  [ -L "$tmp/sd/w0.json" ] && [ "$(readlink "$tmp/sd/w0.json")" = ../real/w0.json ] \
    || { echo "FAIL: the --metrics_sd_file link was not kept: $(ls -l "$tmp/sd")"; exit 1; }
  [ "$(cat "$tmp/real/w0.json")" = "[]" ] || { echo "FAIL: the link's target holds $(cat "$tmp/real/w0.json")"; exit 1; }
  echo "the --metrics_sd_file link stays; its target now lists no targets"
  echo PASS
  exit 0
fi
prom_pid=""
launch_pid=""
none_alive() {
  local p
  for p in "$@"; do [ -n "$p" ] && ! gone "$p" && return 1; done
  return 0
}
stop_gently() {
  # SIGTERM first (timeout passes it on: tether-launch tears its children
  # down, a lingering process exits at once), for 10 s at most; then the
  # lib's cleanup SIGKILLs what is left, with its children.
  local all=($launch_pid "${pids[@]:-}" $prom_pid) p
  for p in "${all[@]}"; do [ -n "$p" ] && kill -TERM "$p" 2>/dev/null || true; done
  poll 200 none_alive "${all[@]}" || true
  pids+=($launch_pid $prom_pid)
  tether_test_cleanup
}
trap stop_gently EXIT

ready() { python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$1" 2>/dev/null; }
ready_or_gone() { ready "$1" || gone "$2"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

mkdir -p "$tmp/sd"
cat >"$tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: tether
    file_sd_configs:
      - files: ["$tmp/sd/*.json"]
        refresh_interval: 1s
EOF

# Prometheus needs a fixed port: take a free one, and try again should
# another process grab it first.
prom_url=""
for attempt in 1 2 3; do
  port=$(free_port)
  timeout -k 5 170 prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb$attempt" \
    --web.listen-address="127.0.0.1:$port" --log.level=warn >"$tmp/prometheus$attempt.log" 2>&1 &
  prom_pid=$!
  poll 600 ready_or_gone "http://127.0.0.1:$port/-/ready" "$prom_pid" || true  # 30 s at least
  ready "http://127.0.0.1:$port/-/ready" && prom_url="http://127.0.0.1:$port" && break
  kill -9 "$prom_pid" 2>/dev/null || true
  wait "$prom_pid" 2>/dev/null || true
  echo "prometheus did not start on port $port (attempt $attempt):"; tail -5 "$tmp/prometheus$attempt.log"
done
[ -n "$prom_url" ] || { echo "FAIL: prometheus did not start"; exit 1; }
echo "prometheus ready at $prom_url"

start_unix=$(date +%s)
# Linger long enough that the test, not the clock, ends it: the signal below
# cuts it short once Prometheus has the final values.
case "$mode" in
launch)
  timeout -k 5 150 "$bin/tether-launch" --config tests/data/bibtex_fixed.pbtxt --metrics_out "$tmp/m.json" \
    --metrics_port=0 --metrics_sd_dir="$tmp/sd" --metrics_linger_s=60 >"$tmp/launch.out" 2>"$tmp/launch.err" &
  launch_pid=$!
  ;;
by_hand)
  # A job id of the test's own, as tether-launch would make one.
  job_flags=(--config=tests/data/bibtex_fixed.pbtxt --job_id="bibtex-by-hand-$$" --metrics_port=0 --metrics_linger_s=60)
  for s in 0 1; do
    timeout -k 5 150 "$bin/tether-server" "${job_flags[@]}" --shard=$s --listen=tcp://127.0.0.1:0 \
      --port_file="$tmp/s$s.port" --metrics_sd_file="$tmp/sd/server-$s.json" 2>"$tmp/server$s.err" &
    pids+=($!)
  done
  for s in 0 1; do wait_port "$tmp/s$s.port" "${pids[$s]}" || fail "server $s did not start"; done
  addrs="$(cat "$tmp/s0.port"),$(cat "$tmp/s1.port")"
  for r in 1 0; do
    extra=()
    [ $r = 0 ] && extra=(--metrics_out="$tmp/m.json")
    timeout -k 5 150 "$bin/tether-worker" "${job_flags[@]}" --rank=$r --server_addresses="$addrs" \
      --metrics_sd_file="$tmp/sd/worker-$r.json" "${extra[@]}" 2>"$tmp/worker$r.err" &
    pids+=($!)
  done
  ;;
*) echo "usage: prometheus_test.sh launch|by_hand|failed_job BIN_DIR"; exit 2 ;;
esac

# The job's end: worker 0 writes the metrics JSON.
poll 2400 test -s "$tmp/m.json" || true  # 120 s
[ -s "$tmp/m.json" ] || { echo "FAIL: the job wrote no metrics JSON"; tail -20 "$tmp"/*.err; exit 1; }

python3 - "$prom_url" "$tmp/m.json" "$tmp/sd" docs/grafana/tether.json "$start_unix" <<'EOF'
import glob, json, math, sys, time, urllib.parse, urllib.request

prom, metrics_path, sd_dir, dashboard_path, start = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])

def api(path, **params):
    url = prom + path + "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    if body.get("status") != "success":
        raise SystemExit(f"FAIL: {url}: {body}")
    return body["data"]

metrics = json.load(open(metrics_path))
want_total = sum(s["updates_applied"] for s in metrics["servers"])
want_by_shard = {str(s["shard"]): s["updates_applied"] for s in metrics["servers"]}
targets = [json.load(open(f))[0] for f in sorted(glob.glob(sd_dir + "/*.json"))]
jobs = {t["labels"]["tether_job"] for t in targets}
assert len(targets) == 4 and len(jobs) == 1, f"FAIL: expected 4 target files of one job, got {targets}"
job = jobs.pop()
print(f"job {job}: metrics JSON updates_applied {want_total} ({want_by_shard})")

# Poll (bounded) until Prometheus scraped the final values: every process
# finished training and the count is in.
sel = f'tether_job="{job}"'
deadline = time.time() + 40
got_total, got_by_shard, active, scrapes = None, {}, None, None
while time.time() < deadline:
    r = api("/api/v1/query", query=f"sum(tether_server_updates_applied_total{{{sel}}})")["result"]
    got_total = int(float(r[0]["value"][1])) if r else None
    r = api("/api/v1/query", query=f"tether_server_updates_applied_total{{{sel}}}")["result"]
    got_by_shard = {x["metric"]["shard"]: int(float(x["value"][1])) for x in r}
    r = api("/api/v1/query", query=f"sum(tether_training_active{{{sel}}})")["result"]
    active = float(r[0]["value"][1]) if r else None
    n = api("/api/v1/query", query=f"count(tether_info{{{sel}}})")["result"]
    # Every target scraped 3 times or more, so each rate() over the
    # dashboard's 1m windows has two samples at least (the linger supplies
    # them when the job is shorter than Prometheus's discovery delay).
    scrapes = api("/api/v1/query", query=f"min(count_over_time(tether_info{{{sel}}}[5m]))")["result"]
    if (got_total == want_total and active == 0 and n and int(float(n[0]["value"][1])) == 4 and scrapes
            and int(float(scrapes[0]["value"][1])) >= 3):
        break
    time.sleep(0.5)
print(f"prometheus: sum(tether_server_updates_applied_total) = {got_total}, per shard {got_by_shard}, "
      f"processes still training {active}, scrapes of the least scraped target {scrapes and scrapes[0]['value'][1]}")
if got_total != want_total:
    raise SystemExit(f"FAIL: Prometheus has {got_total} applied updates, the metrics JSON {want_total}")
if got_by_shard != want_by_shard:
    raise SystemExit(f"FAIL: per shard, Prometheus {got_by_shard} != metrics JSON {want_by_shard}")
ups = api("/api/v1/query", query='up{job="tether"}')["result"]
assert len(ups) == 4 and all(u["value"][1] == "1" for u in ups), f"FAIL: targets not all up: {ups}"

# Every expression of the Grafana dashboard returns data over the job's span.
dash = json.load(open(dashboard_path))
exprs = [(p["title"], t["expr"]) for p in dash["panels"] for t in p["targets"]]
var = dash["templating"]["list"][0]
assert var["name"] == "tether_job"
exprs.append(("variable tether_job", None))
end = time.time()
empty = []
for title, expr in exprs:
    if expr is None:
        vals = api("/api/v1/label/tether_job/values", start=start, end=int(end) + 1)
        ok = job in vals
    else:
        q = expr.replace("$tether_job", job)
        r = api("/api/v1/query_range", query=q, start=start, end=int(end) + 1, step=1)["result"]
        ok = any(len(s["values"]) > 0 for s in r)
    print(f"  {'ok   ' if ok else 'EMPTY'} {title}: {expr}")
    if not ok:
        empty.append(expr)
if empty:
    raise SystemExit(f"FAIL: {len(empty)} dashboard expression(s) returned no data")
print(f"{len(exprs)} dashboard expressions returned data")
EOF

# The processes are lingering (60 s): a stop signal ends each at once, and
# the job's exit code stands (0).
t0=$(date +%s)
if [ "$mode" = launch ]; then
  # ($launch_pid is `timeout`'s; its child is tether-launch, whose children
  # are the servers and workers.)
  launcher=$(pgrep -P "$launch_pid" -x tether-launch || true)
  [ -n "$launcher" ] || { echo "FAIL: tether-launch is not running during the linger"; exit 1; }
  children=$(pgrep -P "$launcher" || true)
  [ "$(echo $children | wc -w)" = 4 ] || { echo "FAIL: expected 4 lingering processes, got: $children"; exit 1; }
  for c in $children; do kill -TERM "$c" 2>/dev/null || true; done
  rc=0
  wait "$launch_pid" || rc=$?
  launch_pid=""
  echo "tether-launch exited $rc, $(( $(date +%s) - t0 )) s after the stop signal"
  [ "$rc" = 0 ] || { echo "FAIL: tether-launch exited $rc"; tail -20 "$tmp/launch.err"; exit 1; }
else
  # ${pids[@]} are `timeout`'s; each one's child is the Tether process.
  for p in "${pids[@]}"; do
    c=$(pgrep -P "$p" || true)
    [ -n "$c" ] || { echo "FAIL: a process (under timeout pid $p) is not running during the linger"; exit 1; }
    kill -TERM "$c"
  done
  for p in "${pids[@]}"; do
    rc=0
    wait "$p" || rc=$?
    [ "$rc" = 0 ] || { echo "FAIL: a process exited $rc after a finished job"; tail -5 "$tmp"/*.err; exit 1; }
  done
  pids=()
  echo "4 processes exited 0, $(( $(date +%s) - t0 )) s after the stop signal"
fi
[ $(( $(date +%s) - t0 )) -le 10 ] || { echo "FAIL: the linger did not end on the signal"; exit 1; }
left=$(ls "$tmp/sd")
[ -z "$left" ] || { echo "FAIL: target files left behind: $left"; exit 1; }
echo "PASS"
