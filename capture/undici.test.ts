import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { createRequire } from 'node:module'
import { test } from 'node:test'
import { DispatcherBase, UNDICI_PARTS, undiciPart } from './undici.ts'

const require = createRequire(import.meta.url)

test('each part of undici the capture paths load by file is the one the package exports (an undici release that moves one fails here)', () => {
  const pkg = require('undici')
  for (const [name, path] of Object.entries(UNDICI_PARTS)) {
    assert.equal(require(path), pkg[name], `${path} is undici's ${name}`)
    assert.equal(undiciPart(name as keyof typeof UNDICI_PARTS), pkg[name])
  }
  assert.equal(DispatcherBase, pkg.Dispatcher)
})

test('the Dispatcher class alone does not load the HTTP client', () => {
  const script = `require(${JSON.stringify(UNDICI_PARTS.Dispatcher)}); process.stdout.write(String(Object.keys(require.cache).filter((k) => k.includes('/undici/')).length))`
  const loaded = Number(execFileSync(process.execPath, ['-e', script], { cwd: import.meta.dirname, encoding: 'utf8' }))
  assert.ok(loaded > 0 && loaded < 10, `undici modules loaded for the Dispatcher class: ${loaded}`)
})
