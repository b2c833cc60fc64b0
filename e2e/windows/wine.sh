#!/usr/bin/env bash
# Wine test environment for the Windows build: `wine.sh prefix DIR` builds the shims, the console launcher and the test agent, makes a Wine prefix and prints `export` lines; `wine.sh stop DIR` stops its wineserver.
#
# Wine 8.0 needs three gaps covered before portable-pty's ConPTY works in it:
#   - bcryptprimitives.dll (ProcessPrng), which Rust 1.78+ binaries import, does not exist;
#   - its conhost rejects PSEUDOCONSOLE_INHERIT_CURSOR, which portable-pty always passes, and
#     ResizePseudoConsole is a stub: a conpty.dll in system32 (portable-pty prefers one when
#     LoadLibrary finds it) clears the flag and resizes from a process attached to the console;
#   - a pseudoconsole child started with STARTF_USESTDHANDLES and invalid handles gets no standard
#     handles at all: console.exe gives the real program CONIN$/CONOUT$ instead.
#
# Usage: eval "$(e2e/windows/wine.sh prefix target/wine)"; ...; e2e/windows/wine.sh stop target/wine
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cc=x86_64-w64-mingw32-gcc
cflags=(-O2 -Wall -Wextra -s)

usage() {
    echo "usage: $0 prefix DIR | stop DIR" >&2
    exit 2
}

# build OUTPUT SOURCE [EXTRA FLAGS...]: compiles when OUTPUT is missing or older than SOURCE.
build() {
    local output=$1 source=$2
    shift 2
    if [[ ! -e $output || $source -nt $output ]]; then
        echo "building $(basename "$output")" >&2
        "$cc" "${cflags[@]}" -o "$output.tmp" "$source" "$@"
        mv "$output.tmp" "$output"
    fi
}

# The Windows path Wine gives a Unix path: its Z: drive is the Unix root.
windows_path() {
    local path=${1//\//\\}
    printf 'Z:%s' "$path"
}

# Single-quoted for the shell that evaluates the export lines.
quote() {
    printf "'%s'" "${1//\'/\'\\\'\'}"
}

prefix() {
    local dir=$1
    mkdir -p "$dir/bin"
    dir=$(cd "$dir" && pwd)
    local bin=$dir/bin wineprefix=$dir/prefix

    command -v "$cc" >/dev/null || { echo "$cc is missing (Debian: gcc-mingw-w64-x86-64)" >&2; exit 1; }
    command -v wine >/dev/null || { echo "wine is missing (Debian: wine64)" >&2; exit 1; }

    build "$bin/bcryptprimitives.dll" "$here/shims/bcryptprimitives.c" -shared -ladvapi32
    build "$bin/conpty.dll" "$here/shims/conpty.c" -shared
    build "$bin/console.exe" "$here/shims/console.c" -municode
    build "$bin/agent.exe" "$here/agent.c" -municode

    if [[ ! -e $wineprefix/.initialised ]]; then
        echo "making the Wine prefix $wineprefix" >&2
        # No Mono or Gecko: nothing here needs them, and their installers want a display.
        WINEDEBUG=-all WINEPREFIX=$wineprefix WINEDLLOVERRIDES='mscoree=;mshtml=' \
            timeout 180 wine wineboot -i >&2
        touch "$wineprefix/.initialised"
    fi
    local system32=$wineprefix/drive_c/windows/system32
    for dll in bcryptprimitives.dll conpty.dll; do
        cmp -s "$bin/$dll" "$system32/$dll" || cp "$bin/$dll" "$system32/$dll"
    done

    echo "export WINEPREFIX=$(quote "$wineprefix")"
    echo "export WINEDEBUG=-all"
    echo "export AOCTL_TEST_AGENT=$(quote "$(windows_path "$bin/agent.exe")")"
    echo "export AOCTL_TEST_CONSOLE=$(quote "$(windows_path "$bin/console.exe")")"
    echo "export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=wine"
}

stop() {
    local dir=$1
    [[ -d $dir/prefix ]] || return 0
    dir=$(cd "$dir" && pwd)
    WINEPREFIX=$dir/prefix timeout 30 wineserver -k 2>/dev/null || true
}

[[ $# -eq 2 ]] || usage
case $1 in
prefix) prefix "$2" ;;
stop) stop "$2" ;;
*) usage ;;
esac
