#!/usr/bin/env bash
# Refreshes the inspector screenshots in docs/images/ (shown in README "The inspector"): the browser tests take
# them as they walk through the page (runs, run, rerun, compare: the walk-through; search, summary, waterfall:
# find; faults; grpc, stream, websocket: protocols; lab; live). Needs Debian's chromium (apt-get install -y chromium).
#   bash scripts/inspector-screenshots.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$(scripts/ensure-node.sh 22):$PATH"
mkdir -p docs/images
TOOL_REPLAY_SCREENSHOTS="$PWD/docs/images" node --conditions=tool-replay-source --test \
  e2e/inspector-walkthrough.test.ts e2e/inspector-find.test.ts e2e/inspector-faults.test.ts e2e/inspector-protocols.test.ts \
  e2e/inspector-lab.test.ts e2e/inspector-live.test.ts
ls -l docs/images/inspector-*.png
