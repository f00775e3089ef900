#!/usr/bin/env bash
# 16-bit wire encodings end to end: Bibtex, one server and one worker over
# tcp (tether-launch, fixed seed, 3 epochs: P@1 near 0.59), with
# --wire=fp32, bf16 and fp16 (error feedback on) and bf16 without error
# feedback. Every table's values frames,
# pushed and pulled, take exactly half of fp32's bytes for the same job (one
# worker: the same requests in the same order), the keys frames the same
# bytes; the ratios in the metrics JSON say so; P@1 stays within 0.02 of
# fp32's. Then a9a under SGD at rate 200000 (BSP, one worker: the same
# pulls each run), whose weights outgrow FP16: the values the shard
# saturated in its replies are counted (wire_saturated_received, exactly
# 7986; its gradients fit, so none sent), and none with --wire=fp32.
# Usage: wire_test.sh BIN_DIR   (run from the repository root)
source "$(dirname "$0")/lib.sh"
tether_test_init wire "$1"

run() {  # NAME FLAGS...
  local name=$1
  shift
  timeout -k 5 300 "$bin/tether-launch" --config tests/data/bibtex_fixed.pbtxt --servers 1 --workers 1 --transport tcp \
    --seed=7 --epochs=3 --metrics_out "$tmp/$name.json" "$@" >"$tmp/$name.log" 2>&1 || { tail -20 "$tmp/$name.log"; exit 1; }
}
run fp32 --wire=fp32
run bf16 --wire=bf16
run fp16 --wire=fp16
run bf16_nofeedback --wire=bf16 --error_feedback=false

python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
m = {n: json.load(open(f"{tmp}/{n}.json")) for n in ("fp32", "bf16", "fp16", "bf16_nofeedback")}
failed = False
def expect(what, ok):
    global failed
    print(("ok   " if ok else "FAIL ") + what)
    failed |= not ok
full = m["fp32"]["workers"][0]["wire"]
for name in ("bf16", "fp16"):
    half = m[name]["workers"][0]["wire"]
    expect(f"{name}: the same tables", sorted(half) == sorted(full))
    for t in sorted(full):
        f, h = full[t], half[t]
        expect(f"{name} {t}: wire {h['pull_wire']}/{h['push_wire']}", h["pull_wire"] == name and h["push_wire"] == name)
        # Sent: the same pushes and pulls in the same order, byte for byte.
        fv, hv = f["sent_value_bytes"], h["sent_value_bytes"]
        expect(f"{name} {t} sent: value bytes {hv} = fp32's {fv} / 2", fv > 0 and 2 * hv == fv)
        expect(f"{name} {t} sent: keys bytes as fp32's", h["sent_bytes"] - hv == f["sent_bytes"] - fv)
        want = f["sent_bytes"] / h["sent_bytes"]
        expect(f"{name} {t} sent: ratio {h['sent_ratio']:.4f} = fp32's bytes / these {want:.4f}",
               abs(h["sent_ratio"] - want) < 1e-9)
        # Received: which reads the cache serves depends on when replies
        # arrive (the example's bound is SSP 2), so the rows differ a little
        # from run to run; every value still takes 2 bytes.
        rv, rf = h["received_value_bytes"], h["received_fp32_value_bytes"]
        expect(f"{name} {t} received: value bytes {rv} = their fp32 size {rf} / 2", rv > 0 and 2 * rv == rf)
        expect(f"{name} {t} received: fp32 size {rf} within 1% of fp32's {f['received_value_bytes']}",
               abs(rf - f["received_value_bytes"]) <= 0.01 * f["received_value_bytes"])
        want = (h["received_bytes"] + rf - rv) / h["received_bytes"]
        expect(f"{name} {t} received: ratio {h['received_ratio']:.4f} = {want:.4f}",
               abs(h["received_ratio"] - want) < 1e-9 and h["received_ratio"] > 1.9)
        expect(f"fp32 {t}: ratio 1", f["sent_ratio"] == 1.0 and f["received_ratio"] == 1.0)
    expect(f"{name}: worker bytes_sent below fp32's", m[name]["workers"][0]["bytes_sent"] < m["fp32"]["workers"][0]["bytes_sent"])
p1 = {n: m[n]["precision_at_1"] for n in m}
print("P@1:", p1)
for name in ("bf16", "fp16", "bf16_nofeedback"):
    expect(f"{name}: P@1 {p1[name]:.4f} within 0.02 of fp32's {p1['fp32']:.4f}", abs(p1[name] - p1["fp32"]) <= 0.02)
expect("bf16 with feedback keeps residuals", m["bf16"]["workers"][0]["residual_rows"] > 0)
expect("bf16 without feedback keeps none", m["bf16_nofeedback"]["workers"][0]["residual_rows"] == 0)
sys.exit(1 if failed else 0)
PY

saturate() {  # NAME WIRE
  timeout -k 5 120 "$bin/tether-launch" --config examples/a9a.pbtxt --servers 1 --workers 1 --staleness=0 \
    --optimizer=sgd --learning_rate=200000 --fail_on_divergence=false --epochs=1 --wire="$2" \
    --metrics_out "$tmp/$1.json" >"$tmp/$1.log" 2>&1 || { tail -20 "$tmp/$1.log"; exit 1; }
}
saturate sat_fp16 fp16
saturate sat_fp32 fp32
python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
failed = False
for name, want in (("sat_fp16", (7986, 0, 7986)), ("sat_fp32", (0, 0, 0))):
    w = json.load(open(f"{tmp}/{name}.json"))["workers"][0]
    got = (w["wire_saturated_received"], w["wire_saturated_sent"], w["wire_saturated"])
    ok = got == want
    print(("ok   " if ok else "FAIL ") + f"{name}: saturated received, sent, total {got} (want {want})")
    failed |= not ok
sys.exit(1 if failed else 0)
PY
