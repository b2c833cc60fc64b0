#!/usr/bin/env bash
# `make bench`: runs every benchmark against the release binary and prints one JSON line each.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release/aoctl
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GB, $(uname -sr)"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
echo "spawn: $(python3 e2e/bench/spawn.py "$bin")"
