#!/usr/bin/env bash
# `make demo`: a scratch repository, `aoctl serve` on a scratch data dir, the example manifests.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
aoctl="$root/target/debug/aoctl"
export AOCTL_DATA_DIR="$root/.scratch/demo/data"
export AOCTL_SERVER=http://127.0.0.1:7421

repo=/tmp/aoctl-demo/demo
if [ ! -d "$repo/.git" ]; then
  mkdir -p "$repo"
  git -C "$repo" init -q -b main
  echo "# demo" >"$repo/README.md"
  git -C "$repo" add README.md
  git -C "$repo" -c user.name=demo -c user.email=demo@aoctl.invalid commit -q -m "Initial commit"
fi

# `aoctl up` starts the server in the background (pid and log in the data dir) and applies a
# Project for the repository; the examples then add to it.
"$aoctl" up "$repo"
"$aoctl" apply -f manifests/examples/project.yaml --wait=30s
"$aoctl" apply -f manifests/examples/
echo
"$aoctl" get projects,sessions -o wide
echo
echo "The server keeps running: try '$aoctl describe project demo' with"
echo "  AOCTL_SERVER=$AOCTL_SERVER AOCTL_DATA_DIR=$AOCTL_DATA_DIR"
echo "Stop it with 'make demo-stop'."
