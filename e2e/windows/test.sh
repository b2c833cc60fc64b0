#!/usr/bin/env bash
# The Windows part of `make test`: adds the Windows target when missing, builds aoctl for
# x86_64-pc-windows-gnu with warnings as errors, runs the process runtime's tests as a Windows test
# binary under Wine on a real ConPTY (wine.sh covers Wine 8.0's gaps), then the end-to-end run
# (e2e.sh). mingw-w64 and Wine come from Debian (gcc-mingw-w64-x86-64, wine64; e2e/test.sh
# installs them).
set -euo pipefail
cd "$(dirname "$0")/../.."
CARGO=${CARGO:-cargo}
target=x86_64-pc-windows-gnu
wine_dir=$PWD/target/wine

say() { echo "windows: $*" >&2; }

if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx "$target"; then
  say "adding the $target target"
  rustup target add "$target" >/dev/null
fi
# Only the Windows builds get the flag, so the Linux builds' artifacts stay as they are.
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUSTFLAGS="-D warnings"

say "building aoctl for Windows"
timeout 2400 "$CARGO" build --quiet --target "$target" -p aoctl
timeout 1200 "$CARGO" test --quiet --target "$target" -p aoctl-runtimes --lib --no-run

cleanup() { e2e/windows/wine.sh stop "$wine_dir"; }
trap cleanup EXIT
eval "$(e2e/windows/wine.sh prefix "$wine_dir")"
say "the process runtime's tests under Wine"
timeout 600 "$CARGO" test --target "$target" -p aoctl-runtimes --lib -- process:: test_agents
say "the end-to-end run under Wine"
CARGO="$CARGO" AOCTL_WINE_DIR="$wine_dir" timeout 600 e2e/windows/e2e.sh
