import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { jsonTrace } from '../store/fixtures/exchanges.ts'
import { openStore } from '../store/index.ts'
import { runCli } from './index.ts'

const root = await mkdtemp(join(tmpdir(), 'tr-show-'))
after(() => rm(root, { recursive: true, force: true }))

const run = async (...argv: string[]) => {
  const out: string[] = []
  const err: string[] = []
  const code = await runCli(argv, { out: (t) => out.push(t), err: (t) => err.push(t) })
  return { code, out, err: err.join('\n') }
}

test('show pages: a big trace is printed a page at a time, --from and --limit pick a window, --json stays one document', async () => {
  const store = await openStore(join(root, 'store'))
  await store.putTrace(jsonTrace('long', 2500))
  await store.close()
  const dir = join(root, 'store')

  const all = await run('show', 'long', '--store', dir)
  assert.equal(all.code, 0, all.err)
  assert.ok(all.out.length >= 3, `printed in ${all.out.length} writes, not all at once`)
  const lines = all.out.join('\n').split('\n')
  assert.equal(lines[0], 'trace "long": 2500 exchange(s)')
  assert.equal(lines.length, 2501)
  assert.match(lines[2500] as string, /^#2499 POST https:\/\/api\.test\/items\/2499 → 200 OK/)

  const window = await run('show', 'long', '--from', '1200', '--limit', '3', '--store', dir)
  assert.deepEqual(
    window.out
      .join('\n')
      .split('\n')
      .map((l) => l.split(' → ')[0]),
    [
      'trace "long": 2500 exchange(s), from #1200',
      '#1200 POST https://api.test/items/1200',
      '#1201 POST https://api.test/items/1201',
      '#1202 POST https://api.test/items/1202',
    ],
  )
  const json = await run('show', 'long', '--from', '2498', '--store', dir, '--json')
  const doc = JSON.parse(json.out.join('\n')) as { view: string; exchanges: Array<{ seq: number }> }
  assert.deepEqual(
    doc.exchanges.map((x) => x.seq),
    [2498, 2499],
  )
  const bad = await run('show', 'long', '--limit', '-1', '--store', dir)
  assert.equal(bad.code, 64)
})
