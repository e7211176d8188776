import assert from 'node:assert/strict'
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { assertCommandFound, assertPortFree } from './start-checks.ts'

test('assertPortFree refuses a port another server holds, and frees the one it probed', async (t) => {
  const held = createServer()
  await new Promise<void>((resolve) => held.listen(0, '127.0.0.1', resolve))
  t.after(() => held.close())
  const port = (held.address() as { port: number }).port
  await assert.rejects(assertPortFree('127.0.0.1', port), { code: 'TR_PROXY_START_FAILED', message: /EADDRINUSE.*--port/ })
  await assertPortFree('127.0.0.1', 0)
  held.close()
  await assertPortFree('127.0.0.1', port)
  // Released: it can be bound again at once.
  const again = createServer()
  await new Promise<void>((resolve) => again.listen(port, '127.0.0.1', resolve))
  again.close()
})

test('assertCommandFound looks a bare name up on PATH and a path from cwd, as spawn does', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'tr-start-checks-'))
  t.after(() => rmSync(dir, { recursive: true, force: true }))
  writeFileSync(join(dir, 'tool'), '#!/bin/sh\n')
  chmodSync(join(dir, 'tool'), 0o755)
  writeFileSync(join(dir, 'plain'), 'not executable')
  await assertCommandFound('tool', '/', `/nowhere:${dir}`)
  await assertCommandFound('./tool', dir, '')
  await assertCommandFound(join(dir, 'tool'), '/', '')
  await assert.rejects(assertCommandFound('tool', '/', '/nowhere'), { code: 'TR_COMMAND_FAILED', message: /"tool": ENOENT.*PATH/ })
  await assert.rejects(assertCommandFound('./plain', dir, ''), { code: 'TR_COMMAND_FAILED' })
  await assert.rejects(assertCommandFound('./', dir, ''), { code: 'TR_COMMAND_FAILED' })
})
