#!/usr/bin/env bash
# Installs h2gate's dependencies, builds h2gate (Release) and runs it.
#
#   deploy/quickstart.sh [h2gate flags...]
#
# Without flags h2gate runs its built-in default config: proxy listener on
# 127.0.0.1:3128, admin/metrics on 127.0.0.1:9901, direct mode (no upstream proxy).
# Any arguments are passed to h2gate, e.g. `deploy/quickstart.sh --help`.
set -euo pipefail

cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.."

deploy/install-deps.sh
# A unity build (CMakeLists.txt, H2GATE_UNITY): a first build of h2gate takes
# about two fifths less CPU that way.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DH2GATE_TESTS=OFF -DH2GATE_UNITY=ON
cmake --build build --target h2gate
exec build/h2gate "$@"
