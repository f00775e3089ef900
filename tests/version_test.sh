#!/usr/bin/env bash
# --version of every binary names the commit the tree was last built at:
# after a rebuild at a new commit it names that commit, never the one the
# build folder was configured at. Skipped (exit 77, with a line saying why)
# when the source is not a git checkout or git is missing.
# Usage: version_test.sh BIN_DIR (run from the source tree)
set -euo pipefail
bin=$1
if ! command -v git > /dev/null || ! head=$(git rev-parse --short=12 HEAD 2> /dev/null); then
  echo "SKIP: the source is not a git checkout (or git is missing): no commit to compare --version with"
  exit 77
fi
checked=0
for b in tether-server tether-worker tether-launch tether-rendezvous tether-predict tether-export; do
  [ -x "$bin/$b" ] || { echo "FAIL: $bin/$b is missing"; exit 1; }
  out=$(timeout 10 "$bin/$b" --version 2>&1) || { echo "FAIL: $b --version exited non-zero: $out"; exit 1; }
  case "$out" in
    *"(commit $head,"* | *"(commit $head+dirty,"*) ;;
    *) echo "FAIL: $b --version says '$out'; HEAD is $head"; exit 1 ;;
  esac
  checked=$((checked + 1))
done
echo "PASS: $checked binaries name commit $head"
