import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { runCli } from './main.ts'
import { redactionFromArgs } from './redaction-flags.ts'

const root = await mkdtemp(join(tmpdir(), 'tr-flags-'))
after(() => rm(root, { recursive: true, force: true }))

test('--redact-* flags and the --config file merge into one redaction policy', async () => {
  const config = join(root, 'config.json')
  await writeFile(config, '{"redaction": {"headers": ["x-tenant"], "bodyPaths": ["$.api_key"]}}')
  assert.deepEqual(
    await redactionFromArgs({ config, 'redact-header': ['X-Extra'], 'redact-query': ['sig'], 'redact-body-path': ['$.password', '$.api_key'] }),
    { headers: ['x-tenant', 'X-Extra'], queryParams: ['sig'], bodyPaths: ['$.api_key', '$.password'] },
  )
})

test('a bad settings file or body path stops record before anything starts (exit 64)', async () => {
  const bad = join(root, 'bad.json')
  await writeFile(bad, '{"redaction": {"bodypaths": ["$.api_key"]}}')
  const err: string[] = []
  const io = { out: () => {}, err: (t: string) => err.push(t) }
  const store = join(root, 'store')
  assert.equal(await runCli(['record', '--store', store, '--config', bad, '--', 'true'], io), 64)
  assert.match(err.join('\n'), /TR_INVALID_OPTION: The Tool Replay settings file .*bad\.json is invalid: redaction\.bodypaths is not a known setting/)
  assert.equal(await runCli(['record', '--store', store, '--redact-body-path', '$.[', '--', 'true'], io), 64)
})
