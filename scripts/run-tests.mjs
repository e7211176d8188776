#!/usr/bin/env node
// Runs the test suite with Node's built-in runner (type stripping, no build step).
//   node scripts/run-tests.mjs [unit|e2e|all] [extra node --test args]
// Unit tests live beside the code (*.test.ts); end-to-end tests in e2e/.
import { spawnSync } from 'node:child_process'
import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'

const [major, minor] = process.versions.node.split('.').map(Number)
if (major < 22 || (major === 22 && minor < 19)) {
  console.error(`Tool Replay needs Node >= 22.19 (this is ${process.version}). Run: PATH="$(scripts/ensure-node.sh 22):$PATH" npm test`)
  process.exit(1)
}

const which = process.argv[2] && !process.argv[2].startsWith('-') ? process.argv[2] : 'all'
const extra = process.argv.slice(which === process.argv[2] ? 3 : 2)
const unitDirs = ['trace', 'store', 'engine', 'capture', 'lab', 'interceptor', 'proxy', 'cases', 'interop', 'cli', 'examples', 'bench', 'scripts']
const dirs = which === 'unit' ? unitDirs : which === 'e2e' ? ['e2e'] : [...unitDirs, 'e2e']

const files = []
const walk = (dir) => {
  let entries
  try {
    entries = readdirSync(dir)
  } catch {
    return
  }
  for (const name of entries.sort()) {
    const p = join(dir, name)
    if (name === 'node_modules' || name.startsWith('.')) continue
    if (statSync(p).isDirectory()) walk(p)
    else if (name.endsWith('.test.ts')) files.push(p)
  }
}
for (const d of dirs) walk(d)
if (files.length === 0) {
  console.error('No test files found.')
  process.exit(1)
}
const args = ['--conditions=tool-replay-source', '--test', '--test-concurrency=2', '--test-timeout=120000', ...extra, ...files]
const r = spawnSync(process.execPath, args, { stdio: 'inherit' })
process.exit(r.status ?? 1)
