/**
 * Trace files too big to hold as one text: `tr-proxy import` and `export` stream them. A 100k-exchange file
 * imports in a process whose heap is capped at 128 MB (reading it whole, as a text and then as objects, needs
 * several times that), a damage in the very last exchange commits nothing to the store (the staged exchanges
 * are discarded, the trace of that name keeps its bytes), and an unchanged trace re-exports to the same bytes.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { openStore, writeTraceFileFrom } from '../store/index.ts'
import { type BodyRef, bodyFromBytes, type Exchange } from '../trace/index.ts'

const TR_PROXY = fileURLToPath(new URL('../bin/tr-proxy.js', import.meta.url))
const root = await mkdtemp(join(tmpdir(), 'tr-files-stream-'))
after(() => rm(root, { recursive: true, force: true }))
const enc = new TextEncoder()
const JSON_TYPE: Array<[string, string]> = [['content-type', 'application/json']]

/** Exchange i of a generated trace: a JSON answer of its own, every fourth one of 50 repeated answers (refs). */
function exchangeAt(i: number, bytes: Map<string, Uint8Array>, tag: string): Exchange {
  const keep = (text: string): BodyRef => {
    const b = bodyFromBytes(enc.encode(text))
    bytes.set(b.ref.digest, b.bytes)
    return b.ref
  }
  const answer = i % 4 === 0 ? `{"ok":true,"page":${i % 50}}` : `{"id":${i},"name":"${tag}-${i}","active":${i % 3 === 0}}`
  return {
    seq: i,
    request: { method: i % 2 ? 'POST' : 'GET', url: `https://api.test/users/${i}`, headers: JSON_TYPE, body: i % 2 ? keep(`{"id":${i}}`) : null },
    outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers: JSON_TYPE, trailers: [], body: keep(answer) } },
    timing: { startMs: i, headersMs: 1 },
  }
}

/** Writes an n-exchange trace file without holding the trace. */
async function generate(file: string, name: string, n: number, tag = 'user'): Promise<string> {
  // Bodies are asked for up to 64 exchanges after they were yielded: two generations of 256 cover that.
  let [current, previous] = [new Map<string, Uint8Array>(), new Map<string, Uint8Array>()]
  const written = await writeTraceFileFrom(file, {
    meta: { name, format: 1 },
    exchanges: async function* () {
      for (let i = 0; i < n; i++) {
        if (i % 256 === 0) [current, previous] = [new Map(), current]
        yield exchangeAt(i, current, tag)
      }
    },
    body: async (ref) => current.get(ref.digest) ?? previous.get(ref.digest),
  })
  return written.digest
}

function cli(args: string[], nodeArgs: string[] = []): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...nodeArgs, TR_PROXY, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), 240_000)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
  })
}

async function traceNames(store: string): Promise<string[]> {
  const s = await openStore(store)
  try {
    return (await s.listTraces()).map((t) => `${t.name}:${t.status}`).sort()
  } finally {
    await s.close()
  }
}

// Minutes each at load 15 on 2 cores (the runner's default per test is 2).
const SLOW = { timeout: 480_000 }

describe('streamed trace files', () => {
  test('a 100k-exchange file imports with a 128 MB heap and re-exports to the same bytes', SLOW, async () => {
    const file = join(root, 'big.trace.json')
    const digest = await generate(file, 'big', 100_000)
    const store = join(root, 'store-big')
    const imported = await cli(['import', file, '--store', store, '--json'], ['--max-old-space-size=128'])
    assert.equal(imported.code, 0, imported.stderr.slice(-2000))
    const out = JSON.parse(imported.stdout)
    assert.equal(out.exchanges, 100_000)
    assert.equal(out.digest, digest)
    const again = join(root, 'again.trace.json')
    const exported = await cli(['export', 'big', '--out', again, '--store', store, '--json'], ['--max-old-space-size=128'])
    assert.equal(exported.code, 0, exported.stderr.slice(-2000))
    assert.equal(JSON.parse(exported.stdout).digest, digest)
    assert.ok((await readFile(again)).equals(await readFile(file)), 're-export is byte-identical')
  })

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
