#!/usr/bin/env bash
# Installs the playwright-core that package.json beside this script pins, with npm, into the cache
# of npm packages the end-to-end tests use (outside the checkout; e2e/tests/model_agents.rs looks
# there too), once. Prints the package's folder, which driver.mjs takes as AOCTL_PLAYWRIGHT_CORE;
# progress goes to stderr.
#
#   AOCTL_E2E_CLI_CACHE   the cache (default: $XDG_CACHE_HOME/aoctl-e2e-clis, else ~/.cache/…)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${AOCTL_E2E_CLI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aoctl-e2e-clis}
version=$(node -p "require(process.argv[1]).dependencies['playwright-core']" "$here/package.json")
prefix=$cache/playwright-core-$version
mkdir -p "$cache"
exec 9>"$cache/.playwright-core.lock"
flock -w 900 9 || { echo "browser: $cache is locked by another install" >&2; exit 1; }
if [ ! -e "$prefix/node_modules/.bin/playwright-core" ]; then
  echo "browser: installing playwright-core $version into $prefix" >&2
  rm -rf "$prefix"
  mkdir -p "$prefix"
  # The package downloads no browser (Debian's chromium is used); the variable says so anyway.
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 timeout 600 npm install --prefix "$prefix" --no-audit --no-fund \
    --loglevel=error "playwright-core@$version" >&2
fi
echo "$prefix/node_modules/playwright-core"
