#!/usr/bin/env bash
# `make demo`: a scratch repository, `aoctl serve` on a scratch data dir, the example manifests.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
aoctl="$root/target/debug/aoctl"
export AOCTL_DATA_DIR="$root/.scratch/demo/data"
export AOCTL_SERVER=http://127.0.0.1:7421

repo="$root/.scratch/demo/demo"
if [ ! -d "$repo/.git" ]; then
  mkdir -p "$repo"
  git -C "$repo" init -q -b main
  echo "# demo" >"$repo/README.md"
  git -C "$repo" add README.md
  git -C "$repo" -c user.name=demo -c user.email=demo@aoctl.invalid commit -q -m "Initial commit"
fi
# The scripted agent the example sessions run lives in the repository, so every worktree has it.
if ! cmp -s e2e/agents/demo-agent "$repo/scripts/agent.sh"; then
  mkdir -p "$repo/scripts"
  cp e2e/agents/demo-agent "$repo/scripts/agent.sh"
  git -C "$repo" add scripts/agent.sh
  git -C "$repo" -c user.name=demo -c user.email=demo@aoctl.invalid commit -q -m "Add the scripted demo agent"
fi

# `aoctl up` starts the server in the background (pid and log in the data dir) and applies a
# Project for the repository; the examples then add to it.
# The examples name /tmp/aoctl-demo/demo; this checkout's copy points at its own scratch repository,
# so two checkouts (or a stale one) never share the demo's branches.
examples="$root/.scratch/demo/examples"
rm -rf "$examples"
cp -R manifests/examples "$examples"
sed -i "s|path: /tmp/aoctl-demo/demo|path: $repo|" "$examples/project.yaml"
# The source examples need a repository of manifests and a GitHub tracker the demo has not got
# (docs/gitops.md shows them at work).
rm -f "$examples/gitsource.yaml" "$examples/issuesource.yaml"
"$aoctl" up "$repo"
"$aoctl" apply -f "$examples/project.yaml" --wait=30s
"$aoctl" apply -f "$examples/" --wait=60s
echo
"$aoctl" get projects,sessions -o wide
echo
for s in fix-login add-healthcheck update-docs; do
  echo "--- aoctl logs $s"
  "$aoctl" logs "$s" --tail 5
done
echo
echo "--- the sessions' branches"
git -C "$repo" log --oneline --branches='demo/*' | head -n 6
echo
echo "The server keeps running: try '$aoctl describe project demo' with"
echo "  AOCTL_SERVER=$AOCTL_SERVER AOCTL_DATA_DIR=$AOCTL_DATA_DIR"
echo "Stop it with 'make demo-stop'."
echo
echo "Supervise the sessions from the web dashboard: open the link below (it works once, for a"
echo "minute; '$aoctl dashboard' with the variables above prints a new one)."
"$aoctl" dashboard | tail -n 1
