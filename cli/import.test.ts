/**
 * `tr-proxy import` of several files and folders (how CI loads the committed traces/ folder): every file is
 * verified before the store is touched, so a bad file, a name given twice or a name already taken imports
 * nothing; a folder is its *.trace.json files, sub-folders included.
 */
import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, test } from 'node:test'
import { openStore } from '../store/index.ts'
import { bodyFromBytes, ErrorCodes, type Trace } from '../trace/index.ts'
import { EXIT_CODES } from './exit-codes.ts'
import { runCli } from './main.ts'

function capture() {
  const out: string[] = []
  const err: string[] = []
  return { io: { out: (t: string) => out.push(t), err: (t: string) => err.push(t) }, out, err }
}

function trace(name: string, path: string): Trace {
  const body = bodyFromBytes(new TextEncoder().encode(`{"name":"${name}"}`))
  return {
    meta: { name, format: 1 },
    exchanges: [
      {
        seq: 0,
        request: { method: 'GET', url: `https://api.test${path}`, headers: [], body: null },
        outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers: [], body: body.ref, trailers: [] } },
        timing: { startMs: 0, headersMs: 1 },
      },
    ],
    bodies: new Map([[body.ref.digest, body.bytes]]),
  }
}

let dir = ''
let traces = ''

async function names(store: string): Promise<string[]> {
  const s = await openStore(store)
  try {
    return (await s.listTraces()).map((t) => t.name).sort()
  } finally {
    await s.close()
  }
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tr-import-'))
  const source = join(dir, 'source')
  const s = await openStore(source)
  for (const [name, path] of [
    ['checkout', '/cart'],
    ['login', '/session'],
    ['search', '/search'],
  ] as const)
    await s.putTrace(trace(name, path))
  await s.close()
  traces = join(dir, 'traces')
  mkdirSync(join(traces, 'auth'), { recursive: true })
  for (const [name, out] of [
    ['checkout', join(traces, 'checkout.trace.json')],
    ['login', join(traces, 'auth', 'login.trace.json')],
    ['search', join(dir, 'search.trace.json')],
  ])
    assert.equal(await runCli(['export', name as string, '--out', out as string, '--store', source], capture().io), 0)
  writeFileSync(join(traces, 'notes.md'), 'not a trace file\n')
})

after(() => rmSync(dir, { recursive: true, force: true }))

test('a folder and a file in one import: every *.trace.json of the folder (sub-folders too) and the file', async () => {
  const store = join(dir, 'store-all')
  const c = capture()
  assert.equal(await runCli(['import', traces, join(dir, 'search.trace.json'), '--store', store], c.io), 0, c.err.join('\n'))
  assert.deepEqual(await names(store), ['checkout', 'login', 'search'])
  assert.equal(c.out.filter((l) => l.startsWith('Imported ')).length, 3)
  const j = capture()
  assert.equal(await runCli(['import', traces, '--store', join(dir, 'store-json'), '--json'], j.io), 0)
  const report = JSON.parse(j.out.join('')) as { ok: boolean; imported: Array<{ trace: string }> }
  assert.deepEqual(
    report.imported.map((i) => i.trace),
    ['login', 'checkout'],
  )
})

test('a tampered file among several imports nothing', async () => {
  const bad = join(dir, 'bad')
  mkdirSync(bad)
  writeFileSync(join(bad, 'a-checkout.trace.json'), readFileSync(join(traces, 'checkout.trace.json')))
  writeFileSync(join(bad, 'b-search.trace.json'), readFileSync(join(dir, 'search.trace.json'), 'utf8').replace('search\\"}', 'tampered\\"}'))
  const store = join(dir, 'store-bad')
  const c = capture()
  assert.notEqual(await runCli(['import', bad, '--store', store], c.io), 0)
  assert.match(c.err.join('\n'), /TR_TRACE_(DIGEST_MISMATCH|FILE_INVALID)/)
  const s = await openStore(store)
  assert.deepEqual(await s.listTraces(), [], 'nothing was imported')
  await s.close()
})

test('a name already in the store, without --force, imports nothing and names --force; with it, all are replaced', async () => {
  const store = join(dir, 'store-taken')
  assert.equal(await runCli(['import', join(traces, 'auth'), '--store', store], capture().io), 0)
  const c = capture()
  assert.equal(await runCli(['import', traces, '--store', store], c.io), EXIT_CODES[ErrorCodes.TRACE_EXISTS])
  assert.match(c.err.join('\n'), /Trace "login" already exists .*`--force` on the command line/)
  assert.deepEqual(await names(store), ['login'], 'checkout was not imported beside the refusal')
  assert.equal(await runCli(['import', traces, '--store', store, '--force'], capture().io), 0)
  assert.deepEqual(await names(store), ['checkout', 'login'])
})

test('refusals before the store: one name twice, --as with several files, a folder without trace files', async () => {
  const twice = capture()
  assert.equal(await runCli(['import', traces, join(traces, 'checkout.trace.json'), '--store', join(dir, 'store-x')], twice.io), 64)
  assert.match(twice.err.join('\n'), /both hold trace "checkout"/)
  const as = capture()
  assert.equal(await runCli(['import', traces, '--as', 'x', '--store', join(dir, 'store-x')], as.io), 64)
  assert.match(as.err.join('\n'), /--as names one trace, but 2 trace files were given/)
  const empty = join(dir, 'empty')
  mkdirSync(empty)
  const none = capture()
  assert.equal(await runCli(['import', empty, '--store', join(dir, 'store-x')], none.io), 64)
  assert.match(none.err.join('\n'), /holds no \*\.trace\.json file/)
})
