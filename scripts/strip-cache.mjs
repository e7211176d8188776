// Test runs only (scripts/run-tests.mjs loads this into every Node process of the suite with NODE_OPTIONS):
// on Node 22 the type-stripped form of each .ts source is kept on disk, so a process does not strip the same
// file again. Node 22 strips every .ts file each time a process loads it (~0.4 s of CPU for the CLI's sources,
// which the suite starts a few hundred times), while its compile cache only keeps the JavaScript's compiled
// code; Node 24 and later cache the stripped sources themselves, so there this file does nothing.
// The stripping is Node's own (`module.stripTypeScriptTypes`, what Node 22 runs on a .ts file); the cache is
// keyed by the SHA-1 of the source, so an edited file is stripped again. Nothing of the product uses this.
import { createHash } from 'node:crypto'
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import nodeModule from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const [major] = process.versions.node.split('.').map(Number)
if (major === 22 && typeof nodeModule.registerHooks === 'function' && typeof nodeModule.stripTypeScriptTypes === 'function') {
  const dir = join(tmpdir(), 'tool-replay-test-strip-cache', process.version)
  nodeModule.registerHooks({
    load(url, context, nextLoad) {
      const loaded = nextLoad(url, context)
      if (loaded.format !== 'module-typescript' || url.includes('/node_modules/')) return loaded
      return { format: 'module', source: stripped(loaded.source), shortCircuit: true }
    },
  })

  /** The source without its types: from the cache, or stripped by Node and kept there. */
  function stripped(source) {
    const file = join(dir, `${createHash('sha1').update(source).digest('hex')}.js`)
    try {
      return readFileSync(file, 'utf8')
    } catch {}
    const code = quietly(() => nodeModule.stripTypeScriptTypes(String(source)))
    try {
      mkdirSync(dir, { recursive: true })
      const tmp = `${file}.${process.pid}.tmp`
      writeFileSync(tmp, code)
      renameSync(tmp, file)
    } catch {}
    return code
  }

  /** Runs `fn` without its ExperimentalWarning ("stripTypeScriptTypes is an experimental feature"), which would
   * reach the stderr that tests read; Node itself strips without that warning. */
  function quietly(fn) {
    const emit = process.emitWarning
    process.emitWarning = () => {}
    try {
      return fn()
    } finally {
      process.emitWarning = emit
    }
  }
}
