#!/usr/bin/env bash
# Installs the Debian packages the benchmarks need beyond scripts/setup.sh:
# PyTorch for the training baseline (scripts/torch_xmc.py); matplotlib for
# the plots comes with scripts/setup.sh (listed here too for setups that
# only ran this one). Opt-in and kept out of CI: python3-torch pulls in
# about 200 packages. Run as root (or with sudo); safe to run twice.
# Both are used through /usr/bin/python3 (Debian's interpreter).
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then exec sudo -E "$0" "$@"; fi
  echo "scripts/setup_bench.sh: run as root (apt-get needs it)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
packages=(
  python3-torch        # training baseline (PyTorch on CPU)
  python3-matplotlib   # tools/plot_metrics.py (also in scripts/setup.sh)
  time                 # /usr/bin/time -v: peak memory of a whole job
)
missing=()
for p in "${packages[@]}"; do
  grep -q "install ok installed" <<< "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "scripts/setup_bench.sh: installing ${missing[*]}"
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "scripts/setup_bench.sh: all packages present"
fi
