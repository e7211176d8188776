import assert from 'node:assert/strict'
import { test } from 'node:test'
import { isToolReplayError } from '../trace/index.ts'
import { DEFAULT_PROXY_LIMITS, limitHelp, limitsFromFlags, PROXY_LIMITS } from './proxy-limits.ts'
import { startProxy } from './proxy-server.ts'

test('each limit is declared once: its default, its flag and its help come from PROXY_LIMITS', () => {
  assert.equal(DEFAULT_PROXY_LIMITS.maxConnections, PROXY_LIMITS.maxConnections.default)
  assert.deepEqual(Object.keys(DEFAULT_PROXY_LIMITS), Object.keys(PROXY_LIMITS))
  assert.match(limitHelp(PROXY_LIMITS.headersTimeoutMs), /head .*\(ms; default 30000\)$/)
})

test('flags: given ones by option name, others left out; a bad value names the flag and the default', () => {
  assert.deepEqual(limitsFromFlags({ 'max-connections': 8, 'close-grace-ms': undefined, port: 9 }), { maxConnections: 8 })
  for (const bad of [0, -1, 1.5, Number.NaN, '8']) {
    assert.throws(
      () => limitsFromFlags({ 'max-connections': bad }),
      (e: unknown) => isToolReplayError(e) && e.code === 'TR_INVALID_OPTION' && /^Invalid --max-connections .*\(default 512\)\.$/.test(e.message),
    )
  }
})

/** Limits are checked before anything starts, so the CA is never reached. */
const NO_CA = undefined as never

test('startProxy checks its limits as the CLI does, naming the option, and refuses a limit that does not exist', async () => {
  await assert.rejects(
    startProxy({ ca: NO_CA, limits: { headersTimeoutMs: 0 } }),
    (e: unknown) => isToolReplayError(e) && e.code === 'TR_INVALID_OPTION' && e.message.startsWith('Invalid limits.headersTimeoutMs 0'),
  )
  await assert.rejects(
    startProxy({ ca: NO_CA, limits: { maxConections: 4 } as never }),
    (e: unknown) => isToolReplayError(e) && /Unknown proxy limit limits\.maxConections: the limits are headersTimeoutMs, /.test(e.message),
  )
})
