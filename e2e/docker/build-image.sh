#!/usr/bin/env bash
# Builds the local test images for the docker runtime (no registry needed): a static busybox with
# its applets, /etc/passwd with root and a uid 1000 user, and /tmp, imported as a one-layer image.
# With --git, the image also has the host's `git` at /bin/git, with the shared libraries `ldd`
# lists and the dynamic loader, so an agent can commit inside its sandboxed checkout (the
# builtins `commit`, `add`, `config`, `status`, `update-ref` … live in the git binary itself).
#
#   build-image.sh [--git] [NAME:TAG]   default aoctl-agent:busybox, or aoctl-agent:git with --git;
#                                       does nothing when the image exists.
set -euo pipefail

WITH_GIT=
if [ "${1:-}" = --git ]; then
  WITH_GIT=1
  shift
fi
IMAGE=${1:-$([ -n "$WITH_GIT" ] && echo aoctl-agent:git || echo aoctl-agent:busybox)}

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  exit 0
fi
BUSYBOX=/bin/busybox
if ! "$BUSYBOX" --list >/dev/null 2>&1 || ! { LC_ALL=C ldd "$BUSYBOX" 2>&1 || true; } | grep -qE 'not a dynamic|statically linked'; then
  echo "build-image.sh: $BUSYBOX is not a static busybox; install busybox-static" >&2
  exit 1
fi

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/bin" "$root/etc" "$root/tmp" "$root/workspace"
chmod 1777 "$root/tmp"
cp "$BUSYBOX" "$root/bin/busybox"
for applet in $("$root/bin/busybox" --list); do
  [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
done
cat >"$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
agent:x:1000:1000:agent:/tmp:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PASSWD
cat >"$root/etc/group" <<'GROUP'
root:x:0:
agent:x:1000:
nogroup:x:65534:
GROUP

if [ -n "$WITH_GIT" ]; then
  GIT=$(command -v git) || { echo "build-image.sh: no git on this machine" >&2; exit 1; }
  GIT=$(readlink -f "$GIT")
  rm -f "$root/bin/git"
  cp "$GIT" "$root/bin/git"
  # Every library the binary loads, and the loader, at the paths the binary asks for.
  for lib in $(LC_ALL=C ldd "$GIT" | grep -oE '/[^ ]+' | sort -u); do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
  # The exec path holds only the transport helpers a local `git push` / `fetch` runs, as links to
  # git (which picks the builtin by its name), and the templates are empty: no sample hooks.
  mkdir -p "$root/usr/libexec/git-core" "$root/usr/share/git-core/templates"
  for helper in git-receive-pack git-upload-pack git-upload-archive; do
    ln -s /bin/git "$root/usr/libexec/git-core/$helper"
  done
  ENV_GIT=(-c 'ENV GIT_EXEC_PATH=/usr/libexec/git-core' -c 'ENV GIT_TEMPLATE_DIR=/usr/share/git-core/templates')
else
  ENV_GIT=()
fi

tar -C "$root" --numeric-owner --owner=0 --group=0 -c . |
  docker import -c 'ENV PATH=/bin' "${ENV_GIT[@]}" -c 'CMD ["/bin/sh"]' - "$IMAGE" >/dev/null
echo "build-image.sh: built $IMAGE"
