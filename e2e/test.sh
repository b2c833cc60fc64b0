#!/usr/bin/env bash
# `make test` on any machine, a fresh one included: installs what the tests need and is missing
# (with apt-get, as root or through password-less sudo), checks formatting and lints, starts a
# Docker engine unless one already answers (and stops it again at the end), builds the local test
# images, runs the GitHub stand-in's own tests, then every Rust test of the workspace, then the
# Windows build and its tests under Wine (e2e/windows/test.sh). The agent
# CLIs and the stand-in's npm packages are installed by the tests that use them, into caches
# outside the checkout; so is the browser bridge's pinned playwright-core (e2e/browser/), which is
# installed here first, into the same cache.
#
# A test that finds something it needs missing (the remote-engine address, the desktop notifier's
# programs, the right to mount the full-disk tests' tmpfs) fails here instead of skipping: this
# exports AOCTL_TEST_STRICT=1 (e2e/support/strict.rs) unless it is set already.
#
#   e2e/test.sh            everything above
#   CARGO=cargo e2e/test.sh
#   AOCTL_TEST_STRICT=0 e2e/test.sh   such tests skip, saying so on stderr
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
export AOCTL_TEST_STRICT=${AOCTL_TEST_STRICT:-1}

say() { echo "test.sh: $*" >&2; }

# Runs apt-get as root, or through sudo when it needs no password; fails naming what is missing.
apt_install() {
  local runner=()
  if [ "$(id -u)" != 0 ]; then
    if sudo -n true 2>/dev/null; then
      runner=(sudo -n)
    else
      say "missing: $*; install them (apt-get install $*) or run as root"
      return 1
    fi
  fi
  say "installing $*"
  "${runner[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${runner[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

need=()
for tool in git tmux make python3 openssl; do command -v "$tool" >/dev/null || need+=("$tool"); done
python3 -m venv --help >/dev/null 2>&1 || need+=(python3-venv)
command -v promtool >/dev/null || need+=(prometheus)
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
# The desktop notifier's test: notify-send, a notification server on a virtual display, D-Bus.
command -v notify-send >/dev/null || need+=(libnotify-bin)
command -v dunst >/dev/null || need+=(dunst)
command -v Xvfb >/dev/null || need+=(xvfb)
command -v dbus-daemon >/dev/null || need+=(dbus-daemon)
command -v dbus-monitor >/dev/null || need+=(dbus-bin)
# The etcd store's tests start etcd clusters of their own.
command -v etcd >/dev/null || need+=(etcd-server)
# The dashboard's browser tests drive Debian's Chromium at this path.
[ -x /usr/bin/chromium ] || need+=(chromium)
# The Windows build links with mingw-w64, and its tests run under Wine (e2e/windows/test.sh).
command -v x86_64-w64-mingw32-gcc >/dev/null || need+=(gcc-mingw-w64-x86-64)
command -v wine >/dev/null || need+=(wine64)
if [ ${#need[@]} -gt 0 ]; then
  apt_install "${need[@]}"
fi
if command -v rustup >/dev/null; then
  rustup component add rustfmt clippy >/dev/null 2>&1 || true
fi

# The tests commit into scratch repositories: without an identity of the user's, they get one of
# their own for this run, as a global configuration that includes the user's (which is not
# touched); a repository's own identity still wins, as it would over the user's.
scratch=$(mktemp -d)
cleanup() { rm -rf "$scratch"; }
trap cleanup EXIT
if ! git -C / config user.email >/dev/null; then
  global=${GIT_CONFIG_GLOBAL:-$HOME/.gitconfig}
  {
    [ -f "$global" ] && printf '[include]\n\tpath = %s\n' "$global"
    printf '[user]\n\tname = aoctl tests\n\temail = tests@aoctl.invalid\n'
  } >"$scratch/gitconfig"
  export GIT_CONFIG_GLOBAL=$scratch/gitconfig
fi

make lint CARGO="$CARGO"

# A Docker engine for the docker runtime's tests: the machine's own when one answers, else one
# started here (root only) and stopped when the tests end.
if docker version >/dev/null 2>&1; then
  say "using the Docker engine that answers"
elif [ "$(id -u)" = 0 ]; then
  log=${TMPDIR:-/tmp}/aoctl-test-dockerd.log
  e2e/docker/dockerd.sh start "$log"
  cleanup() { e2e/docker/dockerd.sh stop || true; rm -rf "$scratch"; }
else
  say "no Docker engine answers and one can be started only as root: the docker tests will fail"
fi
if docker version >/dev/null 2>&1; then
  e2e/docker/build-image.sh
  e2e/docker/build-image.sh --git
  # The engine over tcp with mutual TLS (dockerd.sh's own engine has it), for the remote-engine test.
  eval "$(e2e/docker/dockerd.sh tls-env 2>/dev/null)"
fi

# The full-disk tests mount a tmpfs of their own, which takes root (or CAP_SYS_ADMIN).
if [ "$(id -u)" != 0 ] && [ "$AOCTL_TEST_STRICT" != 0 ]; then
  say "not root: the full-disk tests cannot mount their tmpfs and will fail (AOCTL_TEST_STRICT=0 skips them)"
fi

# The dashboard's tests drive Chromium through playwright-core, pinned in e2e/browser/package.json
# and installed into the tests' cache of npm packages.
e2e/browser/install.sh >/dev/null

# The Helm chart: linted and rendered for each values case, validated, and its arguments run by
# the real aoctl serve (charts/check/check.sh; helm and kubernetes-validate go into the cache).
CARGO="$CARGO" timeout 1800 charts/check/check.sh

# The stand-ins' own tests: GitHub's, GitLab's, Linear's and the model's (their packages first when missing or
# older than the lock file).
for standin in e2e/github-standin e2e/gitlab-standin e2e/linear-standin; do
  if [ ! -d "$standin/node_modules" ] || [ "$standin/package-lock.json" -nt "$standin/node_modules" ]; then
    (cd "$standin" && npm ci --no-audit --no-fund --loglevel=error && touch node_modules)
  fi
  (cd "$standin" && timeout 300 npm test --silent)
done
# The model stand-in's (standard library only).
timeout 300 python3 e2e/model-standin/test_standin.py

"$CARGO" test --workspace --all-targets --no-fail-fast

# The Windows build, and its tests under Wine.
CARGO="$CARGO" e2e/windows/test.sh
