import assert from 'node:assert/strict'
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { assertCommandFound } from './start-checks.ts'

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
