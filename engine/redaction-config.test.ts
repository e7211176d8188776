import assert from 'node:assert/strict'
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { isToolReplayError } from '../trace/index.ts'
import { DEFAULT_CONFIG_FILE, loadConfig, mergeRedaction, parseConfig } from './redaction-config.ts'

const root = await mkdtemp(join(tmpdir(), 'tr-config-'))
after(() => rm(root, { recursive: true, force: true }))

const invalid = (fragment: string) => (err: unknown) => isToolReplayError(err, 'TR_INVALID_OPTION') && err.message.includes(fragment)

test('the settings file: the default under the working directory, TOOL_REPLAY_CONFIG, or an explicit file', async () => {
  const cwd = join(root, 'project')
  assert.deepEqual(await loadConfig({ cwd, env: {} }), { file: undefined, config: {} }, 'no file: no extra redaction, no error')
  await mkdir(join(cwd, '.tool-replay'), { recursive: true })
  await writeFile(join(cwd, DEFAULT_CONFIG_FILE), '{"redaction": {"headers": ["X-Tenant-Token"], "bodyPaths": ["$.api_key"]}}')
  assert.deepEqual(await loadConfig({ cwd, env: {} }), {
    file: join(cwd, DEFAULT_CONFIG_FILE),
    config: { redaction: { headers: ['X-Tenant-Token'], bodyPaths: ['$.api_key'] } },
  })
  const other = join(root, 'other.json')
  await writeFile(other, '{"redaction": {"queryParams": ["sig"]}}')
  assert.deepEqual((await loadConfig({ cwd, env: { TOOL_REPLAY_CONFIG: other } })).config, { redaction: { queryParams: ['sig'] } })
  assert.deepEqual((await loadConfig({ cwd, file: other, env: {} })).config, { redaction: { queryParams: ['sig'] } })
  // A file that was named must exist: a typo must not silently record secrets.
  await assert.rejects(loadConfig({ cwd, file: join(root, 'missing.json'), env: {} }), invalid('missing.json'))
  await assert.rejects(loadConfig({ cwd, env: { TOOL_REPLAY_CONFIG: 'nope.json' } }), invalid('nope.json'))
})

test('a settings file with a typo is refused, naming the file and the field', () => {
  assert.throws(() => parseConfig('{"redaction": {"bodypaths": ["$.a"]}}', 'c.json'), invalid('c.json is invalid: redaction.bodypaths is not a known setting'))
  assert.throws(() => parseConfig('{"redact": {}}', 'c.json'), invalid('redact is not a known setting'))
  assert.throws(() => parseConfig('{"redaction": {"headers": "authorization"}}'), invalid('redaction.headers must be an array of non-empty strings'))
  assert.throws(() => parseConfig('{"redaction": {"bodyPaths": ["$.["]}}'), invalid('redaction.bodyPaths[0] is not a JSON path'))
  assert.throws(() => parseConfig('{"redaction": '), invalid('is not valid JSON'))
  assert.deepEqual(parseConfig('{}'), {})
})

test('settings merge as a union: nothing can switch a redaction off', () => {
  assert.deepEqual(
    mergeRedaction({ headers: ['X-A'], bodyPaths: ['$.a'] }, undefined, { headers: ['x-a', 'x-b'], bodyPaths: ['$.b', '$.a'], queryParams: [] }),
    {
      headers: ['X-A', 'x-b'],
      bodyPaths: ['$.a', '$.b'],
    },
  )
  assert.deepEqual(mergeRedaction(), {})
})
