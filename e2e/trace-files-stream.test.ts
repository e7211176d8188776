/**
 * Streamed trace files: a damage in the very last exchange commits nothing to the store (the staged exchanges
 * are discarded, the trace of that name keeps its bytes), and files written before streaming still import and
 * re-export byte-identical. The small-heap test is e2e/trace-files-memory.test.ts.
 */
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { openStore } from '../store/index.ts'
import { cli, generate } from './support/big-trace-file.ts'

const root = await mkdtemp(join(tmpdir(), 'tr-files-stream-'))
after(() => rm(root, { recursive: true, force: true }))

async function traceNames(store: string): Promise<string[]> {
  const s = await openStore(store)
  try {
    return (await s.listTraces()).map((t) => `${t.name}:${t.status}`).sort()
  } finally {
    await s.close()
  }
}

// Under the runner's 120 s for the file, at load 15 on 2 cores.
const SLOW = { timeout: 115_000 }

describe('streamed trace files', () => {
  test('a digest mismatch in the last exchange commits nothing, after thousands were staged', SLOW, async () => {
    const store = join(root, 'store-damage')
    const good = join(root, 'keep.trace.json')
    await generate(good, 'keep', 3_000, 'kept')
    assert.equal((await cli(['import', good, '--store', store])).code, 0)
    const before = join(root, 'keep-before.trace.json')
    assert.equal((await cli(['export', 'keep', '--out', before, '--store', store])).code, 0)
    // The same name, other content, damaged in its last exchange only: 2 batches are staged before it is read.
    const file = join(root, 'damaged.trace.json')
    await generate(file, 'keep', 2_500, 'other')
    const text = await readFile(file, 'utf8')
    const at = text.lastIndexOf('"startMs": 2499')
    assert.ok(at > text.length - 2000, 'the edit is in the last exchange')
    await writeFile(file, `${text.slice(0, at)}"startMs": 2498${text.slice(at + '"startMs": 2499'.length)}`)
    for (const args of [[], ['--force']]) {
      const r = await cli(['import', file, '--store', store, ...args])
      assert.equal(r.code, 65, r.stderr)
      assert.match(r.stderr, /TR_TRACE_DIGEST_MISMATCH/)
      assert.deepEqual(await traceNames(store), ['keep:complete'], 'no trace, partial or staged recording left behind')
      const after = join(root, 'keep-after.trace.json')
      assert.equal((await cli(['export', 'keep', '--out', after, '--store', store])).code, 0)
      assert.ok((await readFile(after)).equals(await readFile(before)), 'the trace of that name kept its bytes')
    }
  })

  test('files written before streaming (version 1 and 2) still import and re-export byte-identical', SLOW, async () => {
    const store = join(root, 'store-old')
    const old = fileURLToPath(new URL('../store/fixtures/written-by-main-290b2f5.trace.json', import.meta.url))
    assert.equal(JSON.parse(await readFile(old, 'utf8')).version, 1)
    const r = await cli(['import', old, '--store', store, '--json'])
    assert.equal(r.code, 0, r.stderr)
    const { trace: name, digest } = JSON.parse(r.stdout)
    assert.equal(digest, JSON.parse(await readFile(old, 'utf8')).digest)
    const v2 = join(root, 'old-v2.trace.json')
    assert.equal((await cli(['export', name, '--out', v2, '--store', store])).code, 0)
    assert.equal(JSON.parse(await readFile(v2, 'utf8')).version, 2, 'its repeated bodies became refs')
    const store2 = join(root, 'store-old-2')
    assert.equal((await cli(['import', v2, '--store', store2])).code, 0)
    const v2again = join(root, 'old-v2-again.trace.json')
    assert.equal((await cli(['export', name, '--out', v2again, '--store', store2])).code, 0)
    assert.ok((await readFile(v2again)).equals(await readFile(v2)))
  })
})
