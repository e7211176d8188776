#!/usr/bin/env bash
# Installs a Node.js major from the npm registry's `node` package into a cache dir, once,
# and prints the path of its bin directory. The machines' system Node is 20 (end of life);
# the project needs >= 22.19.
#   usage: scripts/ensure-node.sh 22   ->  /root/.cache/tool-replay/node-22/node_modules/node/bin
set -euo pipefail
major="${1:?usage: ensure-node.sh MAJOR}"
cache="${TOOL_REPLAY_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tool-replay}"
dir="$cache/node-$major"
bin="$dir/node_modules/.bin"
if [ ! -x "$bin/node" ] || ! "$bin/node" -e 'process.exit(0)' >/dev/null 2>&1; then
  mkdir -p "$dir"
  # A pinned-major install keeps CI reproducible across minor releases of other majors.
  npm install --prefix "$dir" --no-save --no-audit --no-fund --loglevel=error "node@$major" >&2
fi
"$bin/node" -e 'process.exit(0)' >/dev/null
echo "$bin"
