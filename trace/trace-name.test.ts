import assert from 'node:assert/strict'
import { test } from 'node:test'
import { ErrorCodes, isToolReplayError } from './errors.ts'
import { assertTraceName } from './trace-name.ts'

test('trace names: ordinary names pass; empty, dotted, slashed, NUL, non-strings and huge ones fail with TR_INVALID_OPTION', () => {
  for (const ok of ['checkout', 'crm:inactive', 'a.b-c_d', 'x'.repeat(200)]) assertTraceName(ok)
  for (const bad of ['', '.hidden', '../evil', 'a/b', 'a\\b', 'nul\0', 'x'.repeat(201), 42, undefined]) {
    assert.throws(
      () => assertTraceName(bad, '--to trace name'),
      (e: unknown) => isToolReplayError(e, ErrorCodes.INVALID_OPTION) && (e as Error).message.startsWith('Invalid --to trace name'),
      String(bad),
    )
  }
})
