import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { test } from 'node:test'
import { DispatcherBase, undiciPackage } from './undici.ts'

const require = createRequire(import.meta.url)

test("undici's Dispatcher is reachable by its file and is the class the package exports (an undici release that moves it fails here)", () => {
  assert.equal(require('undici/lib/dispatcher/dispatcher.js'), require('undici').Dispatcher)
  assert.equal(DispatcherBase, undiciPackage().Dispatcher)
})

test('the Dispatcher class alone does not load the HTTP client', async () => {
  const { execFileSync } = await import('node:child_process')
  const script = `require('undici/lib/dispatcher/dispatcher.js'); process.stdout.write(String(Object.keys(require.cache).filter((k) => k.includes('/undici/')).length))`
  const loaded = Number(execFileSync(process.execPath, ['-e', script], { cwd: import.meta.dirname, encoding: 'utf8' }))
  assert.ok(loaded > 0 && loaded < 10, `undici modules loaded for the Dispatcher class: ${loaded}`)
})
