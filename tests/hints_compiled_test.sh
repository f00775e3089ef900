#!/usr/bin/env bash
# The server's row and slot hints survive the compiler (core/prefetch.h).
#
# GCC's mod/ref analysis once deleted every call to a helper whose only work
# was __builtin_prefetch, silently: the tests stayed green and pushes of
# scattered rows ran 1.5x slower. This test disassembles the server library
# and the optimizers' library and requires prefetch instructions in each
# function that hints rows or slots ahead.
# Usage: hints_compiled_test.sh LIBTETHER_SERVER.a LIBTETHER_OPTIM.a
set -euo pipefail
lib=${1:?usage: $0 libtether_server.a libtether_optim.a}
optim=${2:?usage: $0 libtether_server.a libtether_optim.a}
if ! command -v objdump >/dev/null; then
  echo "SKIP: objdump (binutils) is not installed; cannot inspect the compiled hints"
  exit 0
fi
case "$(uname -m)" in
  x86_64) ;;
  *) echo "SKIP: the check reads x86-64 prefetch instructions; this is $(uname -m)"; exit 0 ;;
esac
dis=$(mktemp)
trap 'rm -f "$dis"' EXIT
objdump -d -C --no-show-raw-insn "$lib" "$optim" >"$dis"
# Prefetch instructions per function, named by the demangled symbol.
counts=$(awk '/^[0-9a-f]+ <.*>:$/ { f = $0; next } /prefetch/ { n[f]++ } END { for (k in n) print n[k] "\t" k }' "$dis")
failed=0
for fn in 'tether::ServerTable::RowIndex::Prefetch(' 'tether::ServerTable::StepRowsAt(' 'tether::ServerTable::PullRowsAt(' \
          'GatheredKernel'; do
  got=$(printf '%s\n' "$counts" | awk -F'\t' -v fn="$fn" 'index($2, fn) { s += $1 } END { print s + 0 }')
  if [ "$got" -lt 1 ]; then
    echo "FAIL: no prefetch instruction in $fn in $lib $optim: its hints were compiled away (see core/prefetch.h)"
    failed=1
  else
    echo "ok: $got prefetch instruction(s) in $fn"
  fi
done
exit $failed
