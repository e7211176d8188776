// Test-run speed only (scripts/run-tests.mjs loads it into the test processes and, through NODE_OPTIONS, into
// every process they spawn): Node's type stripping of this checkout's .ts files, cached on disk by content.
// A checkout runs its sources (bin/tr-proxy.js), so each spawned CLI strips every module it loads again
// (~30% of a CLI start); with the cache a source file is stripped once per content. The stripped text is what
// Node itself runs (same stripper, `strip` mode keeps every position, so stack traces are unchanged).
// Off unless TOOL_REPLAY_STRIP_CACHE names the directory; a no-op on a Node without module.registerHooks.
import { createHash } from 'node:crypto'
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import * as nodeModule from 'node:module'
import { join } from 'node:path'

const dir = process.env.TOOL_REPLAY_STRIP_CACHE
const root = new URL('..', import.meta.url).href

function stripped(source) {
  // Keyed by the stripper's version too: a Node with another amaro strips afresh.
  const key = createHash('sha1')
    .update(process.versions.amaro ?? process.version)
    .update(source)
    .digest('hex')
  const file = join(dir, `${key}.js`)
  try {
    return readFileSync(file, 'utf8')
  } catch {}
  // stripTypeScriptTypes announces itself as experimental on stderr, which running .ts files does not; tests
  // read stderr, so the announcement is held back.
  const emitWarning = process.emitWarning
  process.emitWarning = () => {}
  let code
  try {
    code = nodeModule.stripTypeScriptTypes(source, { mode: 'strip' })
  } finally {
    process.emitWarning = emitWarning
  }
  mkdirSync(dir, { recursive: true })
  const tmp = `${file}.${process.pid}.tmp`
  writeFileSync(tmp, code)
  renameSync(tmp, file)
  return code
}

if (dir && typeof nodeModule.registerHooks === 'function' && typeof nodeModule.stripTypeScriptTypes === 'function') {
  nodeModule.registerHooks({
    load(url, context, nextLoad) {
      if (!url.startsWith(root) || !url.endsWith('.ts') || url.includes('/node_modules/')) return nextLoad(url, context)
      return { format: 'module', source: stripped(readFileSync(new URL(url), 'utf8')), shortCircuit: true }
    },
  })
}
