import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { promisify } from 'node:util'

const run = promisify(execFile)

test('npm run demo: records, then replays strictly with the API stopped, on the default store', async (t) => {
  const cwd = await mkdtemp(join(tmpdir(), 'tr-quickstart-'))
  t.after(() => rm(cwd, { recursive: true, force: true }))
  const main = new URL('./main.ts', import.meta.url).pathname
  const { stdout } = await run(process.execPath, ['--conditions=tool-replay-source', main], { cwd, timeout: 60_000 })
  const recorded = /^record: "(.*)" \(2 exchanges written to (.*)\/\.tool-replay\/store/m.exec(stdout)
  const replayed = /^replay: "(.*)" \(2 exchanges replayed/m.exec(stdout)
  assert.ok(recorded && replayed, stdout)
  assert.equal(replayed[1], recorded[1])
  assert.match(stdout, /^ok: strict replay matched/m)
})
