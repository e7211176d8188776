import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { isToolReplayError } from '../trace/index.ts'
import { formatPointer, gitRemote, parsePointer, readPointer, writePointer } from './pointer.ts'

const D = 'a'.repeat(64)
const dir = mkdtempSync(join(tmpdir(), 'tr-pointer-'))
after(() => rmSync(dir, { recursive: true, force: true }))

const invalid = (text: string, field: RegExp) =>
  assert.throws(
    () => parsePointer(text, 'p.json'),
    (err: unknown) => isToolReplayError(err, 'TR_ASSETS_INVALID') && field.test(err.message) && /^The assets pointer p\.json is invalid: /.test(err.message),
  )
const pointer = (fields: Record<string, unknown>) => JSON.stringify({ format: 'tool-replay-assets', version: 1, remote: 'git://h/r.git', ...fields })

test('a pointer reads back as written, in a fixed layout (defaults left out, traces sorted)', async () => {
  const p = parsePointer(pointer({ tag: 'tool-replay/abc', traces: { search: D, checkout: 'b'.repeat(64) } }))
  assert.deepEqual(p, {
    remote: 'git://h/r.git',
    tag: 'tool-replay/abc',
    dir: 'traces',
    tagPrefix: 'tool-replay/',
    traces: { search: D, checkout: 'b'.repeat(64) },
  })
  const text = formatPointer(p)
  assert.equal(
    text,
    `{\n  "format": "tool-replay-assets",\n  "version": 1,\n  "remote": "git://h/r.git",\n  "tag": "tool-replay/abc",\n  "traces": {\n    "checkout": "${'b'.repeat(64)}",\n    "search": "${D}"\n  }\n}\n`,
  )
  const file = join(dir, 'tool-replay.assets.json')
  await writePointer(file, p)
  assert.equal(readFileSync(file, 'utf8'), text)
  assert.deepEqual(await readPointer(file), p)
  assert.deepEqual(parsePointer(pointer({ dir: 'rec/app', tagPrefix: 'app-', traces: {} })).dir, 'rec/app')
})

test('every bad field is a typed error naming the file and the field', async () => {
  invalid('{', /\(top level\) is not valid JSON/)
  invalid(pointer({ format: 'x' }), /format must be "tool-replay-assets"/)
  invalid(pointer({ version: 2 }), /version is 2; this Tool Replay reads version 1/)
  invalid(pointer({ extra: 1 }), /extra is not a known field/)
  invalid(pointer({ remote: '' }), /remote must be a git remote URL/)
  invalid(pointer({ remote: '--upload-pack=evil' }), /remote must be a git remote URL or path \(not starting with "-"\)/)
  invalid(pointer({ remote: 'https://me:hunter2@github.com/a/b.git' }), /remote holds a password/)
  invalid(pointer({ dir: '../up' }), /dir must be a relative folder/)
  invalid(pointer({ dir: '/abs' }), /dir must be a relative folder/)
  for (const tag of ['', 'a b', 'a..b', 'a~1', 'a^', 'a:b', '-x', 'x.lock', 'x/', '.x', 'a//b', 'a@{1}'])
    invalid(pointer({ tag }), /tag is not a valid git tag name/)
  invalid(pointer({ traces: { 'a/b': D } }), /traces\["a\/b"\] is not a trace name/)
  invalid(pointer({ traces: { a: 'nope' } }), /traces\["a"\] must be the sha256 digest/)
  await assert.rejects(
    readPointer(join(dir, 'absent.json')),
    (err: unknown) => isToolReplayError(err, 'TR_ASSETS_INVALID') && /assets push --remote URL/.test(err.message),
  )
  // A URL with only a user name is fine (SSH-style, tokens from a credential helper).
  assert.equal(parsePointer(pointer({ remote: 'https://oauth@github.com/a/b.git' })).remote, 'https://oauth@github.com/a/b.git')
})

test('the remote git is given: URLs and scp-like remotes as written, a local path relative to the pointer', () => {
  for (const remote of ['https://github.com/a/b.git', 'git://h:9418/r.git', 'file:///srv/r.git', 'git@github.com:a/b.git', 'host:path/r.git', '/srv/r.git'])
    assert.equal(gitRemote(remote, '/app/tool-replay.assets.json'), remote)
  assert.equal(gitRemote('../recordings.git', '/work/app/tool-replay.assets.json'), '/work/recordings.git')
})
