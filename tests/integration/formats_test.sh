#!/usr/bin/env bash
# Bibtex in three formats trains to the same model:
# MULAN's bibtex.arff (with its label XML), and that file converted to
# multi-label LIBSVM by `tether-data convert`, each train with one worker
# exactly like the XMC file: every figure of the metrics JSON is compared as
# text, so P@1 is equal bit for bit. Also: convert's output reads back with
# `tether-data check`/`stats`, and a failed convert leaves no output file.
# Usage: formats_test.sh BIN_DIR   (run from the repository root)
source "$(dirname "$0")/lib.sh"
tether_test_init formats "$1"
root=$PWD

# The ARFF file converted to multi-label LIBSVM (1-based features).
timeout 120 "$bin/tether-data" convert --in=data/bibtex/bibtex.arff.gz --label_xml=data/bibtex/bibtex.xml \
  --to=libsvm --out="$tmp/bibtex.svm" 2>/dev/null || fail "convert to LIBSVM"
[ "$(wc -l < "$tmp/bibtex.svm")" = 7395 ] || fail "LIBSVM output has $(wc -l < "$tmp/bibtex.svm") lines, expected 7395"
# ... and back to XMC: byte for byte the bundled XMC file.
timeout 120 "$bin/tether-data" convert --in="$tmp/bibtex.svm" --format=libsvm --index_base=1 --num_features=1836 \
  --num_labels=159 --to=xmc --out="$tmp/bibtex.xmc" 2>/dev/null || fail "convert LIBSVM to XMC"
cmp <(zcat data/bibtex/Bibtex_data.txt.gz) "$tmp/bibtex.xmc" || fail "ARFF -> LIBSVM -> XMC differs from Bibtex_data.txt"
out=$(timeout 60 "$bin/tether-data" stats data/bibtex/bibtex.arff.gz --label_xml=data/bibtex/bibtex.xml 2>/dev/null)
grep -qx "nnz_per_row: min 1 mean 68.6607 max 271" <<<"$out" || fail "stats: $out"
grep -qx "label_frequency (rows per label, nearest-rank quantiles): q0 51 q0.25 61 q0.5 82 q0.75 130 q0.9 204 q0.99 522 q1 1042" <<<"$out" || fail "stats: $out"
# A failed convert leaves nothing: single-label a9a cannot become ARFF.
rc=0; out=$(timeout 60 "$bin/tether-data" convert --in=data/a9a/a9a.gz --format=libsvm --index_base=1 \
  --to=arff --out="$tmp/a9a.arff" 2>&1 | grep -v '^[IWE][0-9]\{8\} ') || rc=$?
[ "$out" = "tether-data: $tmp/a9a.arff: the input is single-label (one number per row); ARFF (MULAN, multi-label) holds label sets: convert it to LIBSVM, or give multi-label input" ] ||
  fail "a9a to ARFF: $out"
[ -z "$(ls "$tmp" | grep a9a || true)" ] || fail "a failed convert left files: $(ls "$tmp")"

# The same job on the three files: one worker, fixed seed, one epoch (every
# row read, trained and scored once).
# examples/bibtex_arff.pbtxt leaves the widths at 0: they come from the ARFF
# header and the label XML.
sed -e "s#\"\.\./data/bibtex/#\"$root/data/bibtex/#" examples/bibtex_arff.pbtxt > "$tmp/arff.pbtxt"
sed -e "s#^  format: XMC#  format: LIBSVM#" -e "s#index_base: 0 .*#index_base: 1#" \
    -e "s#train_file: .*#train_file: \"$tmp/bibtex.svm\"#" -e "s#test_file: .*#test_file: \"$tmp/bibtex.svm\"#" \
    -e "s#\"\.\./data/bibtex/#\"$root/data/bibtex/#" examples/bibtex.pbtxt > "$tmp/libsvm.pbtxt"
sed -e "s#\"\.\./data/bibtex/#\"$root/data/bibtex/#" examples/bibtex.pbtxt > "$tmp/xmc.pbtxt"
for f in xmc arff libsvm; do
  timeout -k 5 300 "$bin/tether-launch" --config "$tmp/$f.pbtxt" --servers 2 --workers 1 --transport inproc \
    --epochs=1 --seed=7 --metrics_out "$tmp/$f.json" > "$tmp/$f.log" 2>&1 || fail "$f job"
done
for k in precision_at_1 precision_at_3 precision_at_5 ndcg_at_3 ndcg_at_5 final_loss total_samples; do
  a=$(metric "$tmp/xmc.json" $k); b=$(metric "$tmp/arff.json" $k); c=$(metric "$tmp/libsvm.json" $k)
  echo "$k: xmc $a arff $b libsvm $c"
  [ "$a" = "$b" ] && [ "$a" = "$c" ] || fail "$k differs between the formats"
done
[ "$(metric "$tmp/arff.json" total_samples)" = 4880 ] || fail "expected 4880 samples (one epoch)"
echo "PASS"
