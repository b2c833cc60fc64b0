#!/usr/bin/env bash
# Builds the local test image for the docker runtime (no registry needed): a static busybox with
# its applets, /etc/passwd with root and a uid 1000 user, and /tmp, imported as a one-layer image.
#
#   build-image.sh [NAME:TAG]    default aoctl-agent:busybox; does nothing when the image exists.
set -euo pipefail

IMAGE=${1:-aoctl-agent:busybox}

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
tar -C "$root" --numeric-owner --owner=0 --group=0 -c . |
  docker import -c 'ENV PATH=/bin' -c 'CMD ["/bin/sh"]' - "$IMAGE" >/dev/null
echo "build-image.sh: built $IMAGE"
