#!/usr/bin/env bash
# Results pinned bit for bit (tests/data/golden/README.md): the metrics JSON
# of one-worker BSP jobs through tether-launch equals, on every key but
# times, rates, memory peaks and byte counts, the one recorded in
# tests/data/golden/. A change that moves code must leave them equal.
#   bibtex, a9a, pendigits  the example's job as pinned (a frozen copy of the
#                           example config, tests/data/golden/NAME.pbtxt),
#                           --workers=1 --staleness=0
#   bibtex_resume           Bibtex checkpointed at clock 100 on 2 servers,
#                           resumed from there on 3 servers
#   fixture                 a checkpoint and a safetensors model committed
#                           as files (tests/data/golden/bibtex_h16/): the
#                           checkpoint resumes to the pinned metrics, the
#                           model scores the test split to the pinned
#                           metrics and predictions
# Usage: golden_test.sh bibtex|a9a|pendigits|bibtex_resume|fixture BIN_DIR
source "$(dirname "$0")/lib.sh"
tether_test_init "$1" "$2"
golden=tests/data/golden
compare() { python3 tests/integration/golden_compare.py "$@" || fail "results differ from $1"; }
# OpenBLAS picks its matrix-product kernels for the CPU it runs on, and the
# AVX-512 ones sum in another order than the AVX2 ones: the jobs whose
# layers are wide enough to reach them (Bibtex, pendigits) have one pinned
# result per kernel family, NAME.json (AVX-512) and NAME.avx2.json. The
# family is the one OpenBLAS chose (openblas_get_corename), not the CPU's
# flags: an OpenBLAS older than the CPU runs its AVX2 kernels on a CPU with
# AVX-512 (Debian 12's 0.3.21 names AMD Zen 5 "Haswell").
openblas_core=$(python3 -c 'import ctypes; l = ctypes.CDLL("libopenblas.so.0")
l.openblas_get_corename.restype = ctypes.c_char_p; print(l.openblas_get_corename().decode())' 2> /dev/null)
case "${openblas_core,,}" in
  skylakex | cooperlake | sapphirerapids | zen4 | zen5) avx512_kernels=1 ;;
  "") grep -qw avx512f /proc/cpuinfo 2> /dev/null && avx512_kernels=1 || avx512_kernels=0 ;;
  *) avx512_kernels=0 ;;
esac
echo "OpenBLAS kernels: ${openblas_core:-unknown}; pinned results for $([ $avx512_kernels = 1 ] && echo AVX-512 || echo AVX2)"
pinned() {  # NAME: the pinned file for these kernels
  if [ "$avx512_kernels" = 1 ] || [ ! -f "$golden/$1.avx2.json" ]; then
    echo "$golden/$1.json"
  else
    echo "$golden/$1.avx2.json"
  fi
}
launch() {
  local log=$1
  shift
  timeout -k 5 300 "$bin/tether-launch" --workers=1 --staleness=0 "$@" > "$tmp/$log.log" 2>&1 \
    || fail "tether-launch $* exited $? (log $tmp/$log.log)"
}

case $mode in
  bibtex | a9a | pendigits)
    launch run --config="$golden/$mode.pbtxt" --metrics_out="$tmp/m.json"
    compare "$(pinned "$mode")" "$tmp/m.json"
    ;;
  bibtex_resume)
    launch first --config="$golden/bibtex.pbtxt" --checkpoint_dir="$tmp/ck" --checkpoint_every_clocks=100 \
      --checkpoint_keep_last=10
    test -f "$tmp/ck/ckpt-000000000100/MANIFEST" || fail "no checkpoint at clock 100"
    launch resumed --config="$golden/bibtex.pbtxt" --servers=3 --resume_from="$tmp/ck/ckpt-000000000100" \
      --metrics_out="$tmp/m.json"
    compare "$(pinned bibtex_resume_3_servers)" "$tmp/m.json"
    ;;
  fixture)
    # A copy: a resume must never depend on writing into its checkpoint.
    cp -r "$golden/bibtex_h16/ckpt-000000000100" "$tmp/"
    launch resumed --config="$golden/bibtex.pbtxt" --hidden=16 --resume_from="$tmp/ckpt-000000000100" \
      --metrics_out="$tmp/m.json"
    compare "$(pinned fixture_resume)" "$tmp/m.json"
    timeout -k 5 120 "$bin/tether-predict" --model="$golden/bibtex_h16/bibtex_h16.safetensors" \
      --input=data/bibtex/Bibtex_data.txt.gz --format=xmc --index_base=0 --split=data/bibtex/bibtex_tstSplit.txt \
      --top_k=5 --output="$tmp/preds.tsv" --metrics_out="$tmp/predict.json" > "$tmp/predict.log" 2>&1 \
      || fail "tether-predict exited $?"
    compare "$golden/fixture_predict.json" "$tmp/predict.json"
    sum=$(sha256sum < "$tmp/preds.tsv" | cut -d' ' -f1)
    # The scores' last digits follow the kernel family, as above.
    want=da809eb2a5512a466ff8dbc8827743a5203e448d5c72e288e74c95c3ffacf30f  # AVX-512
    [ "$(pinned fixture_resume)" = "$golden/fixture_resume.json" ] ||
      want=ae921619fa0f6a3ba88ca79ee7478dfa390bb04a166dd43ffae3e7278b54bab1  # AVX2
    [ "$sum" = "$want" ] \
      || fail "predictions differ from the pinned ones (sha256 $sum)"
    ;;
  *) fail "unknown mode $mode" ;;
esac
echo "PASS: golden $mode"
