#!/usr/bin/env bash
# Installs every Debian 12 package Tether needs to build, test and run.
# Run as root (or with sudo). Safe to run twice: apt-get skips what is there.
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then exec sudo -E "$0" "$@"; fi
  echo "scripts/setup.sh: run as root (apt-get needs it)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
packages=(
  build-essential cmake pkg-config ca-certificates
  libzmq3-dev cppzmq-dev                 # transport
  libprotobuf-dev protobuf-compiler      # wire header, job config
  libgoogle-glog-dev libgflags-dev       # logging, flags
  libgtest-dev libgmock-dev              # tests
  libopenblas-dev                        # dense products on the CPU backend
  zlib1g-dev                             # gzip input
  libxxhash-dev                          # checkpoint checksums (XXH3-64)
  nlohmann-json3-dev                     # metrics JSON, safetensors headers
  libzip-dev                             # NumPy .npz model files (tether-export --format npz)
  libmicrohttpd-dev                      # /metrics endpoints for Prometheus (telemetry/metrics_endpoint.h)
  python3                                # test scripts read the metrics JSON
  python3-numpy                          # the npz model-file test scores a model with numpy
  python3-matplotlib                     # plots of tools/plot_metrics.py, staleness_sweep.py, straggler_study.py
  procps                                 # pgrep/ps in the launcher tests
  graphviz                               # docs/layers.svg from LAYERS (tools/layering.py dot | dot -Tsvg)
  clang libclang-rt-14-dev               # libFuzzer + sanitizers (scripts/fuzz.sh)
)
missing=()
for p in "${packages[@]}"; do
  grep -q "install ok installed" <<< "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "scripts/setup.sh: installing ${missing[*]}"
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "scripts/setup.sh: all packages present"
fi
if [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "scripts/setup.sh: CUDA toolkit found at /usr/local/cuda: the CUDA backend will be built"
else
  echo "scripts/setup.sh: no CUDA toolkit: building the CPU backend only"
fi
