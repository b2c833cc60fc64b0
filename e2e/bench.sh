#!/usr/bin/env bash
# `make bench`: runs every benchmark against the release binary and prints one JSON line each.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release/aoctl
echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GB, $(uname -sr)"
echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
echo "spawn: $(python3 e2e/bench/spawn.py "$bin")"
echo "spawn one (Django): $(python3 e2e/bench/spawn_one.py "$bin")"
if docker version >/dev/null 2>&1; then echo "docker spawn: $(python3 e2e/bench/docker_spawn.py "$bin")"; else echo "docker spawn: skipped (no Docker engine answers \`docker version\`; start one with e2e/docker/dockerd.sh start)"; fi
echo "idle: $(python3 e2e/bench/idle.py "$bin")"
echo "fleet and get sessions: $(python3 e2e/bench/get_list.py "$bin")"
echo "engine: $(python3 e2e/bench/engine.py "$bin")"
echo "watch fan-out: $(python3 e2e/bench/watch_fanout.py "$bin")"
echo "gitsource: $(python3 e2e/bench/gitsource.py "$bin")"
echo "forge budget: $(python3 e2e/bench/forge_budget.py "$bin")"
echo "events: $(python3 e2e/bench/events.py "$bin")"
echo "orchestrator: $(python3 e2e/bench/orchestrator.py "$bin")"
if command -v etcd >/dev/null; then echo "store backends: $(python3 e2e/bench/store_backends.py "$bin")"; else echo "store backends: skipped (no \`etcd\`; make test installs etcd-server)"; fi
# The dashboard in headless Chromium (Debian's, through the pinned playwright-core): three lines.
if [ -x /usr/bin/chromium ] && core=$(e2e/browser/install.sh); then
  AOCTL_PLAYWRIGHT_CORE=$core python3 e2e/bench/dashboard.py "$bin" | sed 's/^/dashboard: /'
else
  echo "dashboard: skipped (no /usr/bin/chromium or no playwright-core; make test installs both)"
fi
