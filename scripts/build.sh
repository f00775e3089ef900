#!/usr/bin/env bash
# Configures and builds Tether into build/ (Release). Extra arguments go to
# the CMake configure step, e.g. -DTETHER_WITH_CUDA=OFF or -DTETHER_SANITIZE=ON.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build -j"$jobs"
