#!/usr/bin/env bash
# 16-bit wire encodings on Bibtex (tests/data/bibtex_fixed.pbtxt), 1 worker + 1
# server: --wire=fp32, bf16 and fp16 (error feedback on) and bf16 without
# error feedback over loopback tcp, and fp32 and bf16 in one process
# (--transport inproc: no kernel copies, so what bf16 changes there is the
# conversions' cost alone). Runs alternate, round by round. Prints a
# Markdown table of medians: samples/s, the bytes the worker sent and
# received, the values' compression ratio, P@1 and the final loss.
#
#   scripts/bench_wire.sh [--build DIR] [--out DIR] [--rounds N]
#
# Needs a build (scripts/build.sh). The per-run logs and metrics JSON stay
# in OUT (default BUILD/bench-wire).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
out=""
rounds=5
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    *) echo "scripts/bench_wire.sh: unknown argument $1 (--build, --out, --rounds)" >&2; exit 2 ;;
  esac
done
out="${out:-$build/bench-wire}"
[ -x "$build/bin/tether-launch" ] || { echo "scripts/bench_wire.sh: $build/bin/tether-launch missing: build first" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out"
variants="tcp:fp32 tcp:bf16 tcp:fp16 tcp:bf16-noef inproc:fp32 inproc:bf16"

for r in $(seq 1 "$rounds"); do
  echo "scripts/bench_wire.sh: round $r/$rounds" >&2
  for v in $variants; do
    transport=${v%%:*}
    wire=${v#*:}
    feedback=true
    [ "${wire%-noef}" != "$wire" ] && feedback=false
    run="$out/${v/:/-}-r$r"
    cut -d' ' -f1 /proc/loadavg > "$run.load"
    timeout -k 5 300 "$build/bin/tether-launch" --config tests/data/bibtex_fixed.pbtxt --workers 1 --servers 1 --threads 1 \
      --transport "$transport" --wire="${wire%-noef}" --error_feedback="$feedback" --progress_every_s=0 \
      --metrics_out "$run.json" > "$run.log" 2>&1 || { echo "scripts/bench_wire.sh: $v failed, see $run.log" >&2; exit 1; }
    cut -d' ' -f1 /proc/loadavg >> "$run.load"
  done
done

python3 - "$out" "$rounds" $variants <<'PY'
import json, statistics, sys
out, rounds, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
med = statistics.median
loads, rows = [], {}
for v in variants:
    runs = []
    for r in range(1, rounds + 1):
        base = f"{out}/{v.replace(':', '-')}-r{r}"
        m = json.load(open(base + ".json"))
        loads += [float(x) for x in open(base + ".load").read().split()]
        w = m["workers"][0]
        fp32 = sum(t["sent_bytes"] - t["sent_value_bytes"] + t["sent_fp32_value_bytes"] +
                   t["received_bytes"] - t["received_value_bytes"] + t["received_fp32_value_bytes"]
                   for t in w["wire"].values())
        wire = sum(t["sent_bytes"] + t["received_bytes"] for t in w["wire"].values())
        runs.append(dict(sps=m["samples_per_second"], mb=(w["bytes_sent"] + w["bytes_received"]) / 1e6,
                         ratio=fp32 / wire, p1=m["precision_at_1"], loss=m["final_loss"]))
    rows[v] = {k: med([x[k] for x in runs]) for k in runs[0]}
    rows[v]["p1_all"] = sorted(x["p1"] for x in runs)
print(f"## Bibtex, 1 worker + 1 server: wire encodings, median of {rounds} alternated round(s), "
      f"load average {min(loads):.1f}-{max(loads):.1f}\n")
print("| transport | wire | error feedback | samples/s | MB on the wire (worker, both ways) | float32 bytes ÷ bytes | P@1 (median; every run) | final loss |")
print("|---|---|---|---:|---:|---:|---|---:|")
for v in variants:
    t, w = v.split(":")
    x = rows[v]
    ef = "—" if w == "fp32" else ("off" if w.endswith("-noef") else "on")
    print(f"| {t} | {w.replace('-noef', '')} | {ef} | {x['sps']:.0f} | {x['mb']:.1f} | {x['ratio']:.3f} | "
          f"{x['p1']:.4f} ({', '.join(f'{p:.4f}' for p in x['p1_all'])}) | {x['loss']:.6f} |")
print()
f, b = rows["tcp:fp32"], rows["tcp:bf16"]
print(f"tcp: bf16 ÷ fp32 samples/s ×{b['sps'] / f['sps']:.2f}; P@1 bf16 − fp32 {b['p1'] - f['p1']:+.4f}; "
      f"without error feedback {rows['tcp:bf16-noef']['p1'] - f['p1']:+.4f}")
fi, bi = rows["inproc:fp32"], rows["inproc:bf16"]
print(f"one process: bf16 ÷ fp32 samples/s ×{bi['sps'] / fi['sps']:.2f} (the conversions' cost, no kernel copies)")
# Per sample: 1/sps. The part of tcp's time per sample that halving the
# bytes removed, beside the part the conversions added in one process.
saved = 1 / f["sps"] - 1 / b["sps"]
added = 1 / bi["sps"] - 1 / fi["sps"]
print(f"tcp time per sample: fp32 {1e6 / f['sps']:.1f} µs, bf16 {1e6 / b['sps']:.1f} µs; halving the values' bytes "
      f"saved {1e6 * saved:.1f} µs net, {1e6 * (saved + added):.1f} µs before the conversions' {1e6 * added:.1f} µs: "
      f"{100 * 2 * (saved + added) * f['sps']:.0f}% of fp32's tcp time per sample scales with the values' bytes")
PY
