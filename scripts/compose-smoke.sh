#!/usr/bin/env bash
# Runs docker-compose.yml for real with Debian's podman (no Docker engine needed), as root:
#   1. makes a stand-in for the node:22-bookworm-slim base image (image registries may be unreachable):
#      Debian bookworm from debootstrap, Node 22 from the npm registry (scripts/ensure-node.sh), npm, and the
#      system CA bundle (so npm inside the build trusts what the host trusts);
#   2. builds the proxy and app images from the repository's Dockerfiles with podman-compose;
#   3. records: proxy in record mode, the example app fetching an upstream service through it;
#   4. stops the upstream and replays: proxy in replay mode, the app must get the same answer.
# Not part of CI (it needs root, podman and a few minutes). Usage: scripts/compose-smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."
work="${TOOL_REPLAY_SMOKE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tool-replay/compose-smoke}"
project=trsmoke
log() { printf '\n=== %s ===\n' "$*"; }

need=()
for cmd in podman runc debootstrap podman-compose; do command -v "$cmd" >/dev/null 2>&1 || need+=("$cmd"); done
if [ "${#need[@]}" -gt 0 ]; then
  log "apt-get install ${need[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi

# crun refuses this kernel's hybrid cgroup layout, and without CAP_SYS_RESOURCE the default rlimits
# (nofile 1048576) cannot be set: runc with limits at or below the current ones works.
mkdir -p "$work"
cat > "$work/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
[engine]
runtime = "runc"
CONF
export CONTAINERS_CONF="$work/containers.conf"

if ! podman image exists docker.io/library/node:22-bookworm-slim; then
  log "stand-in base image node:22-bookworm-slim (debootstrap + Node 22)"
  if [ ! -x "$work/rootfs/bin/sh" ]; then
    rm -rf "$work/rootfs"
    debootstrap --variant=minbase bookworm "$work/rootfs" http://deb.debian.org/debian
  fi
  node_bin="$(scripts/ensure-node.sh 22)/node"
  npm_dir="$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")"
  rm -rf "$work/base" && mkdir -p "$work/base"
  cp -a "$work/rootfs/." "$work/base/"
  mkdir -p "$work/base/usr/local/bin" "$work/base/usr/local/lib/node_modules" "$work/base/etc/ssl/certs"
  cp "$(readlink -f "$node_bin")" "$work/base/usr/local/bin/node"
  cp -a "$npm_dir" "$work/base/usr/local/lib/node_modules/npm"
  ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$work/base/usr/local/bin/npm"
  ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$work/base/usr/local/bin/npx"
  cp /etc/ssl/certs/ca-certificates.crt "$work/base/etc/ssl/certs/ca-certificates.crt"
  tar -C "$work/base" -c . | podman import \
    --change 'CMD ["node"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' \
    --change 'ENV NPM_CONFIG_CAFILE=/etc/ssl/certs/ca-certificates.crt' \
    - docker.io/library/node:22-bookworm-slim
fi

compose() { podman-compose -p "$project" -f docker-compose.yml -f examples/compose-app/smoke/compose.smoke.yml "$@"; }
cleanup() {
  podman rm -f "${project}_proxy_1" "${project}_upstream_1" >/dev/null 2>&1 || true
  podman volume rm -f "${project}_tool-replay-store" >/dev/null 2>&1 || true
  podman network rm -f "${project}_default" >/dev/null 2>&1 || true
}
cleanup
trap cleanup EXIT

log "build (podman-compose build)"
podman build --pull=never --network=host -t "${project}_proxy" -f Dockerfile . >/dev/null
compose build >/dev/null

log "record"
TR_MODE=record compose up -d upstream proxy >/dev/null
sleep 3
recorded="$(TR_MODE=record compose run --rm -T app 2>/dev/null | grep -E '^[0-9]{3} ' || true)"
podman stop -t 10 "${project}_proxy_1" >/dev/null
podman logs "${project}_proxy_1" 2>&1 | tail -1
echo "app: $recorded"

log "replay (upstream stopped)"
podman rm -f "${project}_upstream_1" "${project}_proxy_1" >/dev/null
TR_MODE=replay compose up -d proxy >/dev/null
sleep 3
replayed="$(TR_MODE=replay compose run --rm -T app 2>/dev/null | grep -E '^[0-9]{3} ' || true)"
podman stop -t 10 "${project}_proxy_1" >/dev/null
summary="$(podman logs "${project}_proxy_1" 2>&1 | tail -1)"
echo "$summary"
echo "app: $replayed"

if [ -n "$recorded" ] && [ "$recorded" = "$replayed" ] && [[ "$summary" == *"1 replayed, 0 recorded"*"0 unmatched"*"0 unused"* ]]; then
  echo "compose smoke: passed"
else
  echo "compose smoke: FAILED (recorded: '$recorded', replayed: '$replayed')" >&2
  exit 1
fi
