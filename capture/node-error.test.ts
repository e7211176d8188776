import assert from 'node:assert/strict'
import { constants } from 'node:os'
import { test } from 'node:test'
import { toNodeError } from './node-error.ts'

test('recorded system errors come back with the syscall and errno Node gives them', () => {
  const reset = toNodeError({ code: 'ECONNRESET', message: 'read ECONNRESET', phase: 'response-body' })
  assert.deepEqual([reset.message, reset.code, (reset as { syscall?: string }).syscall], ['read ECONNRESET', 'ECONNRESET', 'read'])
  assert.equal((reset as { errno?: number }).errno, -constants.errno.ECONNRESET)
  const refused = toNodeError({ code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 127.0.0.1:9', phase: 'connect' })
  assert.equal((refused as { syscall?: string }).syscall, 'connect')
  // Node's own "aborted" and "socket hang up" carry no syscall; undici's errors are UndiciErrors.
  assert.equal((toNodeError({ code: 'ECONNRESET', message: 'aborted', phase: 'response-body' }) as { syscall?: string }).syscall, undefined)
  const undici = toNodeError({ code: 'UND_ERR_SOCKET', message: 'other side closed', phase: 'response-body' })
  assert.equal(undici.name, 'UndiciError')
  assert.equal((undici as { syscall?: string }).syscall, undefined)
  // A connect-phase failure whose message names no syscall still reads as a connect failure.
  assert.equal((toNodeError({ code: 'ENOTFOUND', message: 'lookup failed', phase: 'connect' }) as { syscall?: string }).syscall, 'connect')
})
