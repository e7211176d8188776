import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { test } from 'node:test'
import { REFERENCE_PATH, renderReference } from './reference.ts'

test('docs/reference.md is what the flags and declarations print today (regenerate: npm run reference)', async () => {
  const fresh = await renderReference()
  assert.match(fresh, /### tr-proxy record\n\n```text\ntr-proxy record/)
  assert.match(fresh, /^- `--max-connections` \(`limits\.maxConnections`\), default 512 connections: /m)
  assert.equal(readFileSync(REFERENCE_PATH, 'utf8'), fresh, 'docs/reference.md is stale: run `npm run reference` and commit it')
})
