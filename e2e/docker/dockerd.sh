#!/usr/bin/env bash
# Starts or stops a Docker engine for the docker runtime's tests on a machine without systemd.
#
#   dockerd.sh start [LOG]   installs docker.io and busybox-static if missing, starts dockerd in the
#                            background (log in LOG, default /tmp/dockerd.log; pid in $PID_FILE) and
#                            waits up to 30 s for `docker version` to answer; nothing to do when an
#                            engine already answers.
#   dockerd.sh stop          stops the dockerd this script started (by the pid in $PID_FILE).
set -euo pipefail

PID_FILE=${AOCTL_DOCKERD_PID_FILE:-/tmp/aoctl-dockerd.pid}

start() {
  local log=${1:-/tmp/dockerd.log}
  if docker version >/dev/null 2>&1; then
    echo "dockerd.sh: an engine already answers"
    return 0
  fi
  local need=()
  command -v dockerd >/dev/null || need+=(docker.io)
  [ -x /bin/busybox ] || need+=(busybox-static)
  if [ ${#need[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
  fi
  dockerd --exec-opt native.cgroupdriver=cgroupfs >"$log" 2>&1 &
  echo $! >"$PID_FILE"
  for _ in $(seq 1 300); do
    if docker version >/dev/null 2>&1; then
      echo "dockerd.sh: engine up (pid $(cat "$PID_FILE"), log $log)"
      return 0
    fi
    if ! kill -0 "$(cat "$PID_FILE")" 2>/dev/null; then
      echo "dockerd.sh: dockerd exited; the end of $log:" >&2
      tail -n 20 "$log" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "dockerd.sh: the engine did not answer within 30 s; see $log" >&2
  return 1
}

stop() {
  [ -f "$PID_FILE" ] || return 0
  local pid
  pid=$(cat "$PID_FILE")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 150); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
  fi
  rm -f "$PID_FILE"
}

case "${1:-}" in
  start) start "${2:-}" ;;
  stop) stop ;;
  *)
    echo "usage: $0 start [LOG] | stop" >&2
    exit 2
    ;;
esac
