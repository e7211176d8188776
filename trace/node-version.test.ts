import assert from 'node:assert/strict'
import { test } from 'node:test'
import { assertSupportedNode } from './node-version.ts'

test('the library refuses a Node older than 22.19, naming the version and the fix; 22.19 and later pass', () => {
  for (const old of ['20.11.1', '22.18.0', '18.0.0']) {
    assert.throws(() => assertSupportedNode(old), {
      message: new RegExp(`needs Node >= 22\\.19 \\(this is v${old.replaceAll('.', '\\.')}\\).*Node 22\\.19 or later`),
    })
  }
  for (const ok of ['22.19.0', '22.23.3', '24.1.0', '26.0.0']) assert.doesNotThrow(() => assertSupportedNode(ok))
})
