#!/usr/bin/env bash
# Starts or stops a Docker engine for the docker runtime's tests on a machine without systemd.
#
#   dockerd.sh start [LOG]   installs docker.io and busybox-static if missing, starts dockerd in the
#                            background (log in LOG, default /tmp/dockerd.log; pid in $PID_FILE) and
#                            waits up to 30 s for `docker version` to answer; nothing to do when an
#                            engine already answers.
#   dockerd.sh stop          stops the dockerd this script started (by the pid in $PID_FILE).
#   dockerd.sh tls-env       prints the `export` line for the remote-engine test (below) when the
#                            TLS listener answers.
#   dockerd.sh engine-start DIR
#                            starts one more engine (root only) with everything of its own in DIR:
#                            the socket DIR/docker.sock, --data-root, --exec-root, --pidfile, the
#                            log DIR/dockerd.log, a containerd namespace and a network bridge of its
#                            own (an engine started with no bridge deletes the machine's docker0,
#                            which the first engine's containers use) and no iptables, so it leaves
#                            the machine's network alone. Waits up to 30 s
#                            for it to answer, then builds the test image aoctl-agent:busybox on it.
#                            DIR may hold an engine stopped before: it starts again with its data.
#   dockerd.sh engine-stop DIR
#                            stops that engine (SIGTERM, SIGKILL after 15 s) and its containerd, and
#                            deletes its bridge.
#
# The engine it starts also listens on tcp://127.0.0.1:$TLS_PORT with mutual TLS, from a throwaway
# CA made at each start; the client's ca.pem, cert.pem and key.pem go to $TLS_DIR, so the remote-
# engine test can reach it as another host would:
#   AOCTL_TEST_DOCKER_HOST=tcp://127.0.0.1:2376 DOCKER_CERT_PATH=$TLS_DIR cargo test ...
set -euo pipefail

PID_FILE=${AOCTL_DOCKERD_PID_FILE:-/tmp/aoctl-dockerd.pid}
TLS_DIR=${AOCTL_DOCKER_TLS_DIR:-/tmp/aoctl-docker-tls}
TLS_PORT=${AOCTL_DOCKER_TLS_PORT:-2376}

# A CA, a server certificate for 127.0.0.1 and a client certificate, all valid for two days.
make_certs() {
  local d=$TLS_DIR
  rm -rf "$d"
  mkdir -p "$d"
  chmod 700 "$d"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=aoctl test CA" \
    -keyout "$d/ca-key.pem" -out "$d/ca.pem" 2>/dev/null
  local who usage
  for who in server client; do
    usage=$([ "$who" = server ] && echo serverAuth || echo clientAuth)
    openssl req -newkey rsa:2048 -nodes -subj "/CN=aoctl test $who" \
      -keyout "$d/$who-key.pem" -out "$d/$who.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=%s\n' "$usage" >"$d/$who.ext"
    openssl x509 -req -in "$d/$who.csr" -CA "$d/ca.pem" -CAkey "$d/ca-key.pem" -CAcreateserial -days 2 \
      -extfile "$d/$who.ext" -out "$d/$who-cert.pem" 2>/dev/null
  done
  # The names the docker client and bollard look for in DOCKER_CERT_PATH.
  cp "$d/client-cert.pem" "$d/cert.pem"
  cp "$d/client-key.pem" "$d/key.pem"
}

start() {
  local log=${1:-/tmp/dockerd.log}
  if docker version >/dev/null 2>&1; then
    echo "dockerd.sh: an engine already answers"
    return 0
  fi
  local need=()
  command -v dockerd >/dev/null || need+=(docker.io)
  [ -x /bin/busybox ] || need+=(busybox-static)
  command -v openssl >/dev/null || need+=(openssl)
  if [ ${#need[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
  fi
  make_certs
  dockerd --exec-opt native.cgroupdriver=cgroupfs -H unix:///var/run/docker.sock \
    -H "tcp://127.0.0.1:$TLS_PORT" --tlsverify --tlscacert "$TLS_DIR/ca.pem" \
    --tlscert "$TLS_DIR/server-cert.pem" --tlskey "$TLS_DIR/server-key.pem" >"$log" 2>&1 &
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

# Sends SIGTERM to the process $1 and waits up to 15 s for it to exit.
term_wait() {
  kill "$1"
  for _ in $(seq 1 150); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.1
  done
}

stop() {
  [ -f "$PID_FILE" ] || return 0
  local pid
  pid=$(cat "$PID_FILE")
  if kill -0 "$pid" 2>/dev/null; then
    term_wait "$pid"
  fi
  rm -f "$PID_FILE"
}

# Prints the environment that points the remote-engine test at the TLS listener, when it answers.
tls_env() {
  if docker --tlsverify -H "tcp://127.0.0.1:$TLS_PORT" --tlscacert "$TLS_DIR/ca.pem" \
    --tlscert "$TLS_DIR/cert.pem" --tlskey "$TLS_DIR/key.pem" version >/dev/null 2>&1; then
    echo "export AOCTL_TEST_DOCKER_HOST=tcp://127.0.0.1:$TLS_PORT DOCKER_CERT_PATH=$TLS_DIR"
  else
    echo "dockerd.sh: no engine answers with TLS on tcp://127.0.0.1:$TLS_PORT" >&2
  fi
}

# The bridge of the engine in $1: a name of at most 15 characters from the folder's hash.
engine_bridge() {
  echo "aob$(printf '%s' "$1" | sha256sum | cut -c1-10)"
}

# Starts an engine of its own in $1 (see the top of this file).
engine_start() {
  local dir=${1:?engine-start needs a folder}
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  local ns hash br
  hash=$(printf '%s' "$dir" | sha256sum)
  ns=aoctl-${hash:0:12}
  br=$(engine_bridge "$dir")
  if ! ip link show "$br" >/dev/null 2>&1; then
    ip link add name "$br" type bridge
    ip addr add "10.231.$((16#${hash:12:2})).1/24" dev "$br"
    ip link set "$br" up
  fi
  dockerd --exec-opt native.cgroupdriver=cgroupfs -H "unix://$dir/docker.sock" \
    --data-root "$dir/data" --exec-root "$dir/exec" --pidfile "$dir/docker.pid" \
    --bridge "$br" --iptables=false --ip6tables=false \
    --containerd-namespace "$ns" --containerd-plugins-namespace "$ns-plugins" >>"$dir/dockerd.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 300); do
    if docker -H "unix://$dir/docker.sock" version >/dev/null 2>&1; then
      DOCKER_HOST="unix://$dir/docker.sock" "$(dirname "$0")/build-image.sh"
      echo "dockerd.sh: engine up at unix://$dir/docker.sock (pid $pid)"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "dockerd.sh: dockerd exited; the end of $dir/dockerd.log:" >&2
      tail -n 20 "$dir/dockerd.log" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "dockerd.sh: the engine in $dir did not answer within 30 s; see $dir/dockerd.log" >&2
  kill "$pid" 2>/dev/null || true
  return 1
}

# Stops the engine of $1, and the containerd it started when that outlives it.
engine_stop() {
  local dir=${1:?engine-stop needs a folder}
  local pid containerd
  pid=$(cat "$dir/docker.pid" 2>/dev/null) || return 0
  containerd=$(cat "$dir/exec/containerd/containerd.pid" 2>/dev/null || true)
  if kill -0 "$pid" 2>/dev/null; then
    term_wait "$pid"
    kill -9 "$pid" 2>/dev/null || true
  fi
  if [ -n "$containerd" ] && kill -0 "$containerd" 2>/dev/null; then
    kill "$containerd" 2>/dev/null || true
    sleep 1
    kill -9 "$containerd" 2>/dev/null || true
  fi
  rm -f "$dir/docker.pid"
  ip link del "$(engine_bridge "$(cd "$dir" && pwd)")" 2>/dev/null || true
}

case "${1:-}" in
  start) start "${2:-}" ;;
  stop) stop ;;
  tls-env) tls_env ;;
  engine-start) engine_start "${2:-}" ;;
  engine-stop) engine_stop "${2:-}" ;;
  *)
    echo "usage: $0 start [LOG] | stop | tls-env | engine-start DIR | engine-stop DIR" >&2
    exit 2
    ;;
esac
