#!/usr/bin/env bash
# The tcp path against one process : Bibtex
# (tests/data/bibtex_fixed.pbtxt), 1 worker + 1 server, run alternately in one
# process (--transport inproc: the shard and the worker are threads passing
# messages by pointer) and as two processes over loopback tcp (tether-server
# + tether-worker, what a job across hosts pays). Prints a Markdown table of
# medians: samples/s, training seconds, the CPU the whole job used (user and
# system seconds of every process, from /usr/bin/time), the bytes the shard
# moved, the worker's share of training time spent waiting on replies, the
# shard's mean (and largest) push staleness τ, and P@1 and the final loss,
# which must be identical on both (one worker).
#
# Why CPU: on a machine with C cores a job cannot train faster than C cores
# can do its training work, so "CPU bound" = C ÷ (CPU seconds per training
# sample) is an upper limit on samples/s for each transport (C from nproc).
# The training CPU per sample is told apart from start-up, data loading and
# the final evaluation by a second, one-epoch run of each transport right
# after the full one: (CPU of 7 epochs − CPU of 1) ÷ (samples of 7 − of 1).
# When the tcp run's CPU bound is below 0.8× the one-process samples/s, no
# overlap of pulls with compute can close the gap on that machine: only
# moving fewer bytes through the kernel can.
#
#   scripts/bench_tcp.sh [--build DIR] [--out DIR] [--repeats N] [--pipeline on|off|both]
#
# --pipeline (train.pipeline, docs/RUNNING.md): the worker's
# pipelined minibatches on (the default, as jobs run), off, or both: each
# transport then runs with it off and on, alternated, for the before/after.
#
# Needs a build (scripts/build.sh) and /usr/bin/time (scripts/setup_bench.sh).
# The per-run logs and metrics JSON stay in OUT (default BUILD/bench-tcp).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
out=""
repeats=5
pipeline=on
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    --pipeline) pipeline="$2"; shift 2 ;;
    *) echo "scripts/bench_tcp.sh: unknown argument $1 (--build, --out, --repeats, --pipeline)" >&2; exit 2 ;;
  esac
done
out="${out:-$build/bench-tcp}"
[ -x "$build/bin/tether-launch" ] || { echo "scripts/bench_tcp.sh: $build/bin/tether-launch missing: build first" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "scripts/bench_tcp.sh: /usr/bin/time missing: run scripts/setup_bench.sh" >&2; exit 1; }
case "$pipeline" in
  on) variants="inproc tcp" ;;
  off) variants="inproc-off tcp-off" ;;
  both) variants="inproc-off tcp-off inproc tcp" ;;
  *) echo "scripts/bench_tcp.sh: --pipeline must be on, off or both, got $pipeline" >&2; exit 2 ;;
esac
rm -rf "$out"
mkdir -p "$out"

for r in $(seq 1 "$repeats"); do
  echo "scripts/bench_tcp.sh: repeat $r/$repeats" >&2
  for t in $variants; do
    for epochs in 7 1; do
      run="$out/$t-e$epochs-r$r"
      cut -d' ' -f1 /proc/loadavg > "$run.load"
      on=true; [ "${t#*-}" = off ] && on=false
      /usr/bin/time -f "%U %S" -o "$run.time" "$build/bin/tether-launch" --config tests/data/bibtex_fixed.pbtxt \
        --workers 1 --servers 1 --threads 1 --transport "${t%-off}" --epochs "$epochs" --progress_every_s=0 \
        --pipeline="$on" \
        --metrics_out "$run.json" > "$run.log" 2>&1 || { echo "scripts/bench_tcp.sh: $t failed, see $run.log" >&2; exit 1; }
      cut -d' ' -f1 /proc/loadavg >> "$run.load"
    done
  done
done

python3 - "$out" "$repeats" "$(nproc)" $variants <<'EOF'
import json, statistics, sys
out, repeats, cores, variants = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
med = statistics.median
rows, loads = {}, []
for t in variants:
    runs = []
    for r in range(1, repeats + 1):
        m = json.load(open(f"{out}/{t}-e7-r{r}.json"))
        m1 = json.load(open(f"{out}/{t}-e1-r{r}.json"))
        user, sys_ = (float(v) for v in open(f"{out}/{t}-e7-r{r}.time").read().split()[-2:])
        user1, sys1 = (float(v) for v in open(f"{out}/{t}-e1-r{r}.time").read().split()[-2:])
        for e in (7, 1):
            loads += [float(v) for v in open(f"{out}/{t}-e{e}-r{r}.load").read().split()]
        srv = m["servers"][0]
        per_sample = (user + sys_ - user1 - sys1) / (m["total_samples"] - m1["total_samples"])
        runs.append(dict(sps=m["samples_per_second"], train=m["train_seconds"], user=user, sys=sys_,
                         cpu=user + sys_, us=1e6 * per_sample, bound=cores / per_sample,
                         mb=(srv["bytes_in"] + srv["bytes_out"]) / 1e6, wait=m["workers"][0]["wait_fraction"],
                         tau=srv["staleness_mean"], tau_max=srv["staleness_max"],
                         p1=m["precision_at_1"], loss=m["final_loss"]))
    rows[t] = {k: med([x[k] for x in runs]) for k in runs[0] if k not in ("p1", "loss")}
    rows[t]["p1"] = sorted({x["p1"] for x in runs})
    rows[t]["loss"] = sorted({x["loss"] for x in runs})
print(f"## Bibtex, 1 worker + 1 server: tcp against one process, median of {repeats} alternated run(s), "
      f"{cores} core(s), load average {min(loads):.1f}-{max(loads):.1f}\n")
print("| transport | samples/s | train s | CPU s, whole job (user + sys) | of it sys | training CPU µs per sample | CPU bound, samples/s | MB through the shard | worker waiting | push τ mean (max) | P@1 | final loss |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
labels = {"inproc": "one process (inproc)", "tcp": "two processes (tcp)"}
for t in variants:
    label = labels[t.split("-")[0]] + (", pipeline off" if t.endswith("-off") else ", pipeline on")
    x = rows[t]
    print(f"| {label} | {x['sps']:.0f} | {x['train']:.2f} | {x['cpu']:.2f} | {x['sys']:.2f} | {x['us']:.0f} | {x['bound']:.0f} | "
          f"{x['mb']:.0f} | {100 * x['wait']:.0f}% | {x['tau']:.2f} ({x['tau_max']:.0f}) | {', '.join(f'{v:.5f}' for v in x['p1'])} | "
          f"{', '.join(f'{v:.6f}' for v in x['loss'])} |")
print()
for suffix in ("-off", ""):
    if "inproc" + suffix not in rows: continue
    i, t = rows["inproc" + suffix], rows["tcp" + suffix]
    print(f"pipeline {'off' if suffix else 'on'}: tcp ÷ one process: samples/s ×{t['sps'] / i['sps']:.2f} (goal ≥ 0.8); "
          f"training CPU per sample ×{t['us'] / i['us']:.2f}; tcp's CPU bound ÷ one-process samples/s ×{t['bound'] / i['sps']:.2f}")
if "tcp" in rows and "tcp-off" in rows:
    print(f"pipeline on ÷ off: tcp samples/s ×{rows['tcp']['sps'] / rows['tcp-off']['sps']:.2f}, "
          f"one process ×{rows['inproc']['sps'] / rows['inproc-off']['sps']:.2f}; tcp on ÷ one process off "
          f"×{rows['tcp']['sps'] / rows['inproc-off']['sps']:.2f}")
same = len({(tuple(x["p1"]), tuple(x["loss"])) for x in rows.values()}) == 1 and all(len(x["p1"]) == 1 for x in rows.values())
print(f"P@1 and final loss identical across transports, pipeline settings and runs: {'yes' if same else 'NO'}")
EOF
