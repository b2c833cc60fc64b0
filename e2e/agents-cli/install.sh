#!/usr/bin/env bash
# Installs the agent CLIs pinned in packages.tsv into a cache outside the repository, idempotently:
# npm packages with `npm install --prefix`, PyPI ones in a venv each. Every installed binary gets a
# link in one bin folder, whose path is the only line printed on stdout; progress goes to stderr.
#
#   AOCTL_AGENT_CLIS        the cache (default: $XDG_CACHE_HOME/aoctl-agent-clis, else /tmp/…)
#   AOCTL_AGENTS_TIMEOUT    seconds one package may take to install (default 600)
#   AOCTL_AGENTS_JOBS       installs run at once (default 4)
#   AOCTL_AGENTS_PYTHON     the Python for PyPI rows that need a newer one than python3
#
# The cache also holds status.tsv: one line per agent, `agent ok|skipped|failed reason`. A row
# whose requirement this machine lacks (a newer Python) is skipped, not failed; the script exits 1
# only when an install that could run failed.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${AOCTL_AGENT_CLIS:-${XDG_CACHE_HOME:-/tmp}/aoctl-agent-clis}
timeout_s=${AOCTL_AGENTS_TIMEOUT:-600}
jobs=${AOCTL_AGENTS_JOBS:-4}
mkdir -p "$cache/pkgs" "$cache/bin" "$cache/logs"
exec 9>"$cache/.lock"
flock -w "$((timeout_s * 3))" 9 || { echo "install.sh: $cache is locked by another install" >&2; exit 1; }

log() { echo "agents-cli: $*" >&2; }

# The first Python at least $1 (like 3.12), or nothing.
python_for() {
  local want=$1 py
  # A pyenv's versions count too: its shims answer only for the selected one.
  for py in ${AOCTL_AGENTS_PYTHON:-} python3.14 python3.13 python3.12 \
    "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python3 python3; do
    command -v "$py" >/dev/null 2>&1 || continue
    if "$py" -c "import sys; sys.exit(sys.version_info[:2] < tuple(map(int, '$want'.split('.'))))" 2>/dev/null; then
      command -v "$py"
      return
    fi
  done
}

# Installs one row into $cache/pkgs/<agent>-<version>; writes `<agent> <status> <reason>` to its
# status file. Runs in the background.
install_one() {
  local agent=$1 registry=$2 package=$3 version=$4 binary=$5 python=$6
  local dir="$cache/pkgs/$agent-$version" out="$cache/logs/$agent.log" status="$cache/pkgs/.$agent.status"
  local target
  if [ "$registry" = npm ]; then target="$dir/node_modules/.bin/$binary"; else target="$dir/venv/bin/$binary"; fi
  if [ -e "$dir/.ok" ] && [ -x "$target" ]; then
    echo "$agent	ok	cached" >"$status"
    ln -sfn "$target" "$cache/bin/$binary"
    return
  fi
  # A half-done install (no .ok) is started again from scratch; a venv records its own path in
  # its scripts, so each is built where it lives.
  rm -rf "$dir"
  mkdir -p "$dir"
  local start=$SECONDS rc
  case $registry in
    npm)
      timeout "$timeout_s" npm install --prefix "$dir" --no-audit --no-fund --no-save --loglevel=error \
        "$package@$version" >"$out" 2>&1
      rc=$?
      ;;
    pypi)
      local py
      py=$(python_for "$python")
      if [ -z "$py" ]; then
        rm -rf "$dir"
        echo "$agent	skipped	needs Python >= $python (set AOCTL_AGENTS_PYTHON)" >"$status"
        log "$agent: skipped, needs Python >= $python"
        return
      fi
      { timeout "$timeout_s" "$py" -m venv "$dir/venv" &&
        timeout "$timeout_s" "$dir/venv/bin/pip" install --disable-pip-version-check -q "$package==$version"; } \
        >"$out" 2>&1
      rc=$?
      ;;
  esac
  if [ $rc -eq 0 ] && [ -x "$target" ]; then
    touch "$dir/.ok"
    ln -sfn "$target" "$cache/bin/$binary"
    echo "$agent	ok	installed in $((SECONDS - start)) s" >"$status"
    log "$agent: $package@$version installed in $((SECONDS - start)) s"
  else
    rm -rf "$dir"
    local why
    why=$(grep -m1 -iE 'error|requires|not found' "$out" | cut -c1-160)
    echo "$agent	failed	$package@$version: ${why:-exit $rc, see $out}" >"$status"
    log "$agent: $package@$version failed (exit $rc): ${why:-see $out}"
  fi
}

rows=()
while IFS=$'\t' read -r agent registry package version binary python; do
  case $agent in '' | '#'*) continue ;; esac
  rows+=("$agent|$registry|$package|$version|$binary|${python:--}")
done <"$here/packages.tsv"

start=$SECONDS
rm -f "$cache"/pkgs/.*.status
# Node.js first: the npm CLIs then install and run with it.
for row in "${rows[@]}"; do
  IFS='|' read -r agent registry package version binary python <<<"$row"
  [ "$agent" = node ] && install_one "$agent" "$registry" "$package" "$version" "$binary" "$python"
done
export PATH="$cache/bin:$PATH"
for row in "${rows[@]}"; do
  IFS='|' read -r agent registry package version binary python <<<"$row"
  [ "$agent" = node ] && continue
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  install_one "$agent" "$registry" "$package" "$version" "$binary" "$python" &
done
wait
cat "$cache"/pkgs/.*.status >"$cache/status.tsv"
log "done in $((SECONDS - start)) s: $(grep -c '	ok	' "$cache/status.tsv") ok, $(grep -c '	skipped	' "$cache/status.tsv") skipped, $(grep -c '	failed	' "$cache/status.tsv") failed"
echo "$cache/bin"
! grep -q '	failed	' "$cache/status.tsv"
