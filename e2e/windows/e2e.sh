#!/usr/bin/env bash
# End-to-end run of the Windows build under Wine: `aoctl up` starts the background server (no
# fork: a detached process), a Session without a runtime gets the process runtime on a ConPTY in
# a git worktree, its first prompt and an `aoctl send` arrive at a cmd.exe batch agent, deleting
# the session ends its processes and removes the worktree, and `aoctl down` stops the server
# through its stop event. Every step is bounded; the first failure ends the run with its reason.
#
# Usage: e2e/windows/e2e.sh (CARGO, CARGO_TARGET_DIR and AOCTL_WINE_DIR may be set; the last
# defaults to target/wine).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
cargo=${CARGO:-cargo}
wine_dir=${AOCTL_WINE_DIR:-$root/target/wine}
target=x86_64-pc-windows-gnu

"$cargo" build --quiet --target "$target" -p aoctl
exe=${CARGO_TARGET_DIR:-$root/target}/$target/debug/aoctl.exe
eval "$(e2e/windows/wine.sh prefix "$wine_dir")"

mkdir -p "$wine_dir"
work=$(mktemp -d "$wine_dir/e2e.XXXXXX")
# The Windows path of a Unix path: Wine's Z: drive is the Unix root.
win() {
    local path=${1//\//\\}
    printf 'Z:%s' "$path"
}
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export AOCTL_SERVER=http://127.0.0.1:$port
export AOCTL_DATA_DIR=$(win "$work/data")
log=$work/data/serve.log

fail() {
    echo "windows e2e: FAILED: $*" >&2
    echo "--- aoctl describe session first:" >&2
    timeout 60 wine "$exe" describe session first >&2 || true
    if [[ -f $log ]]; then
        echo "--- the server's log, last lines:" >&2
        tail -n 30 "$log" >&2
    fi
    exit 1
}

cleanup() {
    local rc=$?
    timeout 30 wine "$exe" down >/dev/null 2>&1 || true
    e2e/windows/wine.sh stop "$wine_dir"
    if [[ $rc -eq 0 ]]; then
        rm -rf "$work"
    else
        echo "windows e2e: its files are kept in $work" >&2
    fi
}
trap cleanup EXIT

aoctl() {
    timeout 60 wine "$exe" "$@"
}

# until SECONDS WHAT COMMAND...: runs COMMAND every quarter second until it succeeds.
until_ok() {
    local limit=$1 what=$2
    shift 2
    local deadline=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        ((SECONDS < deadline)) || fail "$what, after ${limit}s"
        sleep 0.25
    done
}

# A field of the session's status, from `aoctl get session first -o json`.
status_of() {
    aoctl get session first -o json | python3 -c "import json, sys; s = json.load(sys.stdin)['status']; print(eval(sys.argv[1]))" "$1"
}

# The repository, with a README the worktree must have.
repo=$work/repo
git init -q -b main "$repo"
echo "# windows" >"$repo/README.md"
git -C "$repo" add README.md
git -C "$repo" -c user.name=t -c user.email=t@aoctl.invalid commit -q -m "Initial commit"

# The agent: a cmd.exe batch file that appends every line typed into it to a file.
got=$work/got.txt
printf '%s\r\n' '@echo off' 'echo ready' ':loop' 'set "line="' 'set /p "line=> "' \
    'if not defined line goto loop' '>> "%~1" echo got: %line%' 'echo got: %line%' 'goto loop' >"$work/agent.bat"
cat >"$work/session.yaml" <<EOF
apiVersion: ao.dev/v1alpha1
kind: Session
metadata: {name: first}
spec:
  project: repo
  prompt: Write the Windows notes
  agent:
    command: ['$AOCTL_TEST_CONSOLE', 'cmd.exe', '/c', '$(win "$work/agent.bat")', '$(win "$got")']
EOF

echo "windows e2e: aoctl up"
# Into a file, not a pipe: under Wine the background server holds every Unix file of the process
# that started it, so a pipe would stay open until the server ends.
aoctl up "$(win "$repo")" >"$work/up.txt" 2>&1 || fail "aoctl up: $(cat "$work/up.txt")"
up=$(cat "$work/up.txt")
grep -q "server started (pid" <<<"$up" || fail "aoctl up started no server: $up"
grep -q "project/repo created" <<<"$up" || fail "aoctl up made no project: $up"
[[ -s $work/data/serve.pid ]] || fail "aoctl up wrote no pid file"

echo "windows e2e: a session on the process runtime"
aoctl apply -f "$(win "$work/session.yaml")" >/dev/null || fail "aoctl apply"
until_ok 90 "the first prompt did not reach the agent" grep -q "got: Write the Windows notes" "$got"
ready() {
    [[ $(status_of 'next((c["status"] for c in s["conditions"] if c["type"] == "Ready"), None)') == True ]]
}
until_ok 60 "the session did not become Ready" ready
kind=$(status_of 's["runtime"]["kind"]')
[[ $kind == process ]] || fail "the session's runtime is $kind, not the Windows default process"
worktree=$(status_of 's["workspace"]["path"]')
unix_worktree=$(sed -e 's|^Z:||' -e 's|\\|/|g' <<<"$worktree")
[[ -f $unix_worktree/README.md ]] || fail "the worktree $worktree has no README.md"
# Read as a file: Linux git cannot read the repository once a Windows program added a worktree to
# it (the worktree's gitdir is a `Z:\…` path).
[[ -s $repo/.git/refs/heads/repo/first ]] || fail "the session's branch repo/first does not exist"
# The agent's processes, by their command line (the work folder's name is unique to this run).
agent_processes="$(basename "$work").agent.bat"
pgrep -f "$agent_processes" >/dev/null || fail "no agent process runs"

echo "windows e2e: aoctl send"
aoctl send first "hello from send" >/dev/null || fail "aoctl send"
until_ok 30 "the sent message did not reach the agent" grep -q "got: hello from send" "$got"
[[ $(grep -c "got: Write the Windows notes" "$got") -eq 1 ]] || fail "the first prompt arrived more than once: $(cat "$got")"

echo "windows e2e: delete"
aoctl delete session first >/dev/null || fail "aoctl delete session first"
gone() {
    ! aoctl get session first
}
agent_ended() {
    ! pgrep -f "$agent_processes"
}
until_ok 60 "the deleted session is still there" gone
until_ok 30 "the agent's processes outlived the session" agent_ended
[[ ! -e $unix_worktree ]] || fail "the worktree $worktree is still there"

echo "windows e2e: aoctl down"
aoctl down >/dev/null || fail "aoctl down"
server_ended() {
    ! pgrep -f "aoctl.exe serve --listen 127.0.0.1:$port "
}
until_ok 30 "the server process is still running" server_ended
grep -q "shutting down" "$log" || fail "the server did not shut down by its stop event (no 'shutting down' in its log)"
[[ ! -e $work/data/serve.pid ]] || fail "the pid file is still there"
echo "windows e2e: passed"
