/**
 * Issue 20, store hygiene: `tr-proxy gc` after `rm` of 100 traces returns their space (measured on disk), while
 * another process records into the same store the whole time, streaming big bodies and reusing bodies of the
 * traces being deleted: that recording survives whole, every body verified. `du` shows the space per trace.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { runCli } from '../cli/index.ts'
import { diskUsage, openStore, type TraceStore } from '../store/index.ts'
import { bodyFromBytes, type Exchange, TRACE_FORMAT_VERSION } from '../trace/index.ts'
import { bodyOf } from './fixtures/gc/bodies.ts'
import { agePieces } from './support/files-under.ts'
import { tempDir } from './support/proxy-harness.ts'

const RECORDER = fileURLToPath(new URL('./fixtures/gc/recorder.ts', import.meta.url))
const MB = 1024 * 1024

const cli = async (...argv: string[]) => {
  const out: string[] = []
  const err: string[] = []
  const code = await runCli(argv, { out: (t) => out.push(t), err: (t) => err.push(t) })
  return { code, out: out.join('\n'), err: err.join('\n') }
}

/** Trace `name` with body `k`'s small and big variants, and a body only this trace has. */
async function put(store: TraceStore, name: string, k: number): Promise<void> {
  const bodies = new Map<string, Uint8Array>()
  const exchanges: Exchange[] = [bodyOf(k, 'small'), bodyOf(k, 'big'), bodyOf(5000 + k, 'big')].map((bytes, seq) => {
    const body = bodyFromBytes(bytes)
    bodies.set(body.ref.digest, body.bytes)
    return {
      seq,
      request: { method: 'GET', url: `https://api.test/${name}/${seq}`, headers: [], body: null },
      outcome: { kind: 'response', response: { status: 200, statusText: 'OK', headers: [], body: body.ref, trailers: [] } },
      timing: { startMs: seq, headersMs: 1 },
    }
  })
  await store.putTrace({ meta: { name, format: TRACE_FORMAT_VERSION }, exchanges, bodies })
}

const total = (u: { database: number; pieces: number }) => u.database + u.pieces

test('gc after rm of 100 traces returns their space, and a recording running meanwhile survives whole', async (t) => {
  const dir = join(tempDir('tr-gc-'), 'store')
  let store = await openStore(dir)
  await put(store, 'keeper', 999)
  await store.close()
  const empty = await diskUsage(dir)
  store = await openStore(dir)
  for (let i = 0; i < 100; i++) await put(store, `t${i}`, i)
  await store.close()
  const full = await diskUsage(dir)
  assert.ok(total(full) - total(empty) > 40 * MB, `100 traces take ${((total(full) - total(empty)) / MB).toFixed(1)} MB`)

  const du = await cli('du', '--store', dir, '--json')
  assert.equal(du.code, 0, du.err)
  const usage = JSON.parse(du.out) as { traces: Array<{ name: string; bytes: number; shared: number }>; reclaimable: { bodies: number } }
  assert.equal(usage.traces.length, 101)
  assert.deepEqual(
    usage.traces.find((u) => u.name === 't7'),
    { ...usage.traces.find((u) => u.name === 't7'), bytes: 8 * 1024 + 400 * 1024, shared: 0 },
  )
  assert.equal(usage.reclaimable.bodies, 0)

  // The recorder owns the store from now on: rm and gc reach it over its socket, between its writes.
  // gc keeps every piece written since a running recording began, less 2 s of clock slack (store/gc.ts): the
  // deleted traces' pieces must be older than that, or gc rightly keeps them for the recording that starts now.
  assert.ok((await agePieces(dir, 60_000)) > 0, 'the traces have piece files')
  const recorder = spawn(process.execPath, ['--conditions=tool-replay-source', RECORDER, dir], { stdio: ['pipe', 'pipe', 'inherit'] })
  t.after(() => recorder.kill())
  const lines = createInterface({ input: recorder.stdout })[Symbol.asyncIterator]()
  assert.equal((await lines.next()).value, 'ready')

  const names = Array.from({ length: 100 }, (_, i) => `t${i}`)
  const rm = await cli('rm', ...names, '--store', dir)
  assert.equal(rm.code, 0, rm.err)
  const gc = await cli('gc', '--store', dir, '--json')
  assert.equal(gc.code, 0, gc.err)
  const report = JSON.parse(gc.out) as { bodies: number; pieces: number; bytes: number; keptRecent: number }
  // Each deleted trace had 3 bodies; the recording reuses some of them, and gc must keep those.
  assert.ok(report.bodies > 150 && report.bodies <= 300, `gc removed ${report.bodies} bodies`)

  // Watched before it is asked to stop: it may exit while its summary line is read (the gc-live-recording hang).
  const exited = once(recorder, 'exit')
  recorder.stdin.end('stop\n')
  const summary = JSON.parse((await lines.next()).value as string) as { exchanges: number; recorded: number; bytes: number; verified: boolean }
  await exited
  assert.equal(summary.exchanges, summary.recorded, 'every exchange the recorder appended is in its trace')
  assert.equal(summary.verified, true, 'every body of the recording reads back and verifies')

  // Read again from this process: whole, and every body checked against its SHA-256 on the way.
  store = await openStore(dir)
  const live = await store.readTrace('live')
  assert.equal(live.exchanges.length, summary.recorded)
  assert.equal((await store.readTrace('keeper')).exchanges.length, 3)
  assert.deepEqual((await store.gc({ dryRun: true })).bodies, 0)
  await store.close()

  const after = await diskUsage(dir)
  // What the traces left after gc hold (the recording keeps the bodies of deleted traces it reused): gc returns
  // everything else, give or take LevelDB's own files (its log, tables of a compaction that close stopped).
  const left = await cli('du', '--store', dir, '--json')
  const kept = (JSON.parse(left.out) as { traces: Array<{ bytes: number }> }).traces.reduce((n, u) => n + u.bytes, 0)
  t.diagnostic(
    `store on disk: ${(total(empty) / MB).toFixed(1)} MB with 1 trace, ${(total(full) / MB).toFixed(1)} MB with 101, ${(total(after) / MB).toFixed(1)} MB after rm of 100 + gc (the recording meanwhile added ${(summary.bytes / MB).toFixed(1)} MB in ${summary.recorded} exchanges; the traces left reference ${(kept / MB).toFixed(1)} MB); gc removed ${report.bodies} bodies and ${report.pieces} piece files (${(report.bytes / MB).toFixed(1)} MB)`,
  )
  t.diagnostic(`after: database ${(after.database / MB).toFixed(1)} MB, pieces ${(after.pieces / MB).toFixed(1)} MB`)
  assert.ok(total(after) <= kept + 4 * MB, `${(total(after) / MB).toFixed(1)} MB on disk for ${(kept / MB).toFixed(1)} MB of referenced bodies`)
  assert.ok(total(full) - total(after) + kept >= 0.9 * (total(full) - total(empty)), "the 100 traces' space came back")
})
